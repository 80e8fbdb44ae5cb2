// What a trainer's session makes of one scaling window for goldminer-ctld:
// one worker's rate read from the window, and the report (worker_registry.h)
// carrying the window's figures and the job's scaling policy as it stands.
// The session (tw_lib/session/session_elastic.cc) and goldminer-sim's
// measured policy (sim/sim_measured.cc) both build it here, so that the
// simulator's allocation values a job by exactly what goldminer-ctld is
// told of it. Slurm-free.
#ifndef GOLDMINER_SCHED_SESSION_REPORT_H_
#define GOLDMINER_SCHED_SESSION_REPORT_H_

#include <cstdint>

#include "sched/autosizer.h"
#include "sched/scaling_policy.h"
#include "sched/worker_registry.h"

namespace goldminer {

// One worker's rate (batches/s) as a session reads it from its windows:
// the window's arrivals per connected worker while the queue had room;
// while it is full, credits hold the workers to the trainer's pace (and at
// an epoch's end they idle), so the most measured with room stands for
// it. Thread-compatible; one per job.
class WorkerRateEstimate {
 public:
  // The window's per-worker rate (0 with no worker connected).
  double observe(double arrival_rate, int workers, double queue_fill);

 private:
  double capacity_ = 0;  // the most measured while the queue had room
};

// The job the report is about (its settings, not its measurements).
struct ReportedJob {
  uint32_t job_id = 0;
  int dw_max = 1;
  double cpus_per_dw = 1;
};

// The report after window `m` (ending at `now_s`): its figures, the
// policy's measured curve and knee, the probe above the knee when it
// probes, `ceiling` (ScalingPolicy::report_ceiling) and the workers
// `coming` (started, not yet connected).
SessionReport report_window(const ReportedJob& job, const QueueMetrics& m, const ScalingPolicy& policy,
                            double now_s, int ceiling, int coming);

// Of those, what changes between windows (the knee, the probe, the
// ceiling, the workers coming) set again at `now_s` on a report that
// carries its curve.
void report_policy_state(const ScalingPolicy& policy, double now_s, int ceiling, int coming,
                         SessionReport* report);

}  // namespace goldminer

#endif  // GOLDMINER_SCHED_SESSION_REPORT_H_
