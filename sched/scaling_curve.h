// A job's measured scaling curve: for each data-worker count the job has
// run at, the steady samples/s its trainer took (the median of the last
// few observation windows at that count, with a noise band), from which
// the policies read the marginal gain of a worker instead of assuming it.
//
//   session window (workers, samples/s) --observe()--> per-count windows
//   ScalingPolicy (job level), SessionReport::curve --points()--> medians
//
// Windows right after the count changed are dropped (`settle_windows`):
// joining workers warm up and the queue refills, so they measure neither
// count. Windows older than `max_age_s` are forgotten: a trainer's step
// time and the cluster's load change, and an old figure would outvote a
// new one. Slurm-free; thread-compatible.
#ifndef GOLDMINER_SCHED_SCALING_CURVE_H_
#define GOLDMINER_SCHED_SCALING_CURVE_H_

#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gmcore/status.h"

namespace goldminer {

struct CurveConfig {
  int settle_windows = 1;     // windows dropped after the count changed
  int measure_windows = 3;    // settled windows before a count counts as measured
  int keep_windows = 12;      // the most recent windows kept per count
  // A window's relative noise (sd over its count's mean) is taken as at
  // least this, however quiet the windows were.
  double noise_floor = 0.01;
  double max_age_s = 300;     // windows older than this are forgotten
};

// One measured count.
struct CurvePoint {
  int workers = 0;
  double samples_per_s = 0;  // median of the kept windows
  double band = 0;           // two standard errors of the mean (relative_noise())
  int windows = 0;           // windows behind the median
  double mean = 0;           // of the kept windows
  double sd = 0;             // their sample standard deviation (0 for one window)
};

class ScalingCurve {
 public:
  explicit ScalingCurve(CurveConfig config = {});

  // One observation window ending at `now_s` with `workers` connected at its
  // end, in which the trainer took `samples_per_s`. `count_changed`: the
  // count changed during the window (it then measures neither count).
  void observe(int workers, double samples_per_s, double now_s, bool count_changed = false);

  // The measured point at `workers` (at least measure_windows fresh
  // windows), or nothing.
  std::optional<CurvePoint> point(int workers) const;
  // Every measured point, ascending by workers.
  std::vector<CurvePoint> points() const;
  // A window's relative noise, pooled over every count with two windows
  // or more: sqrt(sum (n-1)(sd/mean)^2 / sum (n-1)), at least noise_floor.
  // Pooled because a job's noise (its trainer's steps, the file system)
  // is much the same share at every count, and a count's own few windows
  // say little about their spread.
  double relative_noise() const;
  // The standard error of a point's mean: relative_noise() x mean / sqrt(n).
  double standard_error(const CurvePoint& p) const;
  // Settled windows at the current count since it last changed.
  int settled_windows() const { return settled_; }
  // Forgets every window at `workers` (a re-probe measures it afresh).
  void forget(int workers);

  const CurveConfig& config() const { return config_; }

 private:
  struct Window {
    double samples_per_s;
    double at_s;
  };
  void expire(double now_s);
  std::optional<CurvePoint> compute(int workers) const;
  CurveConfig config_;
  // point()'s answers since the windows last changed (the policies ask
  // for the same points many times a window).
  mutable std::map<int, std::optional<CurvePoint>> cache_;
  mutable double noise_cache_ = -1;  // relative_noise()'s, -1 when not known
  std::map<int, std::deque<Window>> windows_;
  int current_ = -1;  // the count of the last window
  int since_change_ = 0;  // windows at current_ since it changed
  int settled_ = 0;
  double now_s_ = 0;
};

// "W:S,W:S" (workers, samples/s rounded to a whole number), ascending;
// "" for none: what a SessionReport carries and goldminer-top shows.
std::string format_curve(const std::vector<CurvePoint>& points);
// The inverse, strict: counts ascending and distinct, rates finite and
// >= 0; an error names the bad entry. Bands and windows are not carried.
Expected<std::vector<CurvePoint>> parse_curve(const std::string& text);

// A figure as the decision lines print it: "13.7k", "940", "2.1M".
std::string short_rate(double samples_per_s);

}  // namespace goldminer

#endif  // GOLDMINER_SCHED_SCALING_CURVE_H_
