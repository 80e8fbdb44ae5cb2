// What goldminer-ctld keeps: the latest report of every running
// goldminer session, and the worker target it gives each, shared across
// jobs by allocate_workers (dw_allocation.h). Slurm-free and
// transport-free: the daemon authenticates a report (munge: uid) and looks
// up the job's owner, then hands both here.
//
//   session (every interval) --SessionReport--> accept() -> reallocate()
//   session grows/drains to  <---target(job)---
//   goldminer-top, /metrics  <---json(), table(), prometheus()---
//
// Speed model of a live job (the same shape the simulator uses): the
// trainer would take D = consumption / (1 - wait) batches/s if it never
// waited (wait capped at 0.95); one worker makes r batches/s (its best
// interval), so k workers run it at min(1, k r / D). A session that has
// not measured r yet is taken to need all of its dw-max. Remaining work is
// not known to a session: it is taken as equal for all jobs, so the
// allocation maximises the jobs' summed progress rate per CPU (marginal
// 1/speed, as dw_allocation.h).
//
// A session that has measured its scaling curve (scaling_curve.h) is
// valued by it instead: speed at k workers = samples/s measured at k / D,
// D the larger of its demand in samples/s (samples/s / (1 - wait)) and
// the most it measured; the model above then only bounds the slope beyond
// the largest measured count. The job's knee caps it (no worker above it;
// the session's knee is soft under goldminer-ctld, ScalingPolicy: workers
// below it that add less than the pay rule asks are valued by the curve);
// while it re-probes, one more is allowed and the points above the knee
// (what the probe measures afresh) are left out, so the probe worker is
// valued by the curve below the knee.
#ifndef GOLDMINER_SCHED_WORKER_REGISTRY_H_
#define GOLDMINER_SCHED_WORKER_REGISTRY_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "gmcore/status.h"
#include "sched/dw_allocation.h"
#include "sched/scaling_curve.h"

namespace goldminer {

struct SessionReport {
  uint32_t job_id = 0;
  uint64_t nonce = 0;            // echoed in the answer (a replayed answer is refused)
  int workers = 0;               // connected now
  int coming = 0;                // started for it, not yet connected
  int dw_max = 1;                // the job's dw-max
  double cpus_per_dw = 1;        // CPUs one of its workers holds
  double trainer_wait_fraction = 0;
  double queue_fill = 0;         // 0 empty .. 1 full
  double consumption_rate = 0;   // batches/s the trainer took
  double per_worker_rate = 0;    // batches/s one worker made at best; 0: not measured
  double samples_per_s = 0;
  std::vector<std::string> worker_hosts;  // where its workers run, one per worker
  // The job's measured scaling curve, ascending by workers ("curve=W:S,W:S",
  // format_curve; "" before any measurement), its knee (workers above which
  // growth did not pay; -1 none known, else 0..dw_max) and how many
  // workers above the knee it probes now ("probing=N", 0 when not; only
  // with a knee; 1 from sessions that probed one worker at a time).
  std::vector<CurvePoint> curve;
  int knee = -1;
  int probing = 0;
  // The most workers the job's own policy lets it have now
  // (ScalingPolicy::ceiling: the knee plus a probe's step, the exploring
  // cap while no knee is known, else dw_max): 1..dw_max, goldminer-ctld
  // grants no more; 0: not said (the knee plus `probing` caps it, when
  // known).
  int ceiling = 0;
};

// The report as "key=value" lines (what the session signs); decode is
// strict: an unknown, repeated, missing or bad key is an error naming it.
std::string encode_report(const SessionReport& report);
Expected<SessionReport> decode_report(const std::string& text);

// goldminer-ctld's answer to a report: the job's worker target, bound to
// the report by its nonce. Decode is strict as decode_report's.
struct TargetAnswer {
  uint32_t job_id = 0;
  uint64_t nonce = 0;
  int target = 0;
};
std::string encode_answer(const TargetAnswer& answer);
Expected<TargetAnswer> decode_answer(const std::string& text);

// The claim the allocation sees for a report (see the speed model above).
DwClaim claim_of(const SessionReport& report);

struct JobEntry {
  SessionReport report;
  uint32_t uid = 0;       // who sent it (authenticated)
  std::string partition;  // the job's, as Slurm says ("" when unknown)
  double reported_s = 0;  // when
  int target = 0;         // workers it should have
};

// How much of a job one viewer of json(), table() or prometheus() sees
// (goldminer-ctld decides: the owner, Slurm's PrivateData): all of it; its
// figures only (no uid, user or hosts); nothing (still in the totals).
enum class JobView { kFull, kFigures, kHidden };
using ViewOf = std::function<JobView(const JobEntry&)>;

class WorkerRegistry {
 public:
  // `worker_cpus`: CPUs the cluster has for data workers; a job silent for
  // `stale_after_s` is dropped (ended, or its session gone).
  WorkerRegistry(double worker_cpus, double stale_after_s);

  // A report from user `uid` for a job Slurm says `owner` runs: refused
  // when they differ (a user cannot report for, or steer, another's job).
  // `partition`: the job's, as Slurm says (a label of its series).
  Status accept(const SessionReport& report, uint32_t uid, uint32_t owner, double now_s,
                const std::string& partition = "");

  // Drops stale jobs and shares the worker CPUs among the rest.
  void reallocate(double now_s);

  // Forgets `job_id` (Slurm says it no longer runs); its CPUs are shared
  // at the next reallocate().
  void drop(uint32_t job_id) { jobs_.erase(job_id); }

  // The job's target; -1 when it is not registered.
  int target(uint32_t job_id) const;

  void set_worker_cpus(double cpus) { worker_cpus_ = cpus; }
  // The most of the worker CPUs one user's jobs together get (0 to 1; 1:
  // no cap). What a capped user leaves goes to the others.
  void set_max_user_share(double share) { max_user_share_ = share; }
  double worker_cpus() const { return worker_cpus_; }
  const std::map<uint32_t, JobEntry>& jobs() const { return jobs_; }

  // goldminer-top --json: {"worker_cpus": C, "worker_cpus_held": H,
  // "jobs": [{"job": J, "uid": U, "workers": N, "target": T, ...,
  // "curve": [[W, S], ...], "knee": K or null, "probing": N, "hosts": [...]}, ...]}
  // ("uid" and "hosts" null in a kFigures row). `view` null: all kFull.
  std::string json(const ViewOf& view = nullptr) const;
  // Prometheus text exposition (goldminer_* gauges, one series per job).
  std::string prometheus(const ViewOf& view = nullptr) const;
  // goldminer-top's screen: the cluster's worker CPUs, then a row per job
  // (KNEE: "-", K, or "K+1" while it re-probes), its curve on a line below.
  std::string table(const ViewOf& view = nullptr) const;

 private:
  double worker_cpus_;
  double stale_after_s_;
  double max_user_share_ = 1;
  std::map<uint32_t, JobEntry> jobs_;
};

}  // namespace goldminer

#endif  // GOLDMINER_SCHED_WORKER_REGISTRY_H_
