// Where data workers may run (GoldMiner's GPU-aware placement).
//
// Every node keeps a CPU reserve of `free GPUs x cpus_per_gpu` so that a GPU
// never becomes unallocatable for lack of CPUs on its own node ("GPU free,
// CPU exhausted"). Data workers use only CPUs beyond the reserve, first on
// GPU nodes whose GPUs are all busy (their spare CPUs are otherwise
// stranded), then on CPU-only nodes, last on GPU nodes with free GPUs.
// Units: milli-CPU and milli-GPU, as Kubernetes and the Alibaba traces use.
#ifndef GOLDMINER_SCHED_PLACEMENT_H_
#define GOLDMINER_SCHED_PLACEMENT_H_

#include <cstdint>
#include <vector>

#include "gmcore/status.h"

namespace goldminer {

struct NodeResources {
  int64_t cpu_total = 0;  // milli-CPU
  int64_t cpu_free = 0;
  int64_t gpu_total = 0;  // milli-GPU (1000 per device)
  int64_t gpu_free = 0;
};

struct PlacementConfig {
  // CPUs held back per free GPU: what a GPU job's trainer needs on its node.
  double cpus_per_gpu = 1.0;
};

// The reserve of `node`, in milli-CPU: free GPUs x cpus_per_gpu, rounded up.
int64_t cpu_reserve(const NodeResources& node, const PlacementConfig& config);

// CPUs on `node` that data workers and CPU-only jobs may take without
// touching the reserve.
int64_t spare_cpu(const NodeResources& node, const PlacementConfig& config);

// 0: GPU node with every GPU busy; 1: CPU-only node; 2: GPU node with free
// GPUs. Data workers go to lower ranks first.
int placement_rank(const NodeResources& node);

// Chooses nodes for up to `count` workers of `cpu_per_worker` milli-CPU
// each; returns one node index per worker placed (fewer than `count` when
// the spare CPUs run out). Within a rank, nodes with more spare CPUs come
// first, so a job's workers share few nodes. Does not modify `nodes`.
std::vector<int> place_workers(const std::vector<NodeResources>& nodes, int count,
                               int64_t cpu_per_worker, const PlacementConfig& config);

// A data worker running on a node, as preemption sees it.
struct PlacedWorker {
  uint64_t worker_id = 0;
  int64_t cpu = 0;           // milli-CPU it holds
  double marginal_gain = 0;  // what its job loses without it (lower goes first)
};

// A GPU job needs `cpu_needed` milli-CPU on `node` (with its GPUs). Returns
// the workers to preempt to free them, least valuable first, or an error
// if even preempting every worker would not be enough. Empty when the free
// CPUs already suffice.
Expected<std::vector<uint64_t>> workers_to_preempt(const NodeResources& node, int64_t cpu_needed,
                                                   std::vector<PlacedWorker> workers);

}  // namespace goldminer

#endif  // GOLDMINER_SCHED_PLACEMENT_H_
