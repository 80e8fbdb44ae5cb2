#include "sched/worker_pool.h"

#include <map>
#include <sstream>

namespace goldminer {
namespace {

bool whole_number(const std::string& s) {
  return !s.empty() && s.size() <= 12 && s.find_first_not_of("0123456789") == std::string::npos;
}

// GPUs in a GRES list as `scontrol -d show node` prints Gres= and
// GresUsed= ("gpu:4", "gpu:a100:2(IDX:0-1),nic:1", "(null)"); 0 when none.
Expected<int64_t> gpus_in(const std::string& gres) {
  std::string plain;  // without the "(...)" parts, whose commas are not separators
  int depth = 0;
  for (char c : gres) {
    if (c == '(') ++depth;
    else if (c == ')') depth = std::max(0, depth - 1);
    else if (depth == 0) plain += c;
  }
  int64_t n = 0;
  std::istringstream items(plain);
  std::string item;
  while (std::getline(items, item, ',')) {
    if (item.compare(0, 4, "gpu:") != 0) continue;
    std::string count = item.substr(item.rfind(':') + 1);
    if (!whole_number(count)) return Status::error("bad GPU count '" + item + "'");
    n += std::stoll(count);
  }
  return n;
}

bool usable(const std::string& state) {
  for (const char* bad : {"DOWN", "DRAIN", "FAIL", "NOT_RESPONDING", "POWER", "*"})
    if (state.find(bad) != std::string::npos) return false;
  return true;
}

}  // namespace

Expected<std::vector<PoolNode>> parse_node_list(const std::string& text, const std::string& partition) {
  std::vector<PoolNode> nodes;
  std::istringstream lines(text);
  std::string line;
  int number = 0;
  while (std::getline(lines, line)) {
    ++number;
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    std::map<std::string, std::string> f;
    std::istringstream words(line);
    std::string w;
    while (words >> w) {
      size_t eq = w.find('=');
      if (eq != std::string::npos) f[w.substr(0, eq)] = w.substr(eq + 1);
    }
    const std::string where = "node list line " + std::to_string(number);
    for (const char* key : {"NodeName", "CPUTot", "CPUAlloc"})
      if (f.count(key) == 0) return Status::error(where + ": no " + key);
    if (!whole_number(f["CPUTot"]) || !whole_number(f["CPUAlloc"]))
      return Status::error(where + ": bad CPUTot or CPUAlloc '" + f["CPUTot"] + "', '" + f["CPUAlloc"] + "'");
    if (!usable(f["State"])) continue;
    if (!partition.empty()) {
      std::istringstream parts(f["Partitions"]);
      std::string p;
      bool in = false;
      while (std::getline(parts, p, ',')) in = in || p == partition;
      if (!in) continue;
    }
    auto gpus = gpus_in(f["Gres"]);
    auto used = gpus_in(f["GresUsed"]);
    if (!gpus.ok() || !used.ok()) return Status::error(where + ": " + (gpus.ok() ? used : gpus).status().message());
    PoolNode n;
    n.name = f["NodeName"];
    n.resources.cpu_total = std::stoll(f["CPUTot"]) * 1000;
    n.resources.cpu_free = std::max<int64_t>(0, n.resources.cpu_total - std::stoll(f["CPUAlloc"]) * 1000);
    n.resources.gpu_total = *gpus * 1000;
    n.resources.gpu_free = std::max<int64_t>(0, (*gpus - *used) * 1000);
    nodes.push_back(n);
  }
  return nodes;
}

double spare_worker_cpus(const std::vector<PoolNode>& nodes, const PlacementConfig& config) {
  int64_t milli = 0;
  for (const PoolNode& n : nodes) milli += spare_cpu(n.resources, config);
  return static_cast<double>(milli) / 1000;
}

}  // namespace goldminer
