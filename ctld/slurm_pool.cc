#include "ctld/slurm_pool.h"

#include <algorithm>
#include <cstdlib>

namespace goldminer {

void add_companions(const std::vector<QueuedJob>& queue, SlurmCpus* found) {
  const std::string prefix = "goldminer-dw.";
  for (const QueuedJob& q : queue) {
    const std::string& name = q.name;
    if (name.size() <= prefix.size() || name.rfind(prefix, 0) != 0 ||
        name.find_first_not_of("0123456789", prefix.size()) != std::string::npos || name.size() > prefix.size() + 10)
      continue;
    const unsigned long long job = std::strtoull(name.c_str() + prefix.size(), nullptr, 10);
    if (job == 0 || job > 4294967295ull) continue;
    found->companions.emplace(static_cast<uint32_t>(job), q.uid);
    if (q.state == "RUNNING") found->workers[static_cast<uint32_t>(job)][q.uid] += q.cpus;
  }
}

std::vector<PoolNode> pool_nodes(const std::vector<SlurmNode>& nodes, const std::string& partition) {
  std::vector<PoolNode> pool;
  for (const SlurmNode& n : nodes) {
    if (!node_takes_jobs(n)) continue;
    if (!partition.empty() && std::find(n.partitions.begin(), n.partitions.end(), partition) == n.partitions.end())
      continue;
    PoolNode p;
    p.name = n.name;
    p.resources.cpu_total = n.cpus_total * 1000;
    p.resources.cpu_free = std::max<int64_t>(0, p.resources.cpu_total - n.cpus_allocated * 1000);
    p.resources.gpu_total = n.gpus * 1000;
    p.resources.gpu_free = std::max<int64_t>(0, (n.gpus - n.gpus_used) * 1000);
    pool.push_back(p);
  }
  return pool;
}

Expected<SlurmCpus> read_slurm_cpus(const SlurmCommand& run, const std::string& partition,
                                    const PlacementConfig& placement) {
  auto nodes = node_lines(run);
  if (!nodes.ok()) return nodes.status();
  SlurmCpus found;
  found.spare = spare_worker_cpus(pool_nodes(*nodes, partition), placement);
  // The companion jobs, whose, and what the running ones hold: one
  // squeue for all of them.
  auto queue = pending_and_running_jobs(run);
  if (!queue.ok()) return queue.status();
  add_companions(*queue, &found);
  return found;
}

}  // namespace goldminer
