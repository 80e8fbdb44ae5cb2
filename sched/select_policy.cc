#include "sched/select_policy.h"

#include <cstdlib>
#include <cstring>

#include "gmcore/option_table.h"
#include "sched/placement.h"

namespace goldminer {

uint32_t reserve_cores(const NodeUsage& node, const SelectConfig& config) {
  NodeResources resources;
  resources.gpu_total = int64_t{1000} * node.gpus_total;
  resources.gpu_free = int64_t{1000} * node.gpus_free;
  PlacementConfig placement;
  placement.cpus_per_gpu = config.reserve_cpus_per_gpu;
  int64_t milli_cpu = cpu_reserve(resources, placement);
  int64_t milli_per_core = int64_t{1000} * (node.cpus_per_core ? node.cpus_per_core : 1);
  return static_cast<uint32_t>((milli_cpu + milli_per_core - 1) / milli_per_core);
}

uint32_t configured_reserve_cores(const NodeUsage& node, const SelectConfig& config) {
  NodeUsage all_free = node;
  all_free.gpus_free = node.gpus_total;
  return reserve_cores(all_free, config);
}

JobTestPlan plan_job_test(const SelectConfig& config, JobKind kind, TestMode mode,
                          const std::vector<NodeUsage>& nodes) {
  JobTestPlan plan;
  plan.nodes.resize(nodes.size());
  if (mode == TestMode::kTestOnly || kind == JobKind::kGpu) return plan;
  bool tiered = kind == JobKind::kDataWorker && mode == TestMode::kRunNow;
  bool tier_used[3] = {false, false, false};
  for (size_t i = 0; i < nodes.size(); ++i) {
    const NodeUsage& node = nodes[i];
    NodePlan& out = plan.nodes[i];
    // Will-run: held on configured cores, never judged by today's free ones
    // (header: will-run).
    const bool will_run = mode == TestMode::kWillRun;
    const uint32_t reserve = will_run ? configured_reserve_cores(node, config) : reserve_cores(node, config);
    if (reserve > 0 && (will_run ? node.cores_total : node.cores_free) <= reserve) {
      out.usable = false;
      ++plan.nodes_dropped;
      plan.narrows = true;
      continue;
    }
    out.hidden_cores = reserve;
    if (will_run) out.hide_allocated = reserve > 0;
    plan.cores_hidden += reserve;
    if (reserve > 0) plan.narrows = true;
    if (will_run) continue;
    if (tiered) {
      NodeResources r;
      r.gpu_total = node.gpus_total;
      r.gpu_free = node.gpus_free;
      out.tier = placement_rank(r);
      tier_used[out.tier] = true;
    }
  }
  if (tiered) {
    // Tiers are cumulative: tier t offers every node of tier <= t. The
    // last tier holding a node is the last worth a try.
    plan.tiers = tier_used[2] ? 3 : tier_used[1] ? 2 : 1;
    // With one tier only, the call is as cons_tres would make it.
    if (tier_used[0] + tier_used[1] + tier_used[2] > 1) plan.narrows = true;
  }
  return plan;
}

bool tres_requests_gpu(const char* tres) {
  if (!tres || !*tres) return false;
  for (const std::string& item : split(tres, ',')) {
    std::vector<std::string> parts = split(item, ':');
    // "gres:gpu..." (22.05), "gres/gpu..." (23.02 on), "gpu...".
    if (!parts.empty() && parts[0] == "gres/gpu") parts[0] = "gpu";
    size_t name = parts.size() > 1 && parts[0] == "gres" ? 1 : 0;
    if (parts.size() <= name || parts[name] != "gpu") continue;
    // gpu, gpu:N, gpu:TYPE:N: the count is the last part when it is a
    // number; no count means one.
    const std::string& last = parts.back();
    if (parts.size() == name + 1) return true;
    char* end = nullptr;
    unsigned long long n = std::strtoull(last.c_str(), &end, 10);
    if (end && *end == '\0' && !last.empty()) {
      if (n > 0) return true;
    } else {
      return true;  // gpu:TYPE means one of that type
    }
  }
  return false;
}

}  // namespace goldminer
