#include "sched/scaling_policy.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace goldminer {
namespace {

constexpr double kMaxWaitFraction = 0.95;  // beyond: the demand estimate explodes

CurveConfig curve_config(const AutosizerConfig& c) {
  CurveConfig cc;
  cc.settle_windows = c.settle_windows;
  cc.measure_windows = c.measure_windows;
  cc.noise_floor = c.noise_floor;
  return cc;
}

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f s", s);
  return buf;
}

std::string percent(double share) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f %%", 100 * share);
  return buf;
}

}  // namespace

double predicted_gain(const QueueMetrics& m, int added) {
  const double c = m.consumption_rate, r = m.per_worker_rate;
  if (c <= 0 || r <= 0 || added <= 0 || m.samples_per_s <= 0) return 0;
  const double wait = std::min(m.trainer_wait_fraction, kMaxWaitFraction);
  const double demand = c / (1 - wait);
  const double batches = std::max(0.0, std::min(demand, c + added * r) - c);
  return batches * m.samples_per_s / c;
}

ScalingPolicy::ScalingPolicy(const AutosizerConfig& config)
    : config_(config), autosizer_(config), curve_(curve_config(config)) {}

int ScalingPolicy::ceiling(double now_s) const {
  if (knee_ < 0) return config_.max_workers;
  return std::clamp(knee_ + (probing(now_s) ? 1 : 0), config_.min_workers, config_.max_workers);
}

std::string ScalingPolicy::figures(int first) const {
  std::string out;
  auto p = curve_.point(first);
  if (p) out = std::to_string(first) + " workers: " + short_rate(p->samples_per_s) + " samples/s";
  const auto all = curve_.points();
  for (auto it = all.rbegin(); it != all.rend(); ++it)
    if (it->workers != first)
      out += (out.empty() ? std::to_string(it->workers) + " workers: " + short_rate(it->samples_per_s) + " samples/s"
                          : ", " + std::to_string(it->workers) + ": " + short_rate(it->samples_per_s));
  return out;
}

void ScalingPolicy::hold_at(int workers, double now_s, bool failed_probe) {
  knee_ = workers;
  had_knee_ = true;
  if (backoff_s_ <= 0) backoff_s_ = config_.reprobe_after_s;
  else if (failed_probe) backoff_s_ = std::min(2 * backoff_s_, config_.reprobe_max_s);
  reprobe_at_ = now_s + backoff_s_;
}

ScalingDecision ScalingPolicy::observe(const QueueMetrics& m, double now_s, bool settling, bool follow) {
  ScalingDecision d;
  const bool changed = last_workers_ >= 0 && m.workers != last_workers_;
  steady_windows_ = changed ? 0 : steady_windows_ + 1;
  if (changed && judging_) {
    if (m.workers <= step_.from) {
      judging_ = false;  // workers left (lost or drained): nothing to judge
    } else {
      // More of the growth joined, or some of it left: judged at the new count.
      step_.to = m.workers;
      step_.predicted = predicted_gain(previous_, step_.to - step_.from);
      curve_.forget(m.workers);
    }
  } else if (changed && m.workers > last_workers_ && last_workers_ > 0 && previous_.samples_per_s > 0) {
    // A growth (the autosizer's or goldminer-ctld's): judged once measured,
    // against fresh windows at the new count.
    judging_ = true;
    confirming_ = false;
    step_ = {last_workers_, m.workers, predicted_gain(previous_, m.workers - last_workers_)};
    curve_.forget(m.workers);
    if (knee_ >= 0 && step_.from >= knee_)
      d.why = "probing " + std::to_string(m.workers) + " workers, above the knee " + std::to_string(knee_) +
              " (after " + seconds(backoff_s_) + ")";
  }
  // Windows in which a joined worker has delivered nothing yet (a Python
  // worker starts torch first) are left out, for at most `measure_windows`
  // after the count changed: a growth is then judged within two settle
  // windows even where the new workers never deliver (they may be what
  // slows the others down).
  const bool warming = !changed && m.warming > 0 && steady_windows_ <= std::max(1, config_.measure_windows);
  if (!warming) curve_.observe(m.workers, m.samples_per_s, now_s, changed);
  last_workers_ = m.workers;
  previous_ = m;
  const int proposal = autosizer_.observe(m);  // keeps its streaks either way

  if (judging_) {
    // Judged when its workers are all here (or have stopped coming for
    // long) and the new count has its measured windows.
    const int need = std::max(1, config_.measure_windows) * (confirming_ ? 2 : 1);
    if (m.workers != step_.to || curve_.settled_windows() < need || (settling && curve_.settled_windows() < 3 * need))
      return d;
    return judge(m, now_s);
  }
  if (!changed) {
    ScalingDecision s = maybe_shrink(m, now_s);
    if (s.change != 0) return s;
  }
  if (follow) return d;
  if (proposal > 0) {
    // Measure, then grow: a growth is judged against the count it left
    // (while nothing flows, the trainer waiting for its first workers or
    // batch, there is nothing to measure or judge).
    if (m.workers > 0 && m.samples_per_s > 0 && !curve_.point(m.workers)) return d;
    d.change = std::max(0, std::min({proposal, ceiling(now_s) - m.workers, had_knee_ ? 1 : proposal}));
  } else {
    d.change = proposal;
  }
  return d;
}

