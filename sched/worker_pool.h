// The CPUs goldminer-ctld shares among jobs' data workers: every usable
// node of the workers' partition (ctld/slurm_pool.h makes them from
// Slurm's node lines) gives its spare CPUs (placement.h: free CPUs beyond
// the reserve kept next to its free GPUs), and the CPUs the registered
// jobs' workers already hold are added back (they are what is shared).
#ifndef GOLDMINER_SCHED_WORKER_POOL_H_
#define GOLDMINER_SCHED_WORKER_POOL_H_

#include <string>
#include <vector>

#include "sched/placement.h"

namespace goldminer {

struct PoolNode {
  std::string name;
  NodeResources resources;
};

// Spare CPUs of `nodes` (whole CPUs) under `config`'s reserve.
double spare_worker_cpus(const std::vector<PoolNode>& nodes, const PlacementConfig& config);

}  // namespace goldminer

#endif  // GOLDMINER_SCHED_WORKER_POOL_H_
