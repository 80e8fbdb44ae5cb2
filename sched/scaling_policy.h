// Job-level measured scaling: one job's worker count follows what its
// measured scaling curve (scaling_curve.h) says the workers deliver, not
// only what the queue model predicts. The Autosizer (autosizer.h) still
// says when the trainer starves (grow) or is oversupplied (shrink); this
// policy decides by how much, and judges every step once the new count is
// measured, with one test for growing and shrinking:
//
// - The value of a worker is judged against one worker's measured rate,
//   as GoldMiner does: r1 = the best samples/s per worker of any count
//   measured (kept after its windows expire). The workers between counts a < b pay when the gain
//   mean(b) - mean(a) exceeds pay_fraction x r1 x (b - a) by z standard
//   errors of the difference (each count's mean has standard error
//   noise x mean / sqrt(windows), the noise pooled over the job's counts:
//   ScalingCurve::relative_noise), and do not pay when the gain falls
//   short of it by 1.64 standard errors. In between, the new count is
//   measured for more windows (up to twice measure_windows); still
//   undecided, the workers are not kept. The power of the test does not fall with the
//   job's size: the band is a standard error of the difference, not a
//   share of the total rate.
// - A false-positive budget over the job's life: the k-th judgment of a
//   growth keeps workers only at z = the normal quantile of
//   1 - alpha / (k (k + 1))
//   (alpha = 0.05 over all of them: 1.96 for the first, 2.94 for the 5th,
//   3.67 for the 20th).
// - Steps are sized so that their gain is resolvable: the smallest s with
//   s x r1 x (1 - pay_fraction) >= (z + 1.28) x the standard error
//   expected for a step of s (90 % power at the pay rule's threshold; at
//   least the autosizer's proposal before any knee).
// - A growth that did not pay goes back to the best measured count at or
//   below where it came from (the knee); a step of several workers keeps
//   those its gain (less z standard errors) was worth at r1. The job holds
//   at the knee for a back-off (reprobe_after_s, doubled after every probe
//   shown not to pay, at most reprobe_max_s; a probe the noise left
//   undecided is repeated as soon, its step one size larger each time),
//   then may probe one resolvable step above it, only while the trainer
//   waits; after a probe above it shown not to pay, the next probe is one
//   step below it (judged as any shrink: a knee set too high on a lucky
//   reading comes down). A signal probes at once: the trainer's wait rose
//   by 0.2 or more, or the knee count's rate rose by 10 % and 3 standard
//   errors of the shift; when it fell so, every count's windows are
//   forgotten and, once measured again, a step down is tried (the workers
//   may no longer pay).
// - Workers that do not pay even on average (k of them deliver less than
//   pay_fraction x r1 x k, beyond the noise: the knee moved down under a
//   job that holds no knee) are stepped down to what they deliver, plus
//   one.
// - A shrink (the autosizer's oversupply, a probe below the knee, a step
//   down on a signal or to what the workers are worth) is judged by the
//   same test: workers whose removal cost what they were worth come back,
//   and the job holds there for a back-off.
// - Under goldminer-ctld (follow) the knee is soft: a step of one worker
//   is judged against useful_fraction x r1 instead of pay_fraction x r1,
//   so the knee caps only a worker that adds (next to) nothing, and one
//   that adds less than the pay rule asks keeps its place in the curve the
//   job reports: goldminer-ctld grants it by its measured marginal value
//   (dw_allocation.h), only where no other job's worker is worth more. A
//   step of several workers keeps the pay rule (and keeps those its gain
//   was worth at r1): its gain, shared evenly, would let workers that add
//   nothing ride on those that add much. On its own the job has no one to
//   compete with: it keeps the pay rule.
// - Under goldminer-ctld (follow), while no knee is known, what the job
//   claims is capped by an exploring cap, not dw-max
//   (claim_ceiling): max(1, min_workers) first;
//   each time the job has been measured at the whole cap (settled
//   windows, the trainer still waiting) it rises by the workers that
//   would bring the trainer to what it would take if it never waited, at
//   one worker's rate r1 (demand c / (1 - wait) less the rate c, over
//   r1), at least one and at most doubling the count; while nothing
//   flows yet (the trainer waits for several workers before its first
//   batch) it doubles each window the job holds all of it. goldminer-ctld
//   grants no more, so a job's claim never outgrows what it has shown:
//   measured, then grown, and each growth judged as above.
// - Windows in which the trainer was busy elsewhere (the queue full, the
//   trainer not waiting, the rate far below the count's: an evaluation, a
//   checkpoint) are left out: they measure the trainer, not the workers;
//   more than 12 in a row are the trainer's new pace, and every count's
//   earlier windows are forgotten instead.
//
// - A curve is keyed by placement: a growth that put workers on the
//   trainer's own node (they share its cores) and did not pay says that
//   workers there do not pay, not that workers elsewhere would not. It is
//   undone by removing those workers (ScalingDecision::avoid_trainer_node),
//   later workers start on other nodes, the windows of the counts it
//   measured with them are forgotten, and the knee it set is probed again
//   after the first back-off (not a doubled one), with workers placed
//   elsewhere.
//
// Every decision comes with one log line naming the figures it used, e.g.
//   "6 workers: 7.9k samples/s, 2: 13.7k (needs +1.2k per worker, z 1.96):
//    did not pay: back to 2, the knee; next probe above it in 60 s"
// Slurm-free; thread-compatible; one per job.
#ifndef GOLDMINER_SCHED_SCALING_POLICY_H_
#define GOLDMINER_SCHED_SCALING_POLICY_H_

