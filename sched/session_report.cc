#include "sched/session_report.h"

#include <algorithm>

namespace goldminer {

double WorkerRateEstimate::observe(double arrival_rate, int workers, double queue_fill) {
  const double observed = workers > 0 ? arrival_rate / workers : 0;
  const bool room = queue_fill < 0.5;
  if (room) capacity_ = std::max(capacity_, observed);
  return room || capacity_ == 0 ? observed : capacity_;
}

SessionReport report_window(const ReportedJob& job, const QueueMetrics& m, const ScalingPolicy& policy,
                            double now_s, int ceiling, int coming) {
  SessionReport r;
  r.job_id = job.job_id;
  r.workers = m.workers;
  r.dw_max = job.dw_max;
  r.cpus_per_dw = job.cpus_per_dw;
  r.trainer_wait_fraction = m.trainer_wait_fraction;
  r.queue_fill = std::min(1.0, m.queue_fill);
  r.consumption_rate = m.consumption_rate;
  r.per_worker_rate = m.per_worker_rate;
  r.samples_per_s = m.samples_per_s;
  r.curve = policy.curve().points();
  report_policy_state(policy, now_s, ceiling, coming, &r);
  return r;
}

void report_policy_state(const ScalingPolicy& policy, double now_s, int ceiling, int coming,
                         SessionReport* report) {
  report->knee = policy.knee();
  report->probing = policy.probing(now_s) ? std::max(1, policy.ceiling(now_s) - report->knee) : 0;
  report->ceiling = ceiling;
  report->coming = coming;
}

}  // namespace goldminer
