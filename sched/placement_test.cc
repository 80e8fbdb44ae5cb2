#include "sched/placement.h"

#include <gtest/gtest.h>

namespace goldminer {
namespace {

NodeResources node(int64_t cpu_total, int64_t cpu_free, int64_t gpu_total, int64_t gpu_free) {
  return {cpu_total, cpu_free, gpu_total, gpu_free};
}

TEST(PlacementTest, ReserveIsFreeGpusTimesCpusPerGpu) {
  PlacementConfig c;
  c.cpus_per_gpu = 2.0;
  EXPECT_EQ(cpu_reserve(node(96000, 50000, 8000, 3000), c), 6000);
  EXPECT_EQ(spare_cpu(node(96000, 50000, 8000, 3000), c), 44000);
  EXPECT_EQ(spare_cpu(node(96000, 4000, 8000, 3000), c), 0) << "reserve larger than free CPUs";
  c.cpus_per_gpu = 1.5;
  EXPECT_EQ(cpu_reserve(node(16000, 16000, 1000, 500), c), 750) << "shared GPU fraction";
}

TEST(PlacementTest, StrandedCpusFirstThenCpuNodesThenGpuNodesWithFreeGpus) {
  PlacementConfig c;  // 1 CPU per free GPU
  std::vector<NodeResources> nodes = {
      node(96000, 90000, 8000, 8000),  // idle GPU node: rank 2, spare 82000
      node(32000, 4000, 0, 0),         // CPU node: rank 1, spare 4000
      node(96000, 3000, 8000, 0),      // all GPUs busy: rank 0, spare 3000
  };
  EXPECT_EQ(placement_rank(nodes[0]), 2);
  EXPECT_EQ(placement_rank(nodes[1]), 1);
  EXPECT_EQ(placement_rank(nodes[2]), 0);
  auto placed = place_workers(nodes, 10, 1000, c);
  std::vector<int> expected = {2, 2, 2, 1, 1, 1, 1, 0, 0, 0};
  EXPECT_EQ(placed, expected);
}

TEST(PlacementTest, NeverTouchesTheReserve) {
  PlacementConfig c;
  c.cpus_per_gpu = 4.0;
  // 2 free GPUs reserve 8 CPUs; 10 free: room for 2 workers of 1 CPU.
  std::vector<NodeResources> nodes = {node(16000, 10000, 4000, 2000)};
  EXPECT_EQ(place_workers(nodes, 5, 1000, c).size(), 2u);
  EXPECT_TRUE(place_workers(nodes, 5, 3000, c).empty()) << "a 3-CPU worker does not fit in 2";
}

TEST(PlacementTest, WithinARankMoreSpareFirst) {
  PlacementConfig c;
  std::vector<NodeResources> nodes = {node(32000, 2000, 0, 0), node(32000, 30000, 0, 0)};
  auto placed = place_workers(nodes, 3, 1000, c);
  EXPECT_EQ(placed, (std::vector<int>{1, 1, 1}));
}

TEST(PlacementTest, PreemptsLeastValuableWorkersUntilTheGpuJobFits) {
  NodeResources n = node(96000, 2000, 8000, 4000);
  std::vector<PlacedWorker> workers = {{1, 2000, 5.0}, {2, 2000, 0.5}, {3, 2000, 2.0}};
  auto victims = workers_to_preempt(n, 5000, workers);
  ASSERT_TRUE(victims.ok()) << victims.status().message();
  EXPECT_EQ(*victims, (std::vector<uint64_t>{2, 3})) << "deficit 3000: two workers";
  auto none = workers_to_preempt(n, 2000, workers);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  auto impossible = workers_to_preempt(n, 9000, workers);
  ASSERT_FALSE(impossible.ok());
  EXPECT_EQ(impossible.status().message(),
            "placement: need 9000 milli-CPU, node has 2000 free and data workers hold only 6000");
}

}  // namespace
}  // namespace goldminer
