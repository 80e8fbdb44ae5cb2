// What select/goldminer_cons_tres changes in one job_test call, decided
// over plain values (the plugin translates Slurm's node table, job
// records and bitmaps into these and back; STYLE.md §1).
//
//   reserve   On a node with free GPUs, a job that asks for no GPU may
//             use only the CPUs beyond `free GPUs x reserve_cpus_per_gpu`
//             (placement.h's cpu_reserve): the plugin hides that many of
//             the node's free cores from cons_tres, and the whole node
//             when nothing is left beyond them. GPU jobs see every core.
//   tiers     A verified data worker job (data_worker.h) is offered to
//             cons_tres tier by tier: first the GPU nodes whose GPUs are
//             all allocated (their CPUs are stranded otherwise), then with
//             the CPU-only nodes added, then every node (outside the
//             reserve); the first tier that fits wins.
//   will-run  Backfill asks when and where a job could start, and
//             cons_tres answers by letting running jobs end in its own
//             simulation: today's free cores say nothing about then. So
//             the reserve is held on configured resources: every GPU of
//             the node counted free (the GPUs free at the planned start
//             are unknown; this bounds any), that many cores hidden
//             whether allocated now or not, and a node dropped only when
//             its configured cores are all reserve. A large CPU job thus
//             gets a planned start (and backfill's reservation) on nodes
//             that are busy now; its plan may be later than run-now
//             would allow on nodes whose GPUs are busy, never earlier.
//   modes     Only run-now and will-run calls are narrowed. A test-only
//             call asks whether the job could ever run on an idle cluster;
//             narrowing it would make sbatch refuse jobs that merely wait.
#ifndef GOLDMINER_SCHED_SELECT_POLICY_H_
#define GOLDMINER_SCHED_SELECT_POLICY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "sched/select_config.h"

namespace goldminer {

// A node as one job_test call sees it. Counts are whole cores and GPUs.
struct NodeUsage {
  uint32_t cores_total = 0;
  uint32_t cores_free = 0;  // neither allocated nor already excluded for this call
  uint32_t cpus_per_core = 1;
  uint32_t gpus_total = 0;
  uint32_t gpus_free = 0;
};

enum class JobKind {
  kGpu,         // asks for GPUs: may use the reserve
  kCpu,         // asks for none: stays outside the reserve
  kDataWorker,  // a verified companion worker job: outside the reserve, tiered
};

// Mirrors Slurm's SELECT_MODE_RUN_NOW/TEST_ONLY/WILL_RUN.
enum class TestMode { kRunNow = 0, kTestOnly = 1, kWillRun = 2 };

struct NodePlan {
  bool usable = true;          // false: take the node out of the candidates
  uint32_t hidden_cores = 0;   // cores to hide from cons_tres (the reserve)
  bool hide_allocated = false; // false: free cores only (run-now); true: any
                               // core, allocated now or not (will-run)
  int tier = 0;                // offered from this tier on (0 = first)
};

struct JobTestPlan {
  std::vector<NodePlan> nodes;  // one per NodeUsage, same order
  int tiers = 1;                // how many tiers to try, 1..3
  bool narrows = false;         // anything differs from the call as given
  uint32_t nodes_dropped = 0;   // for the log line
  uint32_t cores_hidden = 0;
};

// The reserve of `node` in whole cores: free GPUs x reserve_cpus_per_gpu
// CPUs, rounded up to cores.
uint32_t reserve_cores(const NodeUsage& node, const SelectConfig& config);
// The largest reserve `node` can ever hold: all its GPUs free (will-run).
uint32_t configured_reserve_cores(const NodeUsage& node, const SelectConfig& config);

JobTestPlan plan_job_test(const SelectConfig& config, JobKind kind, TestMode mode,
                          const std::vector<NodeUsage>& nodes);

// Whether a TRES request as Slurm keeps it in job_record_t (tres_per_job,
// _per_node, _per_socket, _per_task: "gres:gpu:2", "gres:gpu:a100:1,
// gres:shard:1", "gpu:1") asks for at least one GPU. NULL or "" asks none.
bool tres_requests_gpu(const char* tres);

}  // namespace goldminer

#endif  // GOLDMINER_SCHED_SELECT_POLICY_H_
