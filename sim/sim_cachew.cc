// The cachew baseline in the simulator (sim/cachew.h) and the oracle's
// true curves: each cachew job's scaler reads a noisy window every
// window_s while it scales, and every cachew_settled_check_s once settled
// (it re-scales only on a signal: a settled job's true rate does not move
// in the simulator, so checking it less often changes only how soon noise
// could make a false signal, and costs fewer events). The counts the jobs
// ask for are granted first come, first served (earlier-started jobs
// first), as under goldminer-joblevel.
#include "sim/simulation.h"

namespace goldminer::sim::internal {

namespace {
constexpr double kSettledCheckS = 60;
}  // namespace

const std::vector<std::pair<int, double>>& Simulation::true_points(Job& j) {
  if (j.true_points.empty()) {
    const int top = std::min(options_.model.dw_max, std::max(1, j.useful));
    for (int k = 1; k <= top; ++k) j.true_points.emplace_back(k, j.curve.speed(k));
  }
  return j.true_points;
}

void Simulation::start_cachew(int i) {
  Job& j = jobs_[i];
  j.cachew = std::make_unique<CachewScaler>(with_worker_bounds(CachewConfig{}));
  j.cachew_want = j.cachew->wanted();
  j.last_window = j.ready_at;
  schedule_cachew_window(i);
}

void Simulation::cachew_window(int i) {
  Job& j = jobs_[i];
  j.last_window = now_;
  // A window while workers are on their way measures neither count.
  if (j.starting.empty() && now_ >= j.ready_at) {
    const QueueMetrics m = window_metrics(j, j.active);
    const int want = j.cachew->observe(j.active, m.samples_per_s);
    if (want != j.cachew_want) {
      j.cachew_want = want;
      reallocate_ = true;
    }
  }
  schedule_cachew_window(i);
}

void Simulation::schedule_cachew_window(int i) {
  Job& j = jobs_[i];
  if (j.finish >= 0) return;
  const double w = options_.model.window_s;
  const double at = std::max(now_, j.last_window) + (j.cachew->settled() ? kSettledCheckS : w);
  // One window due at a time: a count that changed again before it is
  // measured by it (the scaler starts a count's windows afresh).
  if (j.window_due && j.window_at <= at) return;
  ++j.window_stamp;  // an earlier scheduled window is stale
  j.window_due = true;
  j.window_at = at;
  windows_.push({std::max(at, now_), i, j.window_stamp});
}

std::vector<int> Simulation::allocate_cachew() {
  std::vector<size_t> order(elastic_.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return jobs_[elastic_[a]].start < jobs_[elastic_[b]].start; });
  std::vector<int> counts(elastic_.size(), 0);
  int64_t left = worker_capacity_;
  for (size_t k : order) {
    const Job& j = jobs_[elastic_[k]];
    counts[k] = static_cast<int>(std::min<int64_t>(j.cachew_want, left / dw_cpu_));
    left -= counts[k] * dw_cpu_;
  }
  return counts;
}

}  // namespace goldminer::sim::internal
