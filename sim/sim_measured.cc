// goldminer-measured in the simulator: goldminer's cluster-level
// allocation with measured claims (sched/dw_allocation.h), each job's
// count judged by its own ScalingPolicy (sched/scaling_policy.h) in
// follow mode, as goldminer-ctld and the trainer session do.
//
// Windows as time: a job's trainer ends an observation window every
// window_s seconds from its first progress; the simulator is event-driven,
// so a job's windows are events only while it has something to measure
// (workers starting, a count not yet seen, or fewer settled windows at its
// count than the curve keeps: the policy judges a growth after
// measure_windows of them, and the later ones let it shrink a count that
// paid on a lucky reading). Windows it skipped meanwhile
// (its state did not change) are fed at the next event that needs its
// curve, at their own times, at most the curve's keep_windows of them: the
// older ones would be dropped anyway. A job whose knee is known gets a
// window at its next re-probe time, so its cap rises then, and every job
// one at least every reprobe_max_s, so that its measurements age (and
// anything the policy does with time comes) as under the trainer's
// windows.
//
// Learning is the policy's own (ScalingPolicy in follow mode, as under
// goldminer-ctld): while no knee is known its ceiling is its exploring
// cap, which rises each time the job was measured at the whole cap. After
// each window the job's report is what its session would send
// (sched/session_report.h) and its claim is goldminer-ctld's for that
// report (claim_of, sched/worker_registry.h); the allocation grants up to
// the report's ceiling, by the claim's measured speeds. No
// job grows while its growth is held (ScalingPolicy::holds_growth, or
// workers still on their way): the report's ceiling is then what it
// holds (ElasticController::report_ceiling under the trainer). A growth
// that did not pay is undone (the knee: the claim's cap), re-probed above
// it after the policy's back-off.
#include "sim/simulation.h"

