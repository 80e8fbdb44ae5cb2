#include "sched/select_policy.h"

#include <gtest/gtest.h>

#include <vector>

namespace goldminer {
namespace {

NodeUsage node(uint32_t cores_free, uint32_t gpus_total, uint32_t gpus_free, uint32_t cores_total = 8) {
  NodeUsage n;
  n.cores_total = cores_total;
  n.cores_free = cores_free;
  n.gpus_total = gpus_total;
  n.gpus_free = gpus_free;
  return n;
}

TEST(SelectPolicyTest, CpuJobKeepsOutOfTheReserveNextToFreeGpus) {
  SelectConfig config;  // 1 CPU per free GPU
  // g1: 4 free GPUs, 8 free cores -> 4 hidden; g2: GPUs busy -> all usable;
  // g3: 3 free GPUs, 3 free cores -> dropped; c1: CPU-only.
  std::vector<NodeUsage> nodes = {node(8, 4, 4), node(6, 4, 0), node(3, 4, 3), node(8, 0, 0)};
  JobTestPlan plan = plan_job_test(config, JobKind::kCpu, TestMode::kRunNow, nodes);
  ASSERT_EQ(plan.nodes.size(), 4u);
  EXPECT_TRUE(plan.nodes[0].usable);
  EXPECT_EQ(plan.nodes[0].hidden_cores, 4u);
  EXPECT_TRUE(plan.nodes[1].usable);
  EXPECT_EQ(plan.nodes[1].hidden_cores, 0u);
  EXPECT_FALSE(plan.nodes[2].usable);
  EXPECT_EQ(plan.nodes[3].hidden_cores, 0u);
  EXPECT_TRUE(plan.narrows);
  EXPECT_EQ(plan.nodes_dropped, 1u);
  EXPECT_EQ(plan.cores_hidden, 4u);
  EXPECT_EQ(plan.tiers, 1);
}

TEST(SelectPolicyTest, GpuJobsTestOnlyAndNoReserveChangeNothing) {
  std::vector<NodeUsage> nodes = {node(8, 4, 4), node(2, 4, 4)};
  for (JobKind kind : {JobKind::kGpu, JobKind::kCpu}) {
    for (TestMode mode : {TestMode::kRunNow, TestMode::kTestOnly, TestMode::kWillRun}) {
      SelectConfig config;
      if (kind == JobKind::kCpu && mode != TestMode::kTestOnly) config.reserve_cpus_per_gpu = 0;
      JobTestPlan plan = plan_job_test(config, kind, mode, nodes);
      EXPECT_FALSE(plan.narrows);
      for (const NodePlan& p : plan.nodes) {
        EXPECT_TRUE(p.usable);
        EXPECT_EQ(p.hidden_cores, 0u);
      }
    }
  }
}

// Injects nodes whose cores are all or mostly busy now (g1, g2 next to
// free GPUs, g3 with its GPUs busy, c1 CPU-only) into a large CPU job's
// will-run call; checks that every node stays a candidate (run-now drops
// g1 and g2 by today's free cores) and that the reserve of each GPU node's
// configured GPUs is still held, busy cores included.
TEST(SelectPolicyTest, WillRunSeesNodesBusyNowAndStillHoldsTheReserve) {
  SelectConfig config;  // 1 CPU per GPU
  std::vector<NodeUsage> nodes = {node(0, 4, 4), node(3, 4, 4), node(0, 4, 0), node(0, 0, 0)};
  JobTestPlan now = plan_job_test(config, JobKind::kCpu, TestMode::kRunNow, nodes);
  EXPECT_FALSE(now.nodes[0].usable);
  EXPECT_FALSE(now.nodes[1].usable);
  EXPECT_EQ(now.nodes_dropped, 2u);

  JobTestPlan later = plan_job_test(config, JobKind::kCpu, TestMode::kWillRun, nodes);
  EXPECT_EQ(later.nodes_dropped, 0u);
  for (size_t i = 0; i < nodes.size(); ++i) EXPECT_TRUE(later.nodes[i].usable) << "node " << i;
  // g1, g2, g3: 4 GPUs x 1 CPU held whether their cores are busy now or not
  // (g3's GPUs may free up before the planned start).
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(later.nodes[i].hidden_cores, 4u) << "node " << i;
    EXPECT_TRUE(later.nodes[i].hide_allocated) << "node " << i;
  }
  EXPECT_EQ(later.nodes[3].hidden_cores, 0u);
  EXPECT_FALSE(later.nodes[3].hide_allocated);
  EXPECT_EQ(later.cores_hidden, 12u);
  EXPECT_TRUE(later.narrows);
  EXPECT_EQ(later.tiers, 1);
  // A data worker's will-run is held the same way.
  JobTestPlan worker = plan_job_test(config, JobKind::kDataWorker, TestMode::kWillRun, nodes);
  EXPECT_EQ(worker.nodes_dropped, 0u);
  EXPECT_EQ(worker.cores_hidden, 12u);
}

// A node whose configured cores are all reserve can never host a CPU job:
// will-run drops it whatever is free now; one core more keeps it.
TEST(SelectPolicyTest, WillRunDropsOnlyNodesThatAreAllReserve) {
  SelectConfig config;
  config.reserve_cpus_per_gpu = 2;
  std::vector<NodeUsage> nodes = {node(8, 4, 4, 8), node(0, 4, 0, 9)};
  JobTestPlan plan = plan_job_test(config, JobKind::kCpu, TestMode::kWillRun, nodes);
  EXPECT_FALSE(plan.nodes[0].usable);  // 4 GPUs x 2 = all 8 cores
  EXPECT_TRUE(plan.nodes[1].usable);
  EXPECT_EQ(plan.nodes[1].hidden_cores, 8u);
  EXPECT_EQ(plan.nodes_dropped, 1u);
}

TEST(SelectPolicyTest, ReserveCountsCpusNotCoresAndRoundsUp) {
  SelectConfig config;
  config.reserve_cpus_per_gpu = 1.5;
  NodeUsage smt = node(16, 8, 3);
  smt.cpus_per_core = 2;  // 3 GPUs x 1.5 = 4.5 CPUs -> 3 cores of 2 threads
  EXPECT_EQ(reserve_cores(smt, config), 3u);
  smt.cpus_per_core = 1;
  EXPECT_EQ(reserve_cores(smt, config), 5u);
  config.reserve_cpus_per_gpu = 0;
  EXPECT_EQ(reserve_cores(smt, config), 0u);
}

TEST(SelectPolicyTest, DataWorkersAreTieredStrandedCpusFirst) {
  SelectConfig config;
  // g1: free GPUs (tier 2), g2: GPUs all busy (tier 0), c1: CPU-only (tier 1).
  std::vector<NodeUsage> nodes = {node(8, 4, 4), node(4, 4, 0), node(8, 0, 0)};
  JobTestPlan plan = plan_job_test(config, JobKind::kDataWorker, TestMode::kRunNow, nodes);
  EXPECT_EQ(plan.tiers, 3);
  EXPECT_EQ(plan.nodes[0].tier, 2);
  EXPECT_EQ(plan.nodes[1].tier, 0);
  EXPECT_EQ(plan.nodes[2].tier, 1);
  EXPECT_EQ(plan.nodes[0].hidden_cores, 4u);  // still outside the reserve
  EXPECT_TRUE(plan.narrows);
  // Will-run calls answer "when", not "where first": no tiers.
  JobTestPlan later = plan_job_test(config, JobKind::kDataWorker, TestMode::kWillRun, nodes);
  EXPECT_EQ(later.tiers, 1);
  // Only CPU-only nodes and no reserve: the call is cons_tres's own.
  JobTestPlan plain = plan_job_test(config, JobKind::kDataWorker, TestMode::kRunNow, {node(8, 0, 0), node(8, 0, 0)});
  EXPECT_EQ(plain.tiers, 2);
  EXPECT_FALSE(plain.narrows);
}

TEST(SelectPolicyTest, TresStringsThatAskForGpus) {
  EXPECT_TRUE(tres_requests_gpu("gres:gpu:2"));
  EXPECT_TRUE(tres_requests_gpu("gres/gpu:1"));
  EXPECT_TRUE(tres_requests_gpu("gres:gpu:a100:1"));
  EXPECT_TRUE(tres_requests_gpu("gres:shard:1,gres:gpu:1"));
  EXPECT_TRUE(tres_requests_gpu("gpu:4"));
  EXPECT_TRUE(tres_requests_gpu("gres:gpu"));
  EXPECT_FALSE(tres_requests_gpu("gres:gpu:0"));
  EXPECT_FALSE(tres_requests_gpu("gres:shard:2"));
  EXPECT_FALSE(tres_requests_gpu("gres:gpufoo:2"));
  EXPECT_FALSE(tres_requests_gpu(""));
  EXPECT_FALSE(tres_requests_gpu(nullptr));
}

}  // namespace
}  // namespace goldminer
