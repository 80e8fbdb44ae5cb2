#include "sched/worker_pool.h"

#include <gtest/gtest.h>

namespace goldminer {
namespace {

PoolNode node(const char* name, int64_t cpus, int64_t allocated, int64_t gpus, int64_t gpus_used) {
  PoolNode n;
  n.name = name;
  n.resources.cpu_total = cpus * 1000;
  n.resources.cpu_free = (cpus - allocated) * 1000;
  n.resources.gpu_total = gpus * 1000;
  n.resources.gpu_free = (gpus - gpus_used) * 1000;
  return n;
}

// Which nodes count (usable, of the partition) is ctld/slurm_pool_test.cc's.
TEST(WorkerPoolTest, CountsTheSpareCpusBeyondTheReserveNextToFreeGpus) {
  const std::vector<PoolNode> nodes = {node("gpu1", 16, 4, 4, 2), node("cpu1", 8, 2, 0, 0)};
  PlacementConfig reserve;
  reserve.cpus_per_gpu = 2;
  // gpu1: 12 free - 2 GPUs x 2 = 8; cpu1: 6.
  EXPECT_DOUBLE_EQ(spare_worker_cpus(nodes, reserve), 14);
  reserve.cpus_per_gpu = 0;
  EXPECT_DOUBLE_EQ(spare_worker_cpus(nodes, reserve), 18);
  EXPECT_DOUBLE_EQ(spare_worker_cpus({}, reserve), 0);
}

}  // namespace
}  // namespace goldminer
