// Elastic data workers of one job (--goldminer mode=elastic): every
// interval the trainer's session measures its queue, the autosizer
// (autosizer.h) says grow, shrink or keep, and the ElasticController acts:
// it starts more workers through a WorkerLauncher (under Slurm: one-worker
// companion jobs, SlurmWorkerLauncher in launch/elastic_setup.h), and when
// it shrinks it first cancels workers still waiting in Slurm's queue, then
// has the session drain connected ones (they finish the batch in hand,
// return their leases and exit 0). Slurm-free.
//
//   session (every interval_s)      ElasticController       WorkerLauncher (Slurm's)
//   window QueueMetrics ----------> observe() -- start(n) -> sbatch x n
//   drain_workers(Step::drain) <--- Step       -- cancel --> scancel (pending)
//   ~Session ----------------------------------- end() ----> scancel (pending),
//                                                            scancel -s TERM (running)
#ifndef GOLDMINER_SCHED_ELASTIC_H_
#define GOLDMINER_SCHED_ELASTIC_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "goldminer/elastic.h"
#include "sched/autosizer.h"
#include "sched/scaling_policy.h"
#include "sched/worker_registry.h"
#include "gmcore/status.h"

namespace goldminer {

// WorkerLauncher, ElasticConfig and ElasticSetup (what a Session is given)
// are public: include/goldminer/elastic.h.

// What to do after one observation.
struct ElasticStep {
  int started = 0;    // workers the launcher started
  int cancelled = 0;  // waiting workers cancelled
  int drain = 0;      // connected workers the session should drain
  std::string error;  // why a start failed
  std::string decision;  // the scaling policy's line for this window ("" none)
  // Workers on the trainer's node did not pay: those are the ones to drain
  // (ScalingDecision::avoid_trainer_node); the launcher was told.
  bool drain_trainer_node_first = false;
};

// Thread-compatible; one per session. The launcher must outlive it.
class ElasticController {
 public:
  ElasticController(const ElasticConfig& config, WorkerLauncher* launcher, double now_s);

  // One observation window (m.workers: connected workers) ending at `now_s`
  // (seconds, the same clock as the constructor's). The scaling policy
  // (scaling_policy.h) measures it and judges every growth. With `target`
  // >= 0 (goldminer-ctld's, kept within min and max workers and below the
  // policy's ceiling) the job grows to it at once and shrinks to it after
  // `patience` observations agree, or at once when its own measurements
  // undid a growth; below 0 the policy (the autosizer's proposals, judged)
  // decides.
  ElasticStep observe(const QueueMetrics& m, double now_s, int target = -1);

  // `lost` connected workers left without being asked to (killed, their
  // node lost, preempted), `workers` are connected now and `joined` ever
  // joined (QueueMetrics::joined): starts their
  // replacements at once instead of at the next observation, up to what
  // the job wanted (goldminer-ctld's last target, or, sizing itself, the
  // workers it had at the last observation or since), counting those
  // already on their way.
  ElasticStep replace_lost(int lost, int workers, int joined, double now_s);

  // The measured curve and knee goldminer-ctld is told of.
  const ScalingPolicy& policy() const { return policy_; }

  // The ceiling the report after window `m` carries
  // (ScalingPolicy::report_ceiling): while workers started are on their
  // way (within the join grace) or the policy holds growth, the workers
  // connected and coming. Reads the state of the previous observation
  // (call it before observe(m)); runs no Slurm command.
  int report_ceiling(const QueueMetrics& m, double now_s) const;
  // Workers started and expected (within the join grace) that window `m`
  // did not see connected yet.
  int coming(const QueueMetrics& m, double now_s) const;

 private:
  // `may_grow`: starts are allowed now (ScalingPolicy::holds_growth).
  ElasticStep follow(const QueueMetrics& m, double now_s, int target, bool at_once, bool may_grow);
  // Starts up to `n`; the target then counts them until they join.
  void start(int n, double now_s, ElasticStep* step);

  ElasticConfig config_;
  WorkerLauncher* launcher_;
  ScalingPolicy policy_;
  // Workers on their way: started (or the job's first), not yet joined,
  // expected until the deadline.
  bool settling(double now_s);
  int pending_;
  double pending_deadline_;
  bool launched_ = false;   // the launcher started some: the target counts them
  int last_workers_ = 0;    // connected workers at the previous observation
  int last_joined_ = 0;     // workers that had joined by then
  double retry_at_ = 0;
  int over_target_ = 0;     // consecutive observations above the ctld's target
  int last_target_ = -1;    // goldminer-ctld's at the previous observation, -1: none
  int held_ = 0;            // connected workers at that observation, or before a loss since
};

}  // namespace goldminer

#endif  // GOLDMINER_SCHED_ELASTIC_H_
