// goldminer-sim's speed curves: how fast a GPU job runs with k data
// workers (1 = the speed its GPUs allow), what one window's measurement
// of it reads under noise, and which workers add nothing. Stated in
// goldminer-sim(1) and docs/SIMULATION.md.
//
// With g the speed one worker adds in the linear model (w CPUs x remote
// efficiency / P, P the CPUs of pre-processing the job needs) and
// x = k g:
// - kLinear (default): s(k) = min(1, x): linear to saturation, what the
//   goldminer policy's allocation assumes.
// - kConcave: the trainer takes in at most L (its receive path, NIC or
//   file system limit, in units of full speed) and the workers' delivery
//   rises with diminishing returns towards it:
//     d(k) = y - y^2 / (4 L),  y = min(x, 2 L);   s(k) = min(1, d(k))
//   Slope 1 at 0 (the first workers deliver what the model says), slope 0
//   at x = 2 L and flat beyond: the job's knee. L is drawn per job (from
//   its pod name and --seed, the same under every policy), an assumption:
//   - 20 % flat after 2 workers: L = g (d(1) = 0.75 g, d(k >= 2) = g),
//     but at least 0.25 (below);
//   - 30 % limited below their CPU demand: L uniform in [0.25, 1);
//   no job's limit is below a quarter of full speed (limited_min).
//   - 50 % reach full speed with diminishing returns: L uniform in [1, 4)
//     (s = 1 at x = 2 L (1 - sqrt(1 - 1/L)): 2 to 1.07 times the linear
//     model's workers).
//
// A job's k-th worker adds nothing when s(k) - s(k-1) < kNothingShare x g:
// less than a twentieth of what its CPUs add in the linear model (workers
// beyond saturation in the linear model, those past the knee in the
// concave one). s is concave, so those are the workers above useful().
#ifndef GOLDMINER_SIM_SPEED_CURVE_H_
#define GOLDMINER_SIM_SPEED_CURVE_H_

#include <cstdint>
#include <limits>
#include <string>

#include "gmcore/splitmix.h"
#include "gmcore/status.h"
#include "sim/trace.h"

namespace goldminer::sim {

enum class SpeedCurveModel { kLinear, kConcave };

Expected<SpeedCurveModel> parse_speed_curve(const std::string& name);
const char* speed_curve_name(SpeedCurveModel model);

constexpr double kNothingShare = 0.05;

// The concave curves' distribution of L (see above).
struct ConcaveCurves {
  double flat_after_two_share = 0.2;
  double limited_share = 0.3;
  double limited_min = 0.25, limited_max = 1.0;
  double full_min = 1.0, full_max = 4.0;
};

// One job's true speed curve.
class SpeedCurve {
 public:
  SpeedCurve() = default;
  // gain: g; ceiling: L (infinity: linear).
  SpeedCurve(double gain, double ceiling) : gain_(gain), ceiling_(ceiling) {}

  double gain() const { return gain_; }
  double ceiling() const { return ceiling_; }
  bool linear() const { return ceiling_ == std::numeric_limits<double>::infinity(); }
  // d(k): what k workers deliver into the trainer's queue, before the
  // trainer's own cap of 1.
  double delivered(int k) const;
  // s(k) = min(1, d(k)).
  double speed(int k) const;
  // Workers that each add at least kNothingShare x g (at most `max_workers`).
  int useful(int max_workers) const;
  // Workers that each add at least `fraction` of what the first adds,
  // s(1) (at most `max_workers`): those that pay by the shipped policy's
  // pay rule (its pay_fraction) on the true curve.
  int paying(int max_workers, double fraction) const;

 private:
  double gain_ = 0;
  double ceiling_ = std::numeric_limits<double>::infinity();
};

// The curve of a GPU job whose one worker adds `gain` in the linear model
// (deterministic in pod name and seed).
SpeedCurve draw_speed_curve(SpeedCurveModel model, const ConcaveCurves& curves, const TracePod& pod,
                            double gain, uint64_t seed);

// One window's measurement of a rate: rate x (1 + noise x Z), Z standard
// normal from `stream`, at least 0; `rate` itself when noise is 0 (no
// draw is taken).
double measured(double rate, double noise, SplitMix64* stream);

}  // namespace goldminer::sim

#endif  // GOLDMINER_SIM_SPEED_CURVE_H_
