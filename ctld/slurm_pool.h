// What goldminer-ctld reads of Slurm each pool refresh
// (ctld/ctld_service.h): the spare CPUs of the workers' nodes (scontrol
// show node, through sched/worker_pool.h's reserve) and, from one squeue of
// the pending and running jobs, which jobs have companion jobs
// (goldminer-dw.J), whose, and the CPUs the running ones hold. The
// commands run and their output is read by launch/slurm_cli.h; here only
// what the service makes of them.
#ifndef GOLDMINER_CTLD_SLURM_POOL_H_
#define GOLDMINER_CTLD_SLURM_POOL_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gmcore/status.h"
#include "launch/slurm_cli.h"
#include "sched/placement.h"
#include "sched/worker_pool.h"

namespace goldminer {

struct SlurmCpus {
  double spare = 0;
  // job J -> uid -> CPUs of the running jobs named goldminer-dw.J that uid
  // owns (anyone may name a job so: only the owner's count for J).
  using Held = std::map<uint32_t, std::map<uid_t, double>>;
  Held workers;
  // (J, uid) for every pending or running job named goldminer-dw.J of that
  // uid: J is a --goldminer job of that uid (its plugin submitted them).
  std::set<std::pair<uint32_t, uid_t>> companions;
};

// The companion jobs among `queue` (named goldminer-dw.J exactly) by J and
// uid, and the CPUs of the running ones; other names are skipped.
void add_companions(const std::vector<QueuedJob>& queue, SlurmCpus* found);

// The nodes of `partition` ("" every node) that can run workers (launch's
// node_takes_jobs), as the pool counts them.
std::vector<PoolNode> pool_nodes(const std::vector<SlurmNode>& nodes, const std::string& partition);

// One refresh: the nodes' spare CPUs under `placement`'s reserve and the
// companion jobs, through `run` (scontrol, then squeue); an error names
// the command that failed.
Expected<SlurmCpus> read_slurm_cpus(const SlurmCommand& run, const std::string& partition,
                                    const PlacementConfig& placement);

}  // namespace goldminer

#endif  // GOLDMINER_CTLD_SLURM_POOL_H_