#include <algorithm>
#include <string>
#include <vector>

#include "goldminer/elastic.h"  // AutosizerConfig
#include "sched/autosizer.h"
#include "sched/scaling_curve.h"

namespace goldminer {

struct ScalingDecision {
  int change = 0;    // > 0 add, < 0 remove, 0 keep
  std::string why;   // the decision's log line; "" when nothing was judged
  // A growth that put workers on the trainer's own node did not pay: the
  // workers removed are those there, and later ones start on other nodes
  // (the knee it set is that placement's; it is probed again soon).
  bool avoid_trainer_node = false;
};

// The model's samples/s gain from `added` workers more, from a window `m`:
// with c the trainer's rate, r one worker's best rate and D = c / (1 -
// wait) what the trainer would take if it never waited (wait capped at
// 0.95), min(D, c + added r) - c; 0 when the window measured no flow or no
// worker rate.
double predicted_gain(const QueueMetrics& m, int added);

// The one-sided normal quantile: z with P(Z > z) = p, for 0 < p < 1.
double normal_quantile_upper(double p);

class ScalingPolicy {
 public:
  explicit ScalingPolicy(const AutosizerConfig& config);

  // One observation window ending at `now_s`: m.workers connected at its
  // end, m.samples_per_s delivered. `settling`: workers started for the
  // last growth are still on their way (judging waits for them).
  // `follow`: goldminer-ctld sets the count (the change returned is then
  // only what the policy asks: undo a growth that did not pay, or 0);
  // otherwise the autosizer's proposal, sized and limited by the knee.
  ScalingDecision observe(const QueueMetrics& m, double now_s, bool settling, bool follow = false);

  const ScalingCurve& curve() const { return curve_; }
  // Workers above which growth did not pay, -1 while none is known.
  int knee() const { return knee_; }
  // The back-off has run out (or a signal came) and the trainer waits: a
  // step above the knee may be tried.
  bool probing(double now_s) const;
  // The most workers the job should have now: the knee (plus a probe's
  // step when probing), or max_workers.
  int ceiling(double now_s) const;
  // The most workers goldminer-ctld may grant the job now (the session's
  // report, the simulator's claim): ceiling(), or while no knee is known
  // the exploring cap (see above).
  int claim_ceiling(double now_s) const;
  // What the job's report to goldminer-ctld says of it (SessionReport's
  // ceiling), and what caps the simulator's claims: claim_ceiling(), at
  // least 1.
  int reported_ceiling(double now_s) const { return std::max(1, claim_ceiling(now_s)); }
  // The ceiling a report carries when the job has (or has coming) `held`
  // workers and `holding`: its growth is held now (workers on their way,
  // or holds_growth of its last window). reported_ceiling(), but while
  // growth is held no more than `held` (at least 1): goldminer-ctld lends
  // the CPUs it could not use yet to other jobs until the step is judged.
  int report_ceiling(double now_s, int held, bool holding) const {
    const int cap = reported_ceiling(now_s);
    return holding && cap > held ? std::max(1, held) : cap;
  }
  // No workers are to be started now, whoever asks (goldminer-ctld's
  // target included): a step is being judged, or samples flow and the
  // count the window `m` ended with is not measured yet (measure, then grow).
  bool holds_growth(const QueueMetrics& m) const;
  // Growths judged so far (each spent some of the false-positive budget).
  int judgments() const { return judgments_; }
  // Windows left out because the trainer was busy elsewhere.
  int busy_windows() const { return busy_windows_; }

