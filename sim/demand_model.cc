#include "sim/demand_model.h"

#include <algorithm>
#include <cmath>

#include "gmcore/splitmix.h"

namespace goldminer::sim {
namespace {

// A uniform in (0, 1] from 53 bits of `x`.
double unit(uint64_t x) { return (static_cast<double>(x >> 11) + 1.0) / 9007199254740992.0; }

}  // namespace

Expected<DemandModel> parse_demand_model(const std::string& name) {
  if (name == "calibrated") return DemandModel::kCalibrated;
  if (name == "request") return DemandModel::kRequest;
  return Status::error("goldminer-sim: --demand-model: invalid value '" + name +
                       "': expected one of calibrated, request");
}

const char* demand_model_name(DemandModel model) {
  return model == DemandModel::kCalibrated ? "calibrated" : "request";
}

double calibrated_cpus_per_gpu(const TracePod& pod, const CalibratedDemand& demand, uint64_t seed) {
  // FNV-1a of the name, then the seed: the same pod draws the same demand
  // under every policy, and its --load copies too (the same model).
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : pod.name) h = (h ^ c) * 0x100000001b3ULL;
  const uint64_t a = splitmix64(h ^ splitmix64(seed)), b = splitmix64(a);
  // Box-Muller, written out: std::normal_distribution differs between
  // standard libraries, and the figures must not.
  const double z = std::sqrt(-2.0 * std::log(unit(a))) * std::cos(2.0 * M_PI * unit(b));
  return std::min(demand.max_cpus_per_gpu, demand.median_cpus_per_gpu * std::exp(demand.sigma * z));
}

}  // namespace goldminer::sim
