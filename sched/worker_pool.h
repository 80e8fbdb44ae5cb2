// The CPUs goldminer-ctld shares among jobs' data workers, from the nodes
// as `scontrol --details --oneliner show node` lists them: every usable node of the
// workers' partition gives its spare CPUs (placement.h: free CPUs beyond
// the reserve kept next to its free GPUs), and the CPUs the registered
// jobs' workers already hold are added back (they are what is shared).
#ifndef GOLDMINER_SCHED_WORKER_POOL_H_
#define GOLDMINER_SCHED_WORKER_POOL_H_

#include <string>
#include <vector>

#include "gmcore/status.h"
#include "sched/placement.h"

namespace goldminer {

struct PoolNode {
  std::string name;
  NodeResources resources;
};

// Nodes of `partition` ("" every node) that can run workers: not down,
// drained, failed or unresponsive. An error names the line that lacks
// NodeName, CPUTot or CPUAlloc, or has a bad number.
Expected<std::vector<PoolNode>> parse_node_list(const std::string& text, const std::string& partition);

// Spare CPUs of `nodes` (whole CPUs) under `config`'s reserve.
double spare_worker_cpus(const std::vector<PoolNode>& nodes, const PlacementConfig& config);

}  // namespace goldminer

#endif  // GOLDMINER_SCHED_WORKER_POOL_H_
