#include "sim/sampling.h"

#include <cmath>
#include <random>

#include "sim/random.h"

namespace goldminer::sim {
namespace {

// Fisher-Yates with an explicit draw: std::shuffle's order is not specified
// by the standard, and the sample must be the same everywhere.
template <typename T>
void shuffle(std::vector<T>* items, std::mt19937_64* rng) {
  for (size_t i = items->size(); i > 1; --i) {
    size_t j = static_cast<size_t>((*rng)() % i);
    std::swap((*items)[i - 1], (*items)[j]);
  }
}

}  // namespace

ClusterSample sample_cluster(const std::vector<TracePod>& pods, const std::vector<TraceNode>& nodes,
                             int target_gpus, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<TraceNode> gpu_nodes, cpu_nodes;
  int64_t all_gpus = 0;
  for (const auto& n : nodes) {
    (n.gpus > 0 ? gpu_nodes : cpu_nodes).push_back(n);
    all_gpus += n.gpus;
  }
  ClusterSample s;
  if (target_gpus <= 0 || target_gpus >= all_gpus) {
    s.nodes = nodes;
    s.pods = pods;
    return s;
  }
  shuffle(&gpu_nodes, &rng);
  int64_t taken = 0;
  for (const auto& n : gpu_nodes) {
    if (taken >= target_gpus) break;
    s.nodes.push_back(n);
    taken += n.gpus;
  }
  s.fraction = static_cast<double>(taken) / static_cast<double>(all_gpus);
  shuffle(&cpu_nodes, &rng);
  size_t cpu_count = static_cast<size_t>(std::llround(s.fraction * static_cast<double>(cpu_nodes.size())));
  s.nodes.insert(s.nodes.end(), cpu_nodes.begin(), cpu_nodes.begin() + cpu_count);
  for (const auto& p : pods)
    if (uniform01(rng) < s.fraction) s.pods.push_back(p);
  return s;
}

}  // namespace goldminer::sim
