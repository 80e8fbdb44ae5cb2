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
// cap, which rises each time the job was measured at the whole cap; the
// allocation grants up to the ceiling, by the claim's measured speeds. No
// job grows while its growth is held (ScalingPolicy::holds_growth, or
// workers still on their way): the cap is then what it holds, as
// goldminer-ctld's target is under ElasticController::observe. A growth
// that did not pay is undone (the knee: the claim's cap), re-probed above
// it after the policy's back-off.
#include "sim/simulation.h"

namespace goldminer::sim::internal {

void Simulation::start_measuring(int i) {
  Job& j = jobs_[i];
  AutosizerConfig c;
  c.min_workers = std::max(1, options_.model.dw_floor);
  c.max_workers = options_.model.dw_max;
  j.scaling = std::make_unique<ScalingPolicy>(c);
  j.last_window = j.ready_at;
  schedule_window(i);
}

int Simulation::measured_cap(Job& j, double t) {
  // The policy's ceiling (its knee plus a probe's step, or its exploring
  // cap), as the session reports it and goldminer-ctld caps the claim.
  int cap = j.scaling->reported_ceiling(t);
  // Growth held, as the real controller holds it: workers on their way or
  // a count no window has seen yet (its workers are settling), a growth
  // being judged, or the count not yet measured. Before its first window
  // a job gets its first workers (the trainer starts them itself). The
  // policy's state changes only at windows, so its answer is asked once
  // after each, when it matters.
  if (cap <= j.workers || j.observed < 0) return cap;
  if (j.observed != j.workers) return j.workers;
  if (j.holds_growth < 0) j.holds_growth = j.scaling->holds_growth(j.last_metrics) ? 1 : 0;
  return j.holds_growth ? j.workers : cap;
}

void Simulation::observe_window(int i, double t) {
  Job& j = jobs_[i];
  QueueMetrics m = window_metrics(j, j.active);
  const bool settling = !j.starting.empty();
  ScalingDecision d = j.scaling->observe(m, t, settling, /*follow=*/true);
  j.measured_stale = true;
  j.observed = m.workers;
  j.last_metrics = m;
  j.holds_growth = -1;
  if (d.change < 0 && (d.why.find("did not pay: back") != std::string::npos || d.why.find("not shown to pay") != std::string::npos)) ++undone_growths_;
  const int cap = measured_cap(j, t);
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

// The claims are kept from one allocation to the next (one per elastic
// slot): a job's measured points are copied into its slot's claim only
// when they changed or another job took the slot (copying every claim's
// points at every allocation was most of a replay's time).
void Simulation::measured_claim_of(int i, size_t slot) {
  Job& j = jobs_[i];
  if (j.measured_stale) {
    j.measured.clear();
    for (const CurvePoint& p : j.scaling->curve().points()) j.measured.emplace_back(p.workers, p.samples_per_s / 1000);
    j.measured_stale = false;
    ++j.measured_version;
  }
  DwClaim& c = claims_[slot];
  std::vector<std::pair<int, double>> points = std::move(c.measured);
  c = claim_of(j);
  if (claim_source_[slot] != std::make_pair(i, j.measured_version)) {
    points.assign(j.measured.begin(), j.measured.end());
    claim_source_[slot] = {i, j.measured_version};
  }
  c.measured = std::move(points);
  c.cap = measured_cap(j, now_);
  // A probe above the knee comes from slack CPUs, as goldminer-ctld
  // grants it (the report's probing).
  if (j.scaling->knee() >= 0 && c.cap > j.scaling->knee()) c.probe = c.cap - j.scaling->knee();
  c.held = j.workers;
}

std::vector<int> Simulation::allocate_measured() {
  for (int i : elastic_) catch_up(i);
  claims_.resize(elastic_.size());
  claim_source_.resize(elastic_.size(), {-1, 0});
  for (size_t k = 0; k < elastic_.size(); ++k) {
    measured_claim_of(elastic_[k], k);
    jobs_[elastic_[k]].cap = claims_[k].cap;
  }
  reallocate_ = false;  // the caps just read are what this allocation uses
  return allocate_workers(claims_, worker_capacity_);
}

}  // namespace goldminer::sim::internal
