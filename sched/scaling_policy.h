// Job-level measured scaling: one job's worker count follows what its
// measured scaling curve (scaling_curve.h) says the workers deliver, not
// only what the queue model predicts. The Autosizer (autosizer.h) still
// proposes growth while the trainer waits; this policy
//
// - grows (the autosizer's proposal) only from a measured count, and
//   judges every growth from a count at which samples flowed (whoever asked for it: the autosizer or
//   goldminer-ctld's target) once the new count is measured: a step from
//   a to b workers whose measured gain, less the noise band of the two
//   medians, is below `pay_fraction` of what the model predicted for it
//   (or is within the noise) is undone (back to the best measured count
//   up to a), which becomes the job's knee; a step of several workers
//   whose gain was beyond the noise but short of that goes back to a plus
//   the workers the gain was worth at the model's rate per worker, and on
//   from there one worker at a time at once;
// - holds the job at its knee for a back-off (`reprobe_after_s`, doubled
//   after every probe that did not pay, at most `reprobe_max_s`), then
//   re-probes one worker above it (a trainer's step time or the other
//   jobs' load may have changed); a probe that pays over twice the
//   windows (its own and as many more: one lucky reading must not move
//   the knee for good) clears the knee, and
//   once a job has had a knee it grows one worker at a time;
// - shrinks by one when one worker fewer, measured and fresh, kept the
//   throughput within `shrink_band` of the current count's.
//
// The model's prediction for a step from a to b (batches/s, then samples/s
// at the window's samples per batch): with c the trainer's rate, r one
// worker's best rate and D = c / (1 - wait) what the trainer would take if
// it never waited (wait capped at 0.95), min(D, c + (b - a) r) - c.
//
// Every decision comes with one log line naming the figures it used, e.g.
//   "6 workers: 7.9k samples/s, 2: 13.7k (model: +23.3k): did not pay:
//    back to 2, the knee; next probe above it in 60 s"
//   "4 workers: 20.1k samples/s, 2: 14.2k (model: +6.0k): paid: keeping 4"
//   "7 workers: 10.8k samples/s, 6: 10.7k: one fewer within 5 %: back to 6"
//   "probing 3 workers, above the knee 2 (after 60 s)"
// Slurm-free; thread-compatible; one per job.
#ifndef GOLDMINER_SCHED_SCALING_POLICY_H_
#define GOLDMINER_SCHED_SCALING_POLICY_H_

#include <string>
#include <vector>

#include "goldminer/elastic.h"  // AutosizerConfig
#include "sched/autosizer.h"
#include "sched/scaling_curve.h"

namespace goldminer {

struct ScalingDecision {
  int change = 0;    // > 0 add, < 0 remove, 0 keep
  std::string why;   // the decision's log line; "" when nothing was judged
};

// The model's samples/s gain from `added` workers more, from a window `m`
// (see above); 0 when the window measured no flow or no worker rate.
double predicted_gain(const QueueMetrics& m, int added);

class ScalingPolicy {
 public:
  explicit ScalingPolicy(const AutosizerConfig& config);

  // One observation window ending at `now_s`: m.workers connected at its
  // end, m.samples_per_s delivered. `settling`: workers started for the
  // last growth are still on their way (judging waits for them).
  // `follow`: goldminer-ctld sets the count (the change returned is then
  // only what the policy asks: undo a growth that did not pay, or 0);
  // otherwise the autosizer's proposal, limited by the knee, is returned.
  ScalingDecision observe(const QueueMetrics& m, double now_s, bool settling, bool follow = false);

  const ScalingCurve& curve() const { return curve_; }
  // Workers above which growth did not pay, -1 while none is known.
  int knee() const { return knee_; }
  // The back-off has run out: one worker above the knee may be tried.
  bool probing(double now_s) const { return knee_ >= 0 && now_s >= reprobe_at_; }
  // The most workers the job should have now: the knee (one more when
  // probing), or max_workers.
  int ceiling(double now_s) const;
  // No workers are to be started now, whoever asks (goldminer-ctld's
  // target included): a growth is being judged, or samples flow and the
  // count the window `m` ended with is not measured yet (measure, then grow).
  bool holds_growth(const QueueMetrics& m) const;

 private:
  struct Step {  // a growth being judged
    int from = 0, to = 0;
    double predicted = 0;  // samples/s the model expected it to add
  };
  ScalingDecision judge(const QueueMetrics& m, double now_s);
  ScalingDecision maybe_shrink(const QueueMetrics& m, double now_s);
  // Sets the knee at `workers` and the next probe's time.
  void hold_at(int workers, double now_s, bool failed_probe);
  // The measured points as a decision line lists them: `first`, then the
  // others from the most workers down ("6 workers: 7.9k samples/s, 2: 13.7k").
  std::string figures(int first) const;

  AutosizerConfig config_;
  Autosizer autosizer_;
  ScalingCurve curve_;
  bool judging_ = false;
  bool confirming_ = false;   // a re-probe that paid once, measured again
  Step step_;
  int last_workers_ = -1;
  QueueMetrics previous_;     // the window before this one
  int steady_windows_ = 0;    // windows since the count last changed
  int knee_ = -1;
  bool had_knee_ = false;     // grows one worker at a time since
  double backoff_s_ = 0;      // the current back-off; 0: none yet
  double reprobe_at_ = 0;
};

}  // namespace goldminer

#endif  // GOLDMINER_SCHED_SCALING_POLICY_H_
