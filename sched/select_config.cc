#include "sched/select_config.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <map>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "launch/admin_config.h"

namespace goldminer {
namespace {

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

// plugstack.conf's row for `key` (launch/admin_config.h), so that the
// select plugin's copy of a site limit has the same default and check.
OptionSpec site_limit_row(const std::string& key) {
  for (const OptionSpec& row : admin_option_table())
    if (row.key == key) {
      OptionSpec copy = row;
      copy.help += "; give it the value plugstack.conf gives spank_goldminer.so (slurmctld does not read "
                   "plugstack.conf): a data worker job is placed as one only while its trainer's workers hold "
                   "no more than dw-max x cpus-per-dw CPUs under these limits";
      copy.env.clear();
      return copy;
    }
  throw std::logic_error("no plugstack.conf row " + key);  // a programming error; callers catch
}

}  // namespace

const OptionTable& select_option_table() {
  static const OptionTable table = {
      {"reserve_cpus_per_gpu", "1", "CPUS",
       "CPUs kept free next to each free GPU: jobs that ask for no GPU on a node, data workers "
       "included, use only the CPUs beyond free GPUs x CPUS there (0 turns the reserve off)",
       number_in_range(0, 1024), ""},
      {"mode", "enforce", "enforce|observe",
       "enforce narrows the nodes and cores cons_tres may choose; observe logs what enforce would "
       "have done and leaves every decision to cons_tres",
       one_of({"enforce", "observe"}), ""},
      {"inject_fault", "no", "no|decision",
       "for tests: decision makes every decision of the plugin fail as an internal error would "
       "(cons_tres's own decision is used and one line logged)",
       one_of({"no", "decision"}), ""},
      site_limit_row("max_dw_per_job"),
      site_limit_row("max_cpus_per_dw"),
  };
  return table;
}

Expected<SelectConfig> parse_select_config(const std::string& text, const std::string& path) {
  std::istringstream in(text);
  std::string line;
  std::vector<std::string> tokens;
  std::map<std::string, int> line_of_key;
  for (int number = 1; std::getline(in, line); ++number) {
    size_t hash = line.find('#');
    if (hash != std::string::npos) line.erase(hash);
    line = trim(line);
    if (line.empty()) continue;
    std::string where = path + ":" + std::to_string(number);
    size_t eq = line.find('=');
    if (eq == std::string::npos) return Status::error(where + ": '" + line + "': expected key=value");
    std::string token = trim(line.substr(0, eq)) + "=" + trim(line.substr(eq + 1));
    std::string key = token.substr(0, token.find('='));
    auto seen = line_of_key.find(key);
    if (seen != line_of_key.end())
      return Status::error(where + ": " + key + ": given more than once (first on line " +
                           std::to_string(seen->second) + ")");
    // Each line alone first, so that its error names its line.
    auto one = parse_options(select_option_table(), {token}, where);
    if (!one.ok()) return one.status();
    line_of_key[key] = number;
    tokens.push_back(token);
  }
  auto values = parse_options(select_option_table(), tokens, path);
  if (!values.ok()) return values.status();
  SelectConfig config;
  config.reserve_cpus_per_gpu = std::strtod(values->text("reserve_cpus_per_gpu").c_str(), nullptr);
  config.mode = values->text("mode") == "observe" ? SelectConfig::Mode::kObserve : SelectConfig::Mode::kEnforce;
  config.inject_fault = values->text("inject_fault") == "decision";
  config.max_dw_per_job = static_cast<int>(values->integer("max_dw_per_job"));
  config.max_cpus_per_dw = static_cast<int>(values->integer("max_cpus_per_dw"));
  return config;
}

Expected<SelectConfig> load_select_config(const std::string& path) {
  FILE* file = std::fopen(path.c_str(), "r");
  if (!file) {
    if (errno == ENOENT) return SelectConfig{};
    return Status::error(path + ": cannot read: " + std::strerror(errno));
  }
  std::string text;
  char chunk[4096];
  size_t n;
  while ((n = std::fread(chunk, 1, sizeof(chunk), file)) > 0) text.append(chunk, n);
  bool failed = std::ferror(file) != 0;
  int saved = errno;
  std::fclose(file);
  if (failed) return Status::error(path + ": cannot read: " + std::strerror(saved));
  return parse_select_config(text, path);
}

std::string select_config_path(const std::string& slurm_conf_path) {
  size_t slash = slurm_conf_path.rfind('/');
  if (slash == std::string::npos) return "goldminer.conf";
  return slurm_conf_path.substr(0, slash + 1) + "goldminer.conf";
}

}  // namespace goldminer
