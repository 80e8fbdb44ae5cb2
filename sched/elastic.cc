#include "sched/elastic.h"

#include <algorithm>

namespace goldminer {

ElasticController::ElasticController(const ElasticConfig& config, WorkerLauncher* launcher, double now_s)
    : config_(config),
      launcher_(launcher),
      policy_(config.autosizer),
      pending_(config.initial_workers),
      pending_deadline_(now_s + config.join_grace_s) {}

// Started ones whose jobs all ended (preempted before they joined) are on
// no way.
bool ElasticController::settling(double now_s) {
  return pending_ > 0 && now_s < pending_deadline_ && (!launched_ || launcher_->live() > 0);
}

void ElasticController::start(int n, double now_s, ElasticStep* step) {
  step->started = launcher_->start(n, &step->error);
  if (step->started < n) retry_at_ = now_s + config_.retry_after_s;
  if (step->started > 0) {
    launched_ = true;
    pending_ += step->started;
    pending_deadline_ = now_s + config_.join_grace_s;
  }
}

ElasticStep ElasticController::observe(const QueueMetrics& m, double now_s, int target) {
  ElasticStep step;
  // Joins since the last observation are workers that were on their way
  // (those that left meanwhile, preempted, lost or drained, joined too).
  const int arrived = std::max({0, m.joined - last_joined_, m.workers - last_workers_});
  pending_ = std::max(0, pending_ - arrived);
  last_workers_ = held_ = m.workers;
  last_joined_ = std::max(last_joined_, m.joined);
  last_target_ = target;
  const ScalingDecision d = policy_.observe(m, now_s, settling(now_s), target >= 0);
  if (d.avoid_trainer_node) launcher_->avoid_trainer_node();
  if (target >= 0) {
    // Measure, then grow, under goldminer-ctld too: no start while workers
    // are on their way, a growth is judged or this count is not measured.
    const bool may_grow = !settling(now_s) && !policy_.holds_growth(m);
    ElasticStep followed = follow(m, now_s, std::min(target, policy_.ceiling(now_s)), d.change < 0, may_grow);
    followed.decision = d.why;
    followed.drain_trainer_node_first = d.avoid_trainer_node;
    return followed;
  }
  over_target_ = 0;
  step.decision = d.why;
  step.drain_trainer_node_first = d.avoid_trainer_node;
  const int change = d.change;
  if (change > 0) {
    // Workers already on their way (waiting in Slurm's queue, or started
    // and not yet joined) are the growth asked for: more would overshoot.
    if (settling(now_s) || now_s < retry_at_ || launcher_->waiting() > 0) return step;
    const int n = std::min(change, config_.autosizer.max_workers - m.workers);
    if (n <= 0) return step;
    pending_ = 0;  // the deadline passed: those are not coming
    start(n, now_s, &step);
  } else if (change < 0) {
    const int n = -change;
    pending_ = 0;  // what still comes is not wanted any more
    step.cancelled = launcher_->cancel_waiting(n);
    step.drain = std::max(0, std::min(n - step.cancelled, m.workers - config_.autosizer.min_workers));
  }
  return step;
}

int ElasticController::coming(const QueueMetrics& m, double now_s) const {
  const int arrived = std::max({0, m.joined - last_joined_, m.workers - last_workers_});
  return now_s < pending_deadline_ ? std::max(0, pending_ - arrived) : 0;
}

int ElasticController::report_ceiling(const QueueMetrics& m, double now_s) const {
  const int on_way = coming(m, now_s);
  return policy_.report_ceiling(now_s, m.workers + on_way, on_way > 0 || policy_.holds_growth(m));
}

ElasticStep ElasticController::replace_lost(int lost, int workers, int joined, double now_s) {
  ElasticStep step;
  const AutosizerConfig& a = config_.autosizer;
  // Sizing itself: what it had at the last observation, or since.
  held_ = std::max(held_, workers + lost);
  // Those that joined since (the lost ones among them) are no longer on
  // their way.
  pending_ = std::max(0, pending_ - std::max(0, joined - last_joined_));
  last_joined_ = std::max(last_joined_, joined);
  last_workers_ = workers;
  const int want = std::clamp(std::min(last_target_ >= 0 ? last_target_ : held_, policy_.ceiling(now_s)),
                              a.min_workers, a.max_workers);
  if (!settling(now_s)) pending_ = 0;
  const int on_way = std::max(pending_, launched_ ? launcher_->waiting() : 0);
  if (lost <= 0 || workers + on_way >= want || now_s < retry_at_) return step;
  start(want - workers - on_way, now_s, &step);
  return step;
}

// goldminer-ctld's target: workers on their way (started, not joined,
// within the join grace) count towards it; beyond it, waiting ones are
// cancelled, then connected ones drained, once `patience` observations
// agree (one report's dip does not cost a worker), or `at_once` (the
// job's own measurements undid a growth: several windows agreed already).
ElasticStep ElasticController::follow(const QueueMetrics& m, double now_s, int target, bool at_once, bool may_grow) {
  ElasticStep step;
  const AutosizerConfig& a = config_.autosizer;
  const int t = std::max(a.min_workers, std::min(a.max_workers, target));
  if (!settling(now_s)) pending_ = 0;
  const int on_way = std::max(pending_, launched_ ? launcher_->waiting() : 0);
  if (m.workers + on_way < t) {
    over_target_ = 0;
    if (may_grow && now_s >= retry_at_) {
      pending_ = on_way;
      start(t - m.workers - on_way, now_s, &step);
    }
    return step;
  }
  // Above the target (connected and on their way): only once `patience`
  // observations agree, so that a target that flickers with the noise of
  // one interval's measurements neither cancels workers about to start nor
  // drains connected ones. Waiting ones are cancelled first.
  const int excess = m.workers + on_way - t;
  over_target_ = excess > 0 ? over_target_ + 1 : 0;
  if (over_target_ >= a.patience || (at_once && excess > 0)) {
    if (launched_) {
      step.cancelled = launcher_->cancel_waiting(excess);
      pending_ = std::max(0, pending_ - step.cancelled);
    }
    step.drain = std::max(0, std::min(excess - step.cancelled, m.workers - t));
    over_target_ = 0;
  }
  return step;
}

}  // namespace goldminer