 private:
  struct Step {  // a step being judged
    int from = 0, to = 0;
    int from_local = 0;  // workers on the trainer's node before it
  };
  ScalingDecision judge(const QueueMetrics& m, double now_s, bool settling);
  ScalingDecision on_signal(const QueueMetrics& m, double now_s, bool follow);
  ScalingDecision maybe_shrink_to_worth(const QueueMetrics& m);
  ScalingDecision maybe_probe_down(const QueueMetrics& m, double now_s);
  void widen_exploring(const QueueMetrics& m, bool settling);
  bool trainer_busy(const QueueMetrics& m) const;
  // What each worker of a step of `n` must add, as a share of one
  // worker's rate: pay_fraction, or useful_fraction for one worker under
  // goldminer-ctld (the soft knee).
  double keep_fraction(int n) const { return follow_ && n == 1 ? config_.useful_fraction : config_.pay_fraction; }
  // One worker's best measured rate (samples/s), 0 before any.
  double rate_per_worker() const;
  // z for the next judgment that keeps workers (the budget above).
  double pay_z() const;
  // The resolvable step from `workers` (see above), at least 1.
  int step_size(int workers) const;
  void hold_at(int workers, double now_s, bool failed_probe);
  // The measured points as a decision line lists them: `first`, then the
  // others from the most workers down ("6 workers: 7.9k samples/s, 2: 13.7k").
  std::string figures(int first) const;

  AutosizerConfig config_;
  Autosizer autosizer_;
  ScalingCurve curve_;
  bool judging_ = false;
  bool follow_ = false;       // goldminer-ctld sets the count (the last window said)
  bool own_shrink_ = false;   // the last shrink was this policy's: judge it
  Step step_;
  int last_workers_ = -1;
  int last_local_ = 0;        // workers on the trainer's node in the last window
  bool avoiding_local_ = false;  // later workers start on other nodes than the trainer's
  int steady_windows_ = 0;    // windows since the count last changed
  double changed_at_ = 0;     // when it last changed
  int judgments_ = 0;
  mutable double z_ = 0;      // pay_z() for z_for_ judgments
  mutable int z_for_ = -1;
  int busy_windows_ = 0;
  int busy_run_ = 0;          // busy windows in a row
  double last_wait_ = 0;      // the trainer's wait in the last window
  double best_per_worker_ = 0;  // one worker's best rate seen (reset on a signal)
  int knee_ = -1;
  bool had_knee_ = false;
  double knee_rate_ = 0;      // the knee count's mean when it was set
  double knee_se_ = 0;        // its standard error then
  double knee_wait_ = 0;      // the trainer's wait then
  double backoff_s_ = 0;      // the current back-off; 0: none yet
  double reprobe_at_ = 0;
  double shrink_after_ = 0;   // no shrink before (a shrink that cost was undone)
  bool step_down_ = false;    // a signal asked for a step down once measured again
  bool returning_ = false;    // undoing a shrink that cost: the move is not judged
  int undecided_probes_ = 0;  // probes in a row the noise left undecided (each adds a step)
  bool probe_down_next_ = false;  // the next probe is below the knee
  int explore_cap_ = 1;       // follow mode, no knee yet: the exploring cap
};

}  // namespace goldminer

#endif  // GOLDMINER_SCHED_SCALING_POLICY_H_
