#include "sched/worker_pool.h"

namespace goldminer {

double spare_worker_cpus(const std::vector<PoolNode>& nodes, const PlacementConfig& config) {
  int64_t milli = 0;
  for (const PoolNode& n : nodes) milli += spare_cpu(n.resources, config);
  return static_cast<double>(milli) / 1000;
}

}  // namespace goldminer
