#include "sim/speed_curve.h"

#include <algorithm>
#include <cmath>

namespace goldminer::sim {
namespace {

// A uniform in (0, 1] from 53 bits of `x`.
double unit(uint64_t x) { return (static_cast<double>(x >> 11) + 1.0) / 9007199254740992.0; }

// Box-Muller, written out: std::normal_distribution differs between
// standard libraries, and the figures must not.
double normal(uint64_t a, uint64_t b) { return std::sqrt(-2.0 * std::log(unit(a))) * std::cos(2.0 * M_PI * unit(b)); }

}  // namespace

Expected<SpeedCurveModel> parse_speed_curve(const std::string& name) {
  if (name == "linear") return SpeedCurveModel::kLinear;
  if (name == "concave") return SpeedCurveModel::kConcave;
  return Status::error("goldminer-sim: --speed-curve: invalid value '" + name + "': expected one of linear, concave");
}

const char* speed_curve_name(SpeedCurveModel model) {
  return model == SpeedCurveModel::kLinear ? "linear" : "concave";
}

double SpeedCurve::delivered(int k) const {
  const double x = k * gain_;
  if (linear()) return x;
  const double y = std::min(x, 2 * ceiling_);
  return y - y * y / (4 * ceiling_);
}

double SpeedCurve::speed(int k) const { return std::min(1.0, delivered(k)); }

int SpeedCurve::useful(int max_workers) const {
  int k = 0;
  while (k < max_workers && speed(k + 1) - speed(k) >= kNothingShare * gain_) ++k;
  return k;
}

int SpeedCurve::paying(int max_workers, double fraction) const {
  const double first = speed(1) - speed(0);
  int k = 0;
  while (k < max_workers && speed(k + 1) - speed(k) >= fraction * first - 1e-12) ++k;
  return k;
}

SpeedCurve draw_speed_curve(SpeedCurveModel model, const ConcaveCurves& curves, const TracePod& pod, double gain,
                            uint64_t seed) {
  if (model == SpeedCurveModel::kLinear) return SpeedCurve(gain, std::numeric_limits<double>::infinity());
  // FNV-1a of the name, then the seed, in a stream of its own (the demand
  // model draws from the same name and seed).
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : pod.name) h = (h ^ c) * 0x100000001b3ULL;
  SplitMix64 rng(h ^ splitmix64(seed ^ 0x5350454544435256ULL));  // "SPEEDCRV"
  const double kind = unit(rng.next()), u = unit(rng.next());
  if (kind <= curves.flat_after_two_share) return SpeedCurve(gain, std::max(gain, curves.limited_min));
  if (kind <= curves.flat_after_two_share + curves.limited_share)
    return SpeedCurve(gain, curves.limited_min + (curves.limited_max - curves.limited_min) * (1.0 - u));
  return SpeedCurve(gain, curves.full_min + (curves.full_max - curves.full_min) * (1.0 - u));
}

double measured(double rate, double noise, SplitMix64* stream) {
  if (noise <= 0) return rate;
  const uint64_t a = stream->next(), b = stream->next();
  return std::max(0.0, rate * (1.0 + noise * normal(a, b)));
}

}  // namespace goldminer::sim
