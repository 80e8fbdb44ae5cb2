// `goldminer-sim --gpus N`: a seeded sample of the node table holding about
// N GPUs, and the pod trace thinned in the same proportion.
//
// Method: GPU nodes are shuffled (Fisher-Yates over a mt19937_64 seeded
// with `seed`) and taken in that order until they hold at least N GPUs; the
// fraction f = sampled GPUs / all GPUs. CPU-only nodes are shuffled the same
// way and round(f x their count) are taken. Each pod is kept, in file order,
// when a uniform draw in [0, 1) is below f. The same seed gives the same
// sample on every machine.
#ifndef GOLDMINER_SIM_SAMPLING_H_
#define GOLDMINER_SIM_SAMPLING_H_

#include <cstdint>
#include <vector>

#include "sim/trace.h"

namespace goldminer::sim {

struct ClusterSample {
  std::vector<TraceNode> nodes;
  std::vector<TracePod> pods;
  double fraction = 1.0;  // sampled GPUs / all GPUs
};

ClusterSample sample_cluster(const std::vector<TracePod>& pods, const std::vector<TraceNode>& nodes,
                             int target_gpus, uint64_t seed);

}  // namespace goldminer::sim

#endif  // GOLDMINER_SIM_SAMPLING_H_
