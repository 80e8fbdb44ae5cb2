#include "sched/placement.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace goldminer {

int64_t cpu_reserve(const NodeResources& node, const PlacementConfig& config) {
  return static_cast<int64_t>(std::ceil(static_cast<double>(node.gpu_free) * config.cpus_per_gpu));
}

int64_t spare_cpu(const NodeResources& node, const PlacementConfig& config) {
  return std::max<int64_t>(0, node.cpu_free - cpu_reserve(node, config));
}

int placement_rank(const NodeResources& node) {
  if (node.gpu_total == 0) return 1;
  return node.gpu_free == 0 ? 0 : 2;
}

std::vector<int> place_workers(const std::vector<NodeResources>& nodes, int count,
                               int64_t cpu_per_worker, const PlacementConfig& config) {
  std::vector<int> placed;
  if (count <= 0 || cpu_per_worker <= 0) return placed;
  struct Candidate {
    int rank;
    int64_t spare;
    int index;
  };
  // "a before b" in placement order, as a heap's "less" (the heap's top is
  // the node to fill next). A heap, not a sort: one job's workers need a
  // few nodes out of thousands.
  auto later = [](const Candidate& a, const Candidate& b) {
    if (a.rank != b.rank) return a.rank > b.rank;
    if (a.spare != b.spare) return a.spare < b.spare;
    return a.index > b.index;
  };
  std::vector<Candidate> candidates;
  for (int i = 0; i < static_cast<int>(nodes.size()); ++i) {
    int64_t spare = spare_cpu(nodes[i], config);
    if (spare >= cpu_per_worker) candidates.push_back({placement_rank(nodes[i]), spare, i});
  }
  std::make_heap(candidates.begin(), candidates.end(), later);
  while (!candidates.empty() && static_cast<int>(placed.size()) < count) {
    std::pop_heap(candidates.begin(), candidates.end(), later);
    const Candidate& c = candidates.back();
    int fits = static_cast<int>(std::min<int64_t>(c.spare / cpu_per_worker, count - placed.size()));
    placed.insert(placed.end(), fits, c.index);
    candidates.pop_back();
  }
  return placed;
}

Expected<std::vector<uint64_t>> workers_to_preempt(const NodeResources& node, int64_t cpu_needed,
                                                   std::vector<PlacedWorker> workers) {
  std::vector<uint64_t> victims;
  int64_t deficit = cpu_needed - node.cpu_free;
  if (deficit <= 0) return victims;
  int64_t held = std::accumulate(workers.begin(), workers.end(), int64_t{0},
                                 [](int64_t s, const PlacedWorker& w) { return s + w.cpu; });
  if (held < deficit)
    return Status::error("placement: need " + std::to_string(cpu_needed) + " milli-CPU, node has " +
                         std::to_string(node.cpu_free) + " free and data workers hold only " +
                         std::to_string(held));
  std::stable_sort(workers.begin(), workers.end(), [](const PlacedWorker& a, const PlacedWorker& b) {
    return a.marginal_gain < b.marginal_gain;
  });
  for (const PlacedWorker& w : workers) {
    if (deficit <= 0) break;
    victims.push_back(w.worker_id);
    deficit -= w.cpu;
  }
  return victims;
}

}  // namespace goldminer