namespace goldminer::sim::internal {

void Simulation::start_measuring(int i) {
  Job& j = jobs_[i];
  j.scaling = std::make_unique<ScalingPolicy>(with_worker_bounds(AutosizerConfig{}));
  j.last_window = j.ready_at;
  schedule_window(i);
}

int Simulation::measured_cap(Job& j, double t) {
  const int cap = j.scaling->reported_ceiling(t);
  // Before its first window the session has sent no report: its trainer
  // starts its first workers itself.
  if (cap <= j.workers || j.observed < 0) return cap;
  // Growth held: workers granted since the last window (they settle), a
  // growth being judged, or the count not yet measured. The policy's
  // state changes only at windows, so holds_growth (it reads medians) is
  // asked once after each, when it matters.
  if (j.holds_growth < 0) j.holds_growth = j.scaling->holds_growth(j.last_metrics) ? 1 : 0;
  return j.scaling->report_ceiling(t, j.workers, j.observed != j.workers || j.holds_growth == 1);
}

ReportedJob Simulation::reported_job(int i) const {
  return ReportedJob{static_cast<uint32_t>(i), options_.model.dw_max, options_.model.cpus_per_dw};
}

void Simulation::observe_window(int i, double t) {
  Job& j = jobs_[i];
  QueueMetrics m = window_metrics(j, j.active);
  // One worker's rate as the trainer reads it, not the model's exact one.
  m.per_worker_rate = j.worker_rate.observe(m.arrival_rate, m.workers, m.queue_fill);
  const bool settling = !j.starting.empty();
  ScalingDecision d = j.scaling->observe(m, t, settling, /*follow=*/true);
  j.observed = m.workers;
  j.last_metrics = m;
  j.holds_growth = -1;
  if (d.change < 0 && (d.why.find("did not pay: back") != std::string::npos || d.why.find("not shown to pay") != std::string::npos)) ++undone_growths_;
  const int cap = measured_cap(j, t);
  // What the session reports with its next window (at most window_s
  // later under the trainer; here at once).
  j.report = report_window(reported_job(i), m, *j.scaling, t, cap, j.workers - j.active);
  ++j.report_version;
  if (cap != j.cap || d.change != 0) reallocate_ = true;
  j.cap = cap;
}

void Simulation::catch_up(int i) {
  Job& j = jobs_[i];
  const double w = options_.model.window_s;
  if (now_ < j.last_window + w) return;
  int64_t n = static_cast<int64_t>(std::floor((now_ - j.last_window) / w + 1e-9));
  const int64_t keep = CurveConfig().keep_windows;
  if (n > keep) {
    j.last_window += static_cast<double>(n - keep) * w;
    n = keep;
  }
  for (int64_t k = 0; k < n; ++k) {
    j.last_window += w;
    observe_window(i, std::min(j.last_window, now_));
  }
}

void Simulation::window_event(int i) {
  jobs_[i].window_due = false;
  if (cachew_policy()) return cachew_window(i);
  catch_up(i);
  schedule_window(i);
}

void Simulation::schedule_window(int i) {
  Job& j = jobs_[i];
  if (j.finish >= 0) return;
  const double w = options_.model.window_s;
  const bool busy = !j.starting.empty() || j.observed != j.active ||
                    j.scaling->curve().settled_windows() < CurveConfig().keep_windows;
  const double reprobe_max_s = AutosizerConfig().reprobe_max_s;
  double at = kNever;
  if (busy) {
    at = j.last_window + w;
  } else {
    // At least one window every reprobe_max_s (as under the trainer's
    // windows, whatever the policy does with time comes at a window).
    at = j.last_window + std::ceil(reprobe_max_s / w - 1e-9) * w;
    double lo = now_, hi = now_ + reprobe_max_s + w;
    if (j.scaling->knee() >= 0 && !j.scaling->probing(now_) && j.scaling->probing(hi)) {
      // The back-off's end, by bisection on the policy's own clock.
      for (int it = 0; it < 60 && hi - lo > 1e-3; ++it) {
        const double mid = (lo + hi) / 2;
        (j.scaling->probing(mid) ? hi : lo) = mid;
      }
      at = std::min(at, j.last_window + std::ceil((hi - j.last_window) / w - 1e-9) * w);
    }
  }
  // One window due at a time: the earlier one (workers granted after a
  // quiet window make the job busy again; its due window then comes
  // sooner).
  if (j.window_due && j.window_at <= at) return;
  j.window_due = true;
  j.window_at = at;
  windows_.push({std::max(at, now_), i, ++j.window_stamp});
}

// A job's claim is goldminer-ctld's for its session's report
// (sched/worker_registry.h claim_of): its measured points in units of
// what its trainer would take, its remaining work unknown (the same for
// every job). The claims are kept from one allocation to the next (one
// per elastic slot): a job's measured points are copied into its slot's
// claim only when its report or probe changed or another job took the
// slot (copying every claim's points at every allocation was most of a
// replay's time).
void Simulation::measured_claim_of(int i, size_t slot) {
  Job& j = jobs_[i];
  DwClaim& c = claims_[slot];
  if (j.observed < 0) {  // no report yet: only the cap the trainer starts with
    j.report = report_window(reported_job(i), QueueMetrics{}, *j.scaling, now_, 0, 0);
    ++j.report_version;
  }
  report_policy_state(*j.scaling, now_, measured_cap(j, now_), j.workers - j.active, &j.report);
  const auto source = std::make_tuple(i, j.report_version, j.report.probing);
  if (claim_source_[slot] == source) {
    // The same points: the claim's other figures from the report alone.
    std::vector<CurvePoint> curve;
    std::swap(curve, j.report.curve);
    std::vector<std::pair<int, double>> points = std::move(c.measured);
    c = goldminer::claim_of(j.report);
    c.measured = std::move(points);
    std::swap(curve, j.report.curve);
  } else {
    c = goldminer::claim_of(j.report);
    claim_source_[slot] = source;
  }
}

std::vector<int> Simulation::allocate_measured() {
  for (int i : elastic_) catch_up(i);
  claims_.resize(elastic_.size());
  claim_source_.resize(elastic_.size(), {-1, 0, 0});
  for (size_t k = 0; k < elastic_.size(); ++k) {
    measured_claim_of(elastic_[k], k);
    jobs_[elastic_[k]].cap = claims_[k].cap;
  }
  reallocate_ = false;  // the caps just read are what this allocation uses
  return allocate_workers(claims_, worker_capacity_);
}

}  // namespace goldminer::sim::internal
