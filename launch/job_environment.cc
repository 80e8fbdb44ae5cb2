#include "launch/job_environment.h"

#include <cstdlib>
#include <string>
#include <tuple>

#include "gmcore/option_table.h"
#include "launch/admin_config.h"
#include "launch/job_options.h"
#include "launch/subprocess.h"

namespace goldminer {
namespace {

using Store = std::function<void(JobEnvironment*, const std::string&)>;

// Stores into a field; the row's check has passed, so conversions cannot fail.
Store text(std::string JobEnvironment::*field) {
  return [field](JobEnvironment* e, const std::string& v) { e->*field = v; };
}
template <typename Field>  // int or std::optional<int>
Store whole(Field JobEnvironment::*field) {
  return [field](JobEnvironment* e, const std::string& v) { e->*field = static_cast<int>(std::strtol(v.c_str(), nullptr, 10)); };
}
Store job_id(uint32_t JobEnvironment::*field) {
  return [field](JobEnvironment* e, const std::string& v) {
    e->*field = static_cast<uint32_t>(std::strtoul(v.c_str(), nullptr, 10));
  };
}

constexpr long kMaxJobId = 4294967295L;  // Slurm's job ids are uint32_t; 0 is none
constexpr unsigned kSessionAndWorker = kReadBySession | kReadByWorker;

// The rows whose value is a job option's (launch/job_options.h) or a site
// setting's (launch/admin_config.h): the option's check and help.
JobEnvironmentVariable from_option(const OptionSpec& row, const std::string& whose, unsigned readers, Store store) {
  JobEnvironmentVariable v;
  v.name = row.env;
  v.value_doc = row.value_doc;
  v.readers = readers;
  v.help = "The value of " + whose + " " + row.key + ": " + row.help;
  v.check = row.check;
  v.store = std::move(store);
  return v;
}

const OptionSpec& option_row(const OptionTable& table, const std::string& key) {
  for (const OptionSpec& row : table)
    if (row.key == key) return row;
  std::abort();  // a key of this file's own list: a bug a test catches at once
}

std::vector<JobEnvironmentVariable> make_table() {
  const OptionTable& job = job_option_table();
  const OptionTable& site = admin_option_table();
  const std::string option = "the job's --goldminer option";
  const std::string setting = "the site's plugstack.conf setting";
  std::vector<JobEnvironmentVariable> t;
  auto add = [&t](std::string name, std::string value_doc, unsigned readers, std::string help, ValueCheck check,
                  Store store) {
    JobEnvironmentVariable v;
    v.name = std::move(name);
    v.value_doc = std::move(value_doc);
    v.readers = readers;
    v.help = std::move(help);
    v.check = std::move(check);
    v.store = std::move(store);
    t.push_back(std::move(v));
    return &t.back();
  };
  // Where the trainer listens and its workers connect.
  add("GOLDMINER_LISTEN", "ucx://HOST:PORT", kReadBySession,
      "Where the trainer's session listens: set in a job whose workers start as a companion job or a step, and by "
      "goldminer-run for its command",
      nullptr, text(&JobEnvironment::listen));
  add("GOLDMINER_RANK_LISTEN", "ucx://HOST:PORT", kReadBySession,
      "In each task of a multi-task srun step but the first: the address reserved for the session of the rank that "
      "is the task's SLURM_PROCID (not for torchrun's processes, which set RANK)",
      nullptr, text(&JobEnvironment::rank_listen));
  // firewall=nftables: the UCX TCP port reserved beside each listener.
  for (const auto& [prefix, whose, field] : {std::tuple{"GOLDMINER_", "trainer", &JobEnvironment::ucx_port},
                                             std::tuple{"GOLDMINER_RANK_", "rank", &JobEnvironment::rank_ucx_port}})
    add(std::string(prefix) + "UCX_PORT", "PORT", kReadBySession,
        std::string("With firewall=nftables: the port reserved for the UCX TCP transport of the ") + whose +
            ", beside " + prefix + "LISTEN",
        integer_in_range(1, 65535), whole(field));
  add("GOLDMINER_TRAINER", "ucx://HOST:PORT", kSessionAndWorker,
      "The trainer's address its workers connect to (goldminer-dw's default of --trainer); an elastic session "
      "gives it to the workers it starts",
      nullptr, text(&JobEnvironment::trainer));
  add("GOLDMINER_LOCAL_WORKERS", "N", kReadBySession,
      "Data workers the session starts on its own node as processes (goldminer-run sets it)",
      integer_in_range(0, 1024), [](JobEnvironment* e, const std::string& v) {
        e->local_workers = static_cast<uint32_t>(std::strtoul(v.c_str(), nullptr, 10));
      });
  // Proving uid and job.
  add("GOLDMINER_AUTH", "munge|secret", kSessionAndWorker,
      "munge: the session and its workers prove uid and job with munge (the secret variables are then ignored); "
      "secret: with the job secret",
      one_of({"munge", "secret"}), text(&JobEnvironment::auth));
  add("GOLDMINER_AUTH_JOB", "JOB", kSessionAndWorker,
      "The trainer's job id that munge credentials name (required with GOLDMINER_AUTH=munge)",
      integer_in_range(1, kMaxJobId), job_id(&JobEnvironment::auth_job));
  t.push_back(from_option(option_row(site, "munge_socket"), setting, kSessionAndWorker,
                          text(&JobEnvironment::munge_socket)));
  t.back().help = "munged's socket, through which the session and its workers prove uid and job and the session "
                  "reports to goldminer-ctld (the site's plugstack.conf munge_socket; default: munge's own)";
  add("GOLDMINER_SECRET", "TEXT", kSessionAndWorker,
      "The job secret, used as is when set (the secret file is then ignored); set but empty is an error", nullptr,
      [](JobEnvironment* e, const std::string& v) { e->secret = v; });
  t.back().secret = true;
  t.back().empty_is_set = true;
  add("GOLDMINER_SECRET_FILE", "PATH", kSessionAndWorker,
      "The file holding the job secret, when GOLDMINER_SECRET is not set", nullptr,
      text(&JobEnvironment::secret_file));
  // The job's data workers.
  add("GOLDMINER_DW_JOB", "JOB", kReadBySession, "The companion job's id (its state is named when the session gives up "
      "waiting for its workers)", integer_in_range(1, kMaxJobId), job_id(&JobEnvironment::dw_job));
  add("GOLDMINER_DW_STEP", "JOB+K", kReadByJobScript,
      "Instead of GOLDMINER_DW_JOB, in a heterogeneous job: the component the workers' step runs in; GOLDMINER_DW is "
      "then its number of tasks",
      nullptr, nullptr);
  add("GOLDMINER_DW_ERROR", "TEXT", kReadBySession,
      "Instead of GOLDMINER_DW_JOB, why the companion job could not be submitted", nullptr,
      text(&JobEnvironment::dw_error));
  add("GOLDMINER_DW_PROGRAM", "PATH", kReadBySession,
      "The goldminer-dw the session starts for local workers (default: the one installed beside it)", nullptr,
      text(&JobEnvironment::dw_program));
  add("GOLDMINER_PYTHON", "PATH", kReadByWorker,
      "The Python interpreter that runs a goldminer.DataLoader's dataset (default: the trainer's, by path; it needs "
      "torch and the goldminer package)",
      nullptr, text(&JobEnvironment::python));
  // The trainer's container: the workers run its Python code in the image.
  add("GOLDMINER_CONTAINER_IMAGE", "PATH|NAME", kReadBySession,
      "The container image the trainer runs in, which goldminer-dw enters to run the trainer's Python code (a "
      "goldminer.DataLoader's dataset, a TorchScript program for another torch): a squashfs file (enroot) or an image "
      "directory (ch-run) by absolute path, or the name of an enroot container on the workers' nodes. The plugin "
      "sets it from pyxis's --container-image (srun's, else sbatch's, else PYXIS_CONTAINER_IMAGE) unless it is set",
      nullptr, text(&JobEnvironment::container_image));
  add("GOLDMINER_CONTAINER_RUNTIME", "enroot|ch-run", kReadBySession,
      "How goldminer-dw enters GOLDMINER_CONTAINER_IMAGE (default enroot, as pyxis does): enroot start, or "
      "Charliecloud's ch-run",
      one_of({"enroot", "ch-run"}), text(&JobEnvironment::container_runtime));
  add("GOLDMINER_CONTAINER_MOUNTS", "SRC[:DST[:FLAGS]],...", kReadBySession,
      "What goldminer-dw mounts into GOLDMINER_CONTAINER_IMAGE besides the goldminer package, in pyxis's "
      "--container-mounts form (the plugin sets it from pyxis's, with the image)",
      nullptr, text(&JobEnvironment::container_mounts));
  add("GOLDMINER_DW_BIND", "cores|none", kReadByWorker, "goldminer-dw's default of --bind", one_of({"cores", "none"}),
      text(&JobEnvironment::dw_bind));
  t.push_back(from_option(option_row(job, "dw"), option, kReadBySession, whole(&JobEnvironment::dw)));
  t.push_back(from_option(option_row(job, "dw-max"), option, kReadBySession, whole(&JobEnvironment::dw_max)));
  t.push_back(
      from_option(option_row(job, "cpus-per-dw"), option, kReadBySession, whole(&JobEnvironment::cpus_per_dw)));
  t.push_back(from_option(option_row(job, "transport"), option, kReadByJobScript, nullptr));
  t.push_back(from_option(option_row(job, "mode"), option, kReadBySession, text(&JobEnvironment::mode)));
  add("GOLDMINER_OPTIONS", "KEY=VALUE,...", kReadByJobScript,
      "All job settings in canonical form, e.g. dw=1,dw-max=8,cpus-per-dw=2,transport=ucx,mode=elastic; it is a "
      "valid --goldminer value",
      nullptr, nullptr);
  t.push_back(from_option(option_row(site, "dw_partition"), setting, kReadByJobScript, nullptr));
  t.push_back(from_option(option_row(site, "dw_qos"), setting, kReadByJobScript, nullptr));
  add("GOLDMINER_DW_SBATCH", "WORDS", kReadBySession,
      "With mode=elastic: the sbatch arguments, as shell words, of one more worker; the session submits them to grow",
      nullptr, text(&JobEnvironment::dw_sbatch));
  add("GOLDMINER_AUTOSCALE_INTERVAL", "SECONDS", kReadBySession,
      "Not set by the plugin: seconds between the session's observations (default 5); set it in the job script to "
      "react faster",
      number_in_range(0.01, 3600), [](JobEnvironment* e, const std::string& v) {
        e->autoscale_interval_s = std::strtod(v.c_str(), nullptr);
      });
  t.push_back(from_option(option_row(site, "ctld"), setting, kReadBySession | kReadByTop, text(&JobEnvironment::ctld)));
  t.push_back(
      from_option(option_row(site, "ctld_user"), setting, kReadBySession, text(&JobEnvironment::ctld_user)));
  for (JobEnvironmentVariable& v : t)
    for (const char* own : {"GOLDMINER_LOCAL_WORKERS", "GOLDMINER_SECRET", "GOLDMINER_SECRET_FILE",
                            "GOLDMINER_DW_PROGRAM", "GOLDMINER_PYTHON", "GOLDMINER_DW_BIND",
                            "GOLDMINER_CONTAINER_RUNTIME"})
      if (v.name == own) v.job_page = false;
  return t;
}

// NAME's value in ENV, or nothing when it is not there.
std::optional<std::string> lookup(const std::vector<std::string>& env, const std::string& name) {
  const std::string prefix = name + "=";
  for (const std::string& e : env)
    if (e.compare(0, prefix.size(), prefix) == 0) return e.substr(prefix.size());
  return std::nullopt;
}

}  // namespace

const std::vector<JobEnvironmentVariable>& job_environment_table() {
  static const std::vector<JobEnvironmentVariable> table = make_table();
  return table;
}

Expected<JobEnvironment> read_job_environment(const std::vector<std::string>& env, unsigned reader) {
  JobEnvironment out;
  for (const JobEnvironmentVariable& row : job_environment_table()) {
    if ((row.readers & reader) == 0 || !row.store) continue;
    std::optional<std::string> value = lookup(env, row.name);
    if (!value || (value->empty() && !row.empty_is_set)) continue;
    if (row.check && !(value->empty() && row.empty_is_set)) {
      std::string why = row.check(*value);
      if (!why.empty()) return Status::error(row.name + ": invalid value '" + value->substr(0, 200) + "': " + why);
    }
    row.store(&out, *value);
    out.read.emplace_back(row.name, *value);
  }
  return out;
}

Expected<JobEnvironment> process_job_environment(unsigned reader) {
  return read_job_environment(process_environment(), reader);
}

std::string describe_job_environment(const JobEnvironment& read, unsigned reader) {
  std::string out;
  for (const JobEnvironmentVariable& row : job_environment_table()) {
    if ((row.readers & reader) == 0 || !row.store) continue;
    const std::string* value = nullptr;
    for (const auto& [name, v] : read.read)
      if (name == row.name) value = &v;
    if (value == nullptr) out += "# " + row.name + " unset\n";
    else if (row.secret) out += "# " + row.name + " set (" + std::to_string(value->size()) + " bytes, not shown)\n";
    else out += row.name + "=" + *value + "  # environment\n";
  }
  return out;
}

void JobVariables::set(const std::string& name, const std::string& value) {
  for (auto& [n, v] : vars_)
    if (n == name) {
      v = value;
      return;
    }
  vars_.emplace_back(name, value);
}

void JobVariables::add(const std::vector<std::pair<std::string, std::string>>& vars) {
  for (const auto& [name, value] : vars) set(name, value);
}

Status JobVariables::check() const {
  for (const auto& [name, value] : vars_) {
    if (name.rfind("GOLDMINER_", 0) != 0) continue;
    const JobEnvironmentVariable* row = nullptr;
    for (const JobEnvironmentVariable& r : job_environment_table())
      if (r.name == name) row = &r;
    if (row == nullptr) return Status::error(name + ": not a variable of the job-environment contract");
    if (value.empty() && !row->empty_is_set) return Status::error(name + ": set empty, which its readers take as unset");
    if (!row->check) continue;
    std::string why = row->check(value);
    if (!why.empty()) return Status::error(name + ": invalid value '" + value.substr(0, 200) + "': " + why);
  }
  return Status();
}

namespace {

std::string man_rows(const std::function<bool(const JobEnvironmentVariable&)>& which) {
  std::string out;
  for (const JobEnvironmentVariable& row : job_environment_table()) {
    if (!which(row)) continue;
    out += ".TP\n\\fB" + roff_escape(row.name) + "\\fR=\\fI" + roff_escape(row.value_doc) + "\\fR\n";
    out += roff_escape(row.help) + ".\n";
  }
  return out;
}

}  // namespace

std::string render_man_job_environment(unsigned reader) {
  return man_rows([reader](const JobEnvironmentVariable& row) { return (row.readers & reader) != 0; });
}

std::string render_man_plugin_environment() {
  return man_rows([](const JobEnvironmentVariable& row) { return row.job_page; });
}

}  // namespace goldminer
