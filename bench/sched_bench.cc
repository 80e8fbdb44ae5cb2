// Decision time of GoldMiner's cluster-level policy at 10k nodes and 5k
// running jobs: one decision = the worker capacity of every node (reserve
// included), the allocation among all jobs, and the placement of one job's
// workers, i.e. what the controller does on each event. Prints microseconds
// per decision and the ratio to the 1 ms budget, measured in this run.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "sched/dw_allocation.h"
#include "sched/placement.h"
#include "sched/select_policy.h"

using namespace goldminer;

int main() {
  const int kNodes = 10000, kJobs = 5000, kEvents = 200;
  std::mt19937_64 rng(1);
  std::vector<NodeResources> nodes(kNodes);
  for (int i = 0; i < kNodes; ++i) {
    bool gpu = i % 5 != 0;  // 80% GPU nodes, as in the Alibaba v2023 table
    nodes[i].cpu_total = gpu ? 96000 : 32000;
    nodes[i].gpu_total = gpu ? 8000 : 0;
    nodes[i].gpu_free = gpu ? 1000 * static_cast<int64_t>(rng() % 9) : 0;
    nodes[i].cpu_free = static_cast<int64_t>(rng() % (nodes[i].cpu_total / 1000)) * 1000;
  }
  std::vector<DwClaim> claims(kJobs);
  for (auto& c : claims) {
    c.remaining_work = 60.0 + static_cast<double>(rng() % 86400);
    c.gain_per_worker = 0.9 / static_cast<double>(1 + rng() % 15);
    c.cpu_per_worker = 1000;
    c.min_workers = 1;
    c.max_workers = 256;
  }
  PlacementConfig config;

  // Two regimes: CPUs scarce (water-filling runs) and plentiful (fast path).
  for (double scale : {1.0, 0.02}) {
    std::vector<NodeResources> trial = nodes;
    for (auto& n : trial) n.cpu_free = static_cast<int64_t>(static_cast<double>(n.cpu_free) * scale) / 1000 * 1000;
    long long checksum = 0;
    auto t0 = std::chrono::steady_clock::now();
    for (int e = 0; e < kEvents; ++e) {
      claims[e % kJobs].remaining_work += 1;  // the state changes between events
      int64_t capacity = 0;
      for (const auto& n : trial) capacity += spare_cpu(n, config) / 1000 * 1000;
      std::vector<int> counts = allocate_workers(claims, capacity);
      std::vector<int> where = place_workers(trial, counts[e % kJobs], 1000, config);
      checksum += counts[e % kJobs] + static_cast<long long>(where.size());
    }
    double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
                kEvents;
    std::printf("sched_bench: %d nodes, %d jobs, worker CPUs %s: %.0f us per decision, "
                "%.2f of the 1 ms budget (checksum %lld)\n",
                kNodes, kJobs, scale < 1 ? "scarce" : "plentiful", us, us / 1000.0, checksum);
  }

  // The select plugin's decision for one job_test call at the same 10k
  // nodes: the reserve of every candidate node and the placement tiers of
  // a data worker job (what select/goldminer_cons_tres asks the core; the
  // view it builds from Slurm's records is timed on the devcluster by
  // bench/select_overhead.sh).
  std::vector<NodeUsage> usage(kNodes);
  for (int i = 0; i < kNodes; ++i) {
    usage[i].cores_total = static_cast<uint32_t>(nodes[i].cpu_total / 1000);
    usage[i].cores_free = static_cast<uint32_t>(nodes[i].cpu_free / 1000);
    usage[i].gpus_total = static_cast<uint32_t>(nodes[i].gpu_total / 1000);
    usage[i].gpus_free = static_cast<uint32_t>(nodes[i].gpu_free / 1000);
  }
  SelectConfig select_config;
  for (JobKind kind : {JobKind::kCpu, JobKind::kDataWorker}) {
    long long checksum = 0;
    auto t0 = std::chrono::steady_clock::now();
    for (int e = 0; e < kEvents; ++e) {
      usage[e % kNodes].cores_free ^= 1;  // the state changes between calls
      JobTestPlan plan = plan_job_test(select_config, kind, TestMode::kRunNow, usage);
      checksum += plan.nodes_dropped + plan.cores_hidden + plan.tiers;
    }
    double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
                kEvents;
    std::printf("sched_bench: select job_test plan, %d nodes, %s job: %.0f us per decision, "
                "%.2f of the 1 ms budget (checksum %lld)\n",
                kNodes, kind == JobKind::kCpu ? "cpu" : "data worker", us, us / 1000.0, checksum);
  }
  return 0;
}
