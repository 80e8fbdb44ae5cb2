#include "sched/scaling_policy.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace goldminer {
namespace {

constexpr double kMaxWaitFraction = 0.95;  // beyond: the demand estimate explodes
constexpr double kAlpha = 0.05;            // false positives over a job's life
constexpr double kZUnpaid = 1.64;          // a step did not pay: one-sided 5 %
constexpr double kSignalWaitRise = 0.2;    // the trainer waits this much more: probe
constexpr double kSignalRateShift = 0.1;   // the knee count's rate moved this share: probe
constexpr double kZSignal = 3;             // and this many standard errors of the shift
constexpr double kZPower = 1.28;           // steps sized for 90 % power at the pay rule's threshold
constexpr int kMaxBusyWindows = 12;        // longer "busy elsewhere" is the trainer's new pace
constexpr double kMaxStartingS = 60;       // a worker starting for longer is stuck, not starting

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

std::string fixed2(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
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

double normal_quantile_upper(double p) {
  // P(Z > z) = erfc(z / sqrt 2) / 2 falls with z: bisection.
  double lo = -10, hi = 40;
  for (int i = 0; i < 200; ++i) {
    const double mid = (lo + hi) / 2;
    (0.5 * std::erfc(mid / std::sqrt(2.0)) > p ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

ScalingPolicy::ScalingPolicy(const AutosizerConfig& config)
    : config_(config), autosizer_(config), curve_(curve_config(config)), explore_cap_(std::max(1, config.min_workers)) {}

bool ScalingPolicy::probing(double now_s) const {
  return knee_ >= 0 && now_s >= reprobe_at_ && last_wait_ > config_.grow_wait_fraction;
}

int ScalingPolicy::ceiling(double now_s) const {
  if (knee_ < 0) return config_.max_workers;
  return std::clamp(knee_ + (probing(now_s) ? step_size(knee_) : 0), config_.min_workers, config_.max_workers);
}

int ScalingPolicy::claim_ceiling(double now_s) const {
  if (knee_ >= 0) return ceiling(now_s);
  return std::clamp(explore_cap_, std::min(config_.min_workers, config_.max_workers), config_.max_workers);
}

double ScalingPolicy::rate_per_worker() const {
  double best = best_per_worker_;
  for (const CurvePoint& p : curve_.points())
    if (p.workers > 0) best = std::max(best, p.mean / p.workers);
  return best;
}

double ScalingPolicy::pay_z() const {
  // Asked many times a window (ceiling()): computed once per judgment.
  if (z_for_ != judgments_) {
    const double k = judgments_ + 1;
    z_ = normal_quantile_upper(kAlpha / (k * (k + 1)));
    z_for_ = judgments_;
  }
  return z_;
}

int ScalingPolicy::step_size(int workers) const {
  const double r1 = best_per_worker_;
  const auto here = curve_.point(workers);
  const int room = config_.max_workers - workers;
  if (r1 <= 0 || !here || room <= 1) return std::max(1, std::min(1, room));
  const double cv = curve_.relative_noise(), z = pay_z();
  const double n_here = std::max(1, here->windows);
  const double n_new = 2.0 * std::max(1, config_.measure_windows);
  for (int s = 1; s < room; ++s) {
    const double next = here->mean + s * r1;
    const double se = cv * std::sqrt(here->mean * here->mean / n_here + next * next / n_new);
    if (s * r1 * (1 - keep_fraction(s)) >= (z + kZPower) * se) return std::min(room, s * (1 + undecided_probes_));
  }
  return room;
}

std::string ScalingPolicy::figures(int first) const {
  std::string out;
  auto p = curve_.point(first);
  if (p) out = std::to_string(first) + " workers: " + short_rate(p->mean) + " samples/s";
  const auto all = curve_.points();
  for (auto it = all.rbegin(); it != all.rend(); ++it)
    if (it->workers != first)
      out += (out.empty() ? std::to_string(it->workers) + " workers: " + short_rate(it->mean) + " samples/s"
                          : ", " + std::to_string(it->workers) + ": " + short_rate(it->mean));
  return out;
}

void ScalingPolicy::hold_at(int workers, double now_s, bool failed_probe) {
  knee_ = workers;
  had_knee_ = true;
  if (backoff_s_ <= 0) backoff_s_ = config_.reprobe_after_s;
  else if (failed_probe) backoff_s_ = std::min(2 * backoff_s_, config_.reprobe_max_s);
  reprobe_at_ = now_s + backoff_s_;
  const auto p = curve_.point(workers);
  knee_rate_ = p ? p->mean : 0;
  knee_se_ = p ? curve_.standard_error(*p) : 0;
  knee_wait_ = last_wait_;
}

bool ScalingPolicy::trainer_busy(const QueueMetrics& m) const {
  if (m.queue_fill < config_.shrink_queue_fill || m.trainer_wait_fraction > config_.grow_wait_fraction) return false;
  // The trainer neither waited nor took what its count delivers: busy
  // elsewhere. Against the count's own windows, else the nearest count
  // below (just after a resize).
  const double cv = curve_.relative_noise();
  if (auto p = curve_.point(m.workers)) return m.samples_per_s < p->mean * (1 - std::max(3 * cv, 0.15));
  double below = 0;
  for (const CurvePoint& p : curve_.points())
    if (p.workers < m.workers) below = p.mean;
  return below > 0 && m.samples_per_s < below * 0.7;
}

ScalingDecision ScalingPolicy::observe(const QueueMetrics& m, double now_s, bool settling, bool follow) {
  ScalingDecision d;
  follow_ = follow;
  const bool changed = last_workers_ >= 0 && m.workers != last_workers_;
  steady_windows_ = changed ? 0 : steady_windows_ + 1;
  if (changed) changed_at_ = now_s;
  if (changed) {
    if (judging_) {
      if (m.workers == step_.from) {
        judging_ = false;  // workers left (lost or drained): nothing to judge
      } else {
        step_.to = m.workers;  // more of the step joined, or some of it left
        curve_.forget(m.workers);
      }
    } else if (last_workers_ > 0 && m.workers > 0 && curve_.point(last_workers_) && !returning_ &&
               (m.workers > last_workers_ || own_shrink_)) {
      // A growth (the autosizer's or goldminer-ctld's), or this policy's
      // own shrink: judged once measured, against fresh windows.
      judging_ = true;
      step_ = {last_workers_, m.workers, last_local_};
      curve_.forget(m.workers);
      if (knee_ >= 0 && m.workers > knee_ && last_workers_ >= knee_)
        d.why = "probing " + std::to_string(m.workers) + " workers, above the knee " + std::to_string(knee_);
    }
    own_shrink_ = false;
    returning_ = false;
  }
  // Windows in which a joined worker has delivered nothing yet are left
  // out, for at most `measure_windows` after the count changed (a worker
  // may also deliver nothing because the others hold every credit); those
  // in which one is still starting its producers (a Python worker starts
  // a process each, importing torch: on cores it shares, the others slow
  // meanwhile) for up to kMaxStartingS; so are those of a trainer busy
  // elsewhere.
  const bool warming = !changed && ((m.warming > 0 && steady_windows_ <= std::max(1, config_.measure_windows)) ||
                                    (m.starting > 0 && now_s - changed_at_ < kMaxStartingS));
  bool busy = !warming && trainer_busy(m);
  busy_run_ = busy ? busy_run_ + 1 : 0;
  if (busy && busy_run_ > kMaxBusyWindows) {
    // Busy for longer than an evaluation or a checkpoint: the trainer is
    // slower now. What the counts measured before no longer holds.
    for (const CurvePoint& q : curve_.points()) curve_.forget(q.workers);
    busy = false;
    busy_run_ = 0;
  }
  if (busy) ++busy_windows_;
  // A busy window still tells the curve that the count changed (its rate
  // is not a window of either count).
  if (!warming) curve_.observe(m.workers, busy ? std::nan("") : m.samples_per_s, now_s, changed);
  last_workers_ = m.workers;
  last_local_ = m.local_workers;
  if (!busy) last_wait_ = m.trainer_wait_fraction;
  // One worker's rate outlives the windows it was measured in: a job that
  // left few workers behind long ago still judges a worker by it. (The
  // curve changes only here: read from best_per_worker_ until the next.)
  best_per_worker_ = rate_per_worker();
  const int proposal = busy ? 0 : autosizer_.observe(m);  // a busy window says nothing of the workers

  if (judging_) {
    // Judged when its workers are all here (or have stopped coming for
    // long) and the new count has its measured windows.
    const int need = std::max(1, config_.measure_windows);
    if (m.workers != step_.to || curve_.settled_windows() < need || (settling && curve_.settled_windows() < 3 * need))
      return d;
    ScalingDecision j = judge(m, now_s, settling);
    if (!j.why.empty() || j.change != 0) return j;
    return d;
  }
  if (!changed && !busy && knee_ >= 0 && m.workers == knee_) {
    ScalingDecision s = on_signal(m, now_s, follow);
    if (s.change != 0 || !s.why.empty()) return s;
  }
  if (!changed && !busy && !follow) {
    ScalingDecision s = maybe_shrink_to_worth(m);
    if (s.change != 0) return s;
    s = maybe_probe_down(m, now_s);
    if (s.change != 0) return s;
  }
  if (follow) {
    if (!changed && !busy && knee_ < 0) widen_exploring(m, settling);
    return d;
  }
  if (proposal > 0) {
    // Measure, then grow: a growth is judged against the count it left
    // (while nothing flows, the trainer waiting for its first workers or
    // batch, there is nothing to measure or judge).
    if (m.workers > 0 && m.samples_per_s > 0 && !curve_.point(m.workers)) return d;
    const int step = m.workers > 0 && m.samples_per_s > 0 ? step_size(m.workers) : 1;
    const int want = had_knee_ ? step : std::max(proposal, step);
    d.change = std::max(0, std::min(want, ceiling(now_s) - m.workers));
  } else if (proposal < 0) {
    if (now_s < shrink_after_ || (m.samples_per_s > 0 && !curve_.point(m.workers))) return d;
    own_shrink_ = m.samples_per_s > 0;
    d.change = proposal;
  }
  return d;
}

void ScalingPolicy::widen_exploring(const QueueMetrics& m, bool settling) {
  const int a = m.workers;
  if (settling || a < explore_cap_ || explore_cap_ >= config_.max_workers) return;
  if (m.samples_per_s <= 0) {
    // Nothing flows yet (a trainer waiting for several workers before its
    // first batch): nothing to measure, so nothing to wait for; the cap
    // doubles each window the job holds all of it.
    explore_cap_ = std::min(config_.max_workers, a + std::max(1, a));
    return;
  }
  const auto p = curve_.point(a);
  if (!p || curve_.settled_windows() < std::max(1, config_.measure_windows)) return;
  const double r1 = best_per_worker_;
  if (r1 <= 0 || m.trainer_wait_fraction <= config_.grow_wait_fraction) return;  // it has what it takes
  const double wait = std::min(m.trainer_wait_fraction, kMaxWaitFraction);
  const double to_full = std::ceil((p->mean / (1 - wait) - p->mean) / r1 - 1e-9);
  explore_cap_ = std::min(config_.max_workers, a + static_cast<int>(std::clamp(to_full, 1.0, std::max(1.0, 1.0 * a))));
}

ScalingDecision ScalingPolicy::on_signal(const QueueMetrics& m, double now_s, bool follow) {
  ScalingDecision d;
  const auto p = curve_.point(m.workers);
  if (!p || curve_.settled_windows() < std::max(1, config_.measure_windows)) return d;
  if (knee_rate_ <= 0 || p->windows < 2 * std::max(1, config_.measure_windows)) {
    // The reference is set over twice the measured windows first: a
    // knee's first few windows would make a false signal of the noise.
    knee_rate_ = p->mean;
    knee_se_ = curve_.standard_error(*p);
    return d;
  }
  const double shift = p->mean - knee_rate_;
  const double noise = kZSignal * std::hypot(curve_.standard_error(*p), knee_se_);
  const bool moved = std::fabs(shift) > std::max(noise, kSignalRateShift * knee_rate_);
  if (moved && shift < 0 && !follow && m.workers > std::max(1, config_.min_workers)) {
    // The workers deliver less than when the knee was set: some may no
    // longer pay. The windows of every count are from before the change:
    // forgotten; once this count is measured again, a step down, judged
    // as any shrink.
    d.why = figures(m.workers) + ": the rate at the knee fell from " + short_rate(knee_rate_) +
            ": measuring it again, then a step down";
    for (const CurvePoint& q : curve_.points()) curve_.forget(q.workers);
    knee_rate_ = 0;
    step_down_ = true;
    return d;
  }
  if ((moved && shift > 0) || m.trainer_wait_fraction > knee_wait_ + kSignalWaitRise) {
    if (reprobe_at_ > now_s) {
      reprobe_at_ = now_s;
      d.why = figures(m.workers) + ": conditions changed at the knee (rate " + short_rate(knee_rate_) + " -> " +
              short_rate(p->mean) + ", trainer waiting " + fixed2(knee_wait_) + " -> " +
              fixed2(m.trainer_wait_fraction) + "): probing above it now";
    }
    knee_rate_ = p->mean;
    knee_se_ = curve_.standard_error(*p);
    knee_wait_ = m.trainer_wait_fraction;
  }
  return d;
}

ScalingDecision ScalingPolicy::maybe_shrink_to_worth(const QueueMetrics& m) {
  ScalingDecision d;
  const int k = m.workers, floor = std::max(1, config_.min_workers);
  const double r1 = best_per_worker_;
  const auto p = curve_.point(k);
  if (k <= floor || r1 <= 0 || !p || curve_.settled_windows() < std::max(1, config_.measure_windows)) return d;
  // Even on average the workers do not pay (a curve concave or flat past
  // its knee pays less at the margin than on average), or a signal asked
  // for a step down: to what the workers deliver at one worker's rate,
  // plus one (at least one fewer), judged as any shrink.
  const bool unpaid = p->mean + kZUnpaid * curve_.standard_error(*p) < config_.pay_fraction * r1 * k;
  if (!unpaid && !step_down_) return d;
  step_down_ = false;
  const int to = std::clamp(static_cast<int>(std::lround(p->mean / r1)) + 1, floor, k - 1);
  own_shrink_ = true;
  d.change = to - k;
  d.why = figures(k) + ": " + std::to_string(k) + " workers deliver what " + std::to_string(to - 1) + " of " +
          short_rate(r1) + " each would: trying " + std::to_string(to);
  return d;
}

ScalingDecision ScalingPolicy::maybe_probe_down(const QueueMetrics& m, double now_s) {
  ScalingDecision d;
  const int k = m.workers, floor = std::max(1, config_.min_workers);
  if (!probe_down_next_ || knee_ < 0 || k != knee_ || k <= floor || now_s < reprobe_at_ || !curve_.point(k) ||
      curve_.settled_windows() < std::max(1, config_.measure_windows))
    return d;
  // After a probe above the knee that did not pay, the next probe is one
  // below it: the workers kept at the knee are judged again, as any
  // shrink, so that a knee set too high on a lucky reading comes down.
  probe_down_next_ = false;
  own_shrink_ = true;
  // One step, or down to what the workers deliver at one worker's rate
  // (plus one) when that is lower.
  const double r1 = best_per_worker_;
  int to = k - std::min(k - floor, step_size(std::max(floor, k - 1)));
  if (r1 > 0) to = std::min(to, static_cast<int>(std::lround(curve_.point(k)->mean / r1)) + 1);
  d.change = std::clamp(to, floor, k - 1) - k;
  d.why = "probing " + std::to_string(k + d.change) + " workers, below the knee " + std::to_string(k);
  return d;
}

bool ScalingPolicy::holds_growth(const QueueMetrics& m) const {
  return judging_ || (m.samples_per_s > 0 && !curve_.point(m.workers));
}

ScalingDecision ScalingPolicy::judge(const QueueMetrics& m, double now_s, bool settling) {
  ScalingDecision d;
  const auto to = curve_.point(step_.to), from = curve_.point(step_.from);
  // The count before has no fresh windows any more, or nothing flowed:
  // nothing to compare.
  if (!to || !from || from->mean <= 0) {
    judging_ = false;
    return d;
  }
  const bool growth = step_.to > step_.from;
  const CurvePoint& hi = growth ? *to : *from;
  const CurvePoint& lo = growth ? *from : *to;
  const int n = hi.workers - lo.workers;
  const double r1 = best_per_worker_;
  const double need = keep_fraction(n) * r1 * n;
  const double gain = hi.mean - lo.mean;
  const double se = std::hypot(curve_.standard_error(hi), curve_.standard_error(lo));
  const double z = pay_z();
  bool paid = gain - z * se >= need;
  const bool unpaid = gain + kZUnpaid * se < need;
  if (!paid && !unpaid && to->windows < 2 * std::max(1, config_.measure_windows) && !settling)
    return d;  // undecided: measured longer
  judging_ = false;
  // Only a growth's judgment can keep workers that do not pay on a lucky
  // reading: each spends its share of the budget.
  if (growth) ++judgments_;
  // Undecided after being measured as long as allowed: a step changes the
  // count only on evidence, so the count goes back to where the step came
  // from (a growth's workers are not kept on a coin's toss near the
  // threshold; a shrink's come back).
  char head[160];
  std::snprintf(head, sizeof head, " (needs +%s per worker, z %.2f)", short_rate(keep_fraction(n) * r1).c_str(), z);
  const std::string figs = figures(step_.to) + head;
  if (!growth) {
    if (!unpaid) {
      // The workers removed were worth what they cost, or may have been:
      // back, and no shrink for a back-off.
      d.change = step_.from - m.workers;
      returning_ = true;  // to a count already judged: not judged again
      shrink_after_ = now_s + std::max(config_.reprobe_after_s, backoff_s_);
      if (knee_ == step_.from) {
        // A probe below the knee: the knee holds, and the probe above it
        // that this one stood in for comes after the short back-off.
        hold_at(step_.from, now_s, false);
        reprobe_at_ = now_s + config_.reprobe_after_s;
      }
      d.why = figs + ": the " + std::to_string(n) + " workers removed " + (paid ? "paid" : "may have paid") +
              ": back to " + std::to_string(step_.from);
      return d;
    }
    hold_at(step_.to, now_s, false);
    d.why = figs + ": the " + std::to_string(n) + " workers removed did not pay: keeping " + std::to_string(step_.to);
    return d;
  }
  // A probe that showed the workers do not pay backs off longer; one the
  // noise left undecided is tried again as soon, with a larger step.
  const bool probe = knee_ >= 0 && step_.from >= knee_;
  const bool failed_probe = probe && unpaid;
  if (failed_probe) probe_down_next_ = true;
  undecided_probes_ = probe && !unpaid ? undecided_probes_ + 1 : 0;
  if (n > 1 && r1 > 0 && gain - z * se > 0) {
    // A step of several workers: its gain, less z standard errors, is
    // worth so many workers at one worker's rate. A step that paid on average may still hold workers
    // at its top that add nothing (a linear curve that ends inside it):
    // only those the gain was worth are kept.
    // (Rounded down unless within a quarter of a worker: a worker kept on
    // the noise costs a back-off before a probe below the knee undoes it.)
    const int worth = std::clamp(static_cast<int>(std::floor((gain - z * se) / r1 + 0.25)), 0, n);
    const int back = step_.from + worth;
    if (worth < n && back > step_.from) {
      // Growth paid here: probed again soon, sized by the model.
      backoff_s_ = 0;
      had_knee_ = false;
      undecided_probes_ = 0;
      hold_at(back, now_s, false);
      d.change = back - m.workers;
      d.why = figs + ": worth about " + std::to_string(worth) + " of its " + std::to_string(n) + " workers: back to " +
              std::to_string(back) + ", the knee; next probe above it in " + seconds(backoff_s_);
      return d;
    }
  }
  if (paid) {
    // A probe above the knee that paid: the knee is gone, and growth is
    // sized by the model again (the next judgment keeps what it is worth).
    if (knee_ >= 0 && step_.to > knee_) knee_ = -1, backoff_s_ = 0, had_knee_ = false;
    undecided_probes_ = 0;
    d.why = figs + ": paid: keeping " + std::to_string(step_.to);
    return d;
  }
  // Back to where it came from, or to a count below that measured
  // clearly better (the step came from a count that was never judged).
  int back = step_.from;
  double best = from->mean + 2 * curve_.standard_error(*from);
  for (const CurvePoint& p : curve_.points())
    if (p.workers < step_.from && p.workers >= std::max(1, config_.min_workers) &&
        p.mean - 2 * curve_.standard_error(p) > best)
      back = p.workers, best = p.mean - 2 * curve_.standard_error(p);
  // Workers added on the trainer's own node share its cores: what did not
  // pay is that placement, not the count. Those are the ones removed,
  // later ones start elsewhere, and the knee is probed again as soon as
  // after a first back-off, with them.
  const bool placed_here = !avoiding_local_ && m.local_workers > step_.from_local;
  hold_at(back, now_s, failed_probe && !placed_here);
  std::string where;
  if (placed_here) {
    avoiding_local_ = true;
    d.avoid_trainer_node = true;
    probe_down_next_ = false;
    reprobe_at_ = now_s + config_.reprobe_after_s;
    for (int k = step_.from + 1; k <= step_.to; ++k) curve_.forget(k);
    where = ", removing the " + std::to_string(m.local_workers - step_.from_local) +
            " on the trainer's node; later workers start on other nodes";
  }
  d.change = back - m.workers;
  d.why = figs + (unpaid ? ": did not pay" : ": not shown to pay") + ": back to " + std::to_string(back) +
          ", the knee" + where + "; next probe above it in " + seconds(reprobe_at_ - now_s);
  return d;
}

}  // namespace goldminer