bool ScalingPolicy::holds_growth(const QueueMetrics& m) const {
  return judging_ || (m.samples_per_s > 0 && !curve_.point(m.workers));
}

ScalingDecision ScalingPolicy::judge(const QueueMetrics& m, double now_s) {
  ScalingDecision d;
  judging_ = false;
  const auto to = curve_.point(step_.to), from = curve_.point(step_.from);
  // The count before was never measured, or nothing flowed: nothing to compare.
  if (!to || !from || from->samples_per_s <= 0) return d;
  const double gain = to->samples_per_s - from->samples_per_s;
  const double noise = std::hypot(to->band, from->band);
  char model[64] = "";
  if (step_.predicted > 0) std::snprintf(model, sizeof model, " (model: +%s)", short_rate(step_.predicted).c_str());
  // Paid: at least pay_fraction of the model's, and beyond the noise by
  // that much (a worker is kept on evidence, not on a lucky window).
  const bool significant = gain > noise;
  if (significant && gain - noise >= config_.pay_fraction * step_.predicted) {
    if (knee_ >= 0 && step_.to > knee_ && !confirming_) {
      // A re-probe above the knee moves it for good: measured twice as
      // long (its windows and as many more) before it does, so that one
      // lucky reading does not.
      confirming_ = true;
      judging_ = true;
      d.why = figures(step_.to) + model + ": paid once: measuring " + std::to_string(step_.to) + " again";
      return d;
    }
    confirming_ = false;
    if (knee_ >= 0 && step_.to > knee_) knee_ = -1, backoff_s_ = 0;
    d.why = figures(step_.to) + model + ": paid: keeping " + std::to_string(step_.to);
    return d;
  }
  if (significant && step_.to - step_.from > 1 && step_.predicted > 0) {
    // Some of a step of several workers paid: back to as many as the gain
    // was worth at the model's rate per worker, measured there, and on one
    // worker at a time at once (the back-off is for single workers).
    const double per_worker = step_.predicted / (step_.to - step_.from);
    const int worth = static_cast<int>(std::floor((gain - noise) / per_worker));
    const int back = std::clamp(step_.from + worth, step_.from, step_.to - 1);
    knee_ = back;
    had_knee_ = true;
    reprobe_at_ = now_s;
    d.change = back - m.workers;
    d.why = figures(step_.to) + model + ": paid less than " + percent(config_.pay_fraction) + " of the model: back to " +
            std::to_string(back) + ", then one worker at a time";
    return d;
  }
  // Back to the best measured count at or below where it came from (the
  // fewest workers among those within the noise of the best).
  const bool failed_probe = knee_ >= 0 && step_.from >= knee_;
  int back = step_.from;
  double best = from->samples_per_s;
  for (const CurvePoint& p : curve_.points())
    if (p.workers < step_.to && p.workers >= config_.min_workers && p.samples_per_s > best + p.band)
      back = p.workers, best = p.samples_per_s;
  for (const CurvePoint& p : curve_.points())
    if (p.workers < back && p.workers >= std::max(1, config_.min_workers) && p.samples_per_s + p.band >= best)
      back = p.workers;
  hold_at(back, now_s, failed_probe);
  d.change = back - m.workers;
  d.why = figures(step_.to) + model + ": did not pay: back to " + std::to_string(back) +
          ", the knee; next probe above it in " + seconds(backoff_s_);
  return d;
}

ScalingDecision ScalingPolicy::maybe_shrink(const QueueMetrics& m, double now_s) {
  ScalingDecision d;
  const int k = m.workers;
  if (k - 1 < std::max(1, config_.min_workers)) return d;
  const auto now = curve_.point(k), fewer = curve_.point(k - 1);
  if (!now || !fewer || curve_.settled_windows() < config_.measure_windows) return d;
  if (fewer->samples_per_s < now->samples_per_s * (1 - config_.shrink_band)) return d;
  hold_at(k - 1, now_s, false);
  d.change = -1;
  d.why = figures(k) + ": one fewer within " + percent(config_.shrink_band) + ": back to " + std::to_string(k - 1);
  return d;
}

}  // namespace goldminer
