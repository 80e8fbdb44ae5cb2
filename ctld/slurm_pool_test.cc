#include "ctld/slurm_pool.h"

#include <gtest/gtest.h>

#include <utility>

#include "launch/slurm_test_util.h"

namespace goldminer {
namespace {


TEST(SlurmPoolTest, ThePoolIsTheUsableNodesOfThePartition) {
  auto nodes = parse_node_lines(testing::kSampleNodeLines);
  ASSERT_TRUE(nodes.ok()) << nodes.status().message();
  std::vector<PoolNode> pool = pool_nodes(*nodes, "dw");
  ASSERT_EQ(pool.size(), 2u) << "gpu2 is drained, cpu2 not responding, cpu3 not in dw";
  EXPECT_EQ(pool[0].name, "gpu1");
  EXPECT_EQ(pool[0].resources.cpu_free, 12000);
  EXPECT_EQ(pool[0].resources.gpu_free, 2000);
  EXPECT_EQ(pool[1].resources.gpu_total, 0);
  PlacementConfig reserve;
  reserve.cpus_per_gpu = 2;
  // gpu1: 12 free - 2 GPUs x 2 = 8; cpu1: 6.
  EXPECT_DOUBLE_EQ(spare_worker_cpus(pool, reserve), 14);
  EXPECT_EQ(pool_nodes(*nodes, "").size(), 3u) << "every usable node";
}

// The companion jobs by job and uid (pending or running), the running
// ones' CPUs; names that are not goldminer-dw.J exactly (with spaces, a
// suffix, no number) are skipped.
TEST(SlurmPoolTest, CompanionJobsAndTheirCpusByJobAndUid) {
  auto queue = parse_queued_jobs(
      "0 4 RUNNING goldminer-dw.10\n0 4 RUNNING goldminer-dw.10\n1001 8 RUNNING goldminer-dw.10\n"
      "1000 2 RUNNING train.py\n1001 99 RUNNING goldminer-dw.11 0 999\n1001 99 RUNNING goldminer-dw.11x\n"
      "1001 99 RUNNING goldminer-dw.\n1000 16 RUNNING goldminer-dw.12\n1000 4 PENDING goldminer-dw.15\n"
      "1000 4 PENDING goldminer-dw.0\n1000 4 PENDING goldminer-dw.99999999999\n\n");
  ASSERT_TRUE(queue.ok()) << queue.status().message();
  SlurmCpus found;
  add_companions(*queue, &found);
  EXPECT_EQ(found.workers, (SlurmCpus::Held{{10, {{0, 8}, {1001, 8}}}, {12, {{1000, 16}}}}));
  EXPECT_EQ(found.companions, (std::set<std::pair<uint32_t, uid_t>>{{10, 0}, {10, 1001}, {12, 1000}, {15, 1000}}));
}

// A fake scontrol and squeue: each answers its output, or fails.
struct FakeSlurm {
  std::string nodes = testing::kSampleNodeLines, queue = "1000 3 RUNNING goldminer-dw.10\n";
  int scontrol_exit = 0, squeue_exit = 0;
  std::vector<std::string> calls;
  SlurmCommand command() {
    return testing::recording_command(&calls, [this](const std::string& name) -> Expected<CommandResult> {
      CommandResult r;
      const bool scontrol = name == "scontrol";
      r.exit_code = scontrol ? scontrol_exit : squeue_exit;
      r.output = r.exit_code != 0 ? "error: Unable to contact slurm controller (connect failure)\n"
                                  : (scontrol ? nodes : queue);
      return r;
    });
  }
};

TEST(SlurmPoolTest, ARefreshAsksScontrolThenSqueue) {
  FakeSlurm slurm;
  PlacementConfig reserve;
  reserve.cpus_per_gpu = 2;
  auto found = read_slurm_cpus(slurm.command(), "dw", reserve);
  ASSERT_TRUE(found.ok()) << found.status().message();
  EXPECT_EQ(slurm.calls, (std::vector<std::string>{"scontrol --details --oneliner show node",
                                                   "squeue --noheader --states=PENDING,RUNNING --format=%U %C %T %j"}));
  EXPECT_DOUBLE_EQ(found->spare, 14);
  EXPECT_EQ(found->workers, (SlurmCpus::Held{{10, {{1000, 3}}}}));

  FakeSlurm down;
  down.scontrol_exit = 1;
  EXPECT_EQ(read_slurm_cpus(down.command(), "dw", reserve).status().message(),
            "scontrol show node: exit 1: error: Unable to contact slurm controller (connect failure)");
  EXPECT_EQ(down.calls.size(), 1u) << "no squeue after scontrol failed";
  FakeSlurm no_queue;
  no_queue.squeue_exit = 1;
  EXPECT_EQ(read_slurm_cpus(no_queue.command(), "dw", reserve).status().message(),
            "squeue: exit 1: error: Unable to contact slurm controller (connect failure)");
  FakeSlurm garbage;
  garbage.queue = "garbage\n";
  EXPECT_EQ(read_slurm_cpus(garbage.command(), "dw", reserve).status().message(),
            "squeue: cannot read the line 'garbage' (expected UID CPUS STATE NAME)");
}

}  // namespace
}  // namespace goldminer
