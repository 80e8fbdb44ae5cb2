#include "sched/worker_pool.h"

#include <gtest/gtest.h>

namespace goldminer {
namespace {

// As `scontrol --details --oneliner show node` prints them (22.05), trimmed.
const char* const kNodes =
    "NodeName=gpu1 Arch=x86_64 CoresPerSocket=1 CPUAlloc=4 CPUEfctv=16 CPUTot=16 CPULoad=0.10 "
    "Gres=gpu:a100:2(S:0),gpu:a100:2(S:1) GresDrain=N/A GresUsed=gpu:a100:2(IDX:0-1),gpu:a100:0(IDX:N/A) "
    "OS=Linux 6.1.0-26-amd64 #1 SMP Debian RealMemory=16000 Partitions=gpu,all,dw State=MIXED "
    "CfgTRES=cpu=16,mem=16000M,billing=16 AllocTRES=cpu=4\n"
    "NodeName=gpu2 CPUAlloc=0 CPUTot=16 Gres=gpu:4 GresUsed=gpu:0 Partitions=gpu,all,dw State=IDLE+DRAIN\n"
    "NodeName=cpu1 CPUAlloc=2 CPUTot=8 Gres=(null) GresUsed= Partitions=cpu,all,dw State=MIXED\n"
    "NodeName=cpu2 CPUAlloc=0 CPUTot=8 Partitions=cpu State=IDLE*\n"
    "NodeName=cpu3 CPUAlloc=0 CPUTot=8 Partitions=cpu State=IDLE\n";

TEST(WorkerPoolTest, CountsTheSpareCpusOfUsableNodesOfThePartition) {
  auto nodes = parse_node_list(kNodes, "dw");
  ASSERT_TRUE(nodes.ok()) << nodes.status().message();
  ASSERT_EQ(nodes->size(), 2u) << "gpu2 is drained, cpu2 not responding, cpu3 not in dw";
  EXPECT_EQ((*nodes)[0].name, "gpu1");
  EXPECT_EQ((*nodes)[0].resources.cpu_free, 12000);
  EXPECT_EQ((*nodes)[0].resources.gpu_free, 2000);
  EXPECT_EQ((*nodes)[1].resources.gpu_total, 0);
  PlacementConfig reserve;
  reserve.cpus_per_gpu = 2;
  // gpu1: 12 free - 2 GPUs x 2 = 8; cpu1: 6.
  EXPECT_DOUBLE_EQ(spare_worker_cpus(*nodes, reserve), 14);
  auto all = parse_node_list(kNodes, "");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 3u) << "every usable node";
}

TEST(WorkerPoolTest, ALineItCannotReadIsNamed) {
  EXPECT_EQ(parse_node_list("NodeName=a CPUTot=4\n", "").status().message(), "node list line 1: no CPUAlloc");
  EXPECT_EQ(parse_node_list("\nNodeName=a CPUTot=x CPUAlloc=0\n", "").status().message(),
            "node list line 2: bad CPUTot or CPUAlloc 'x', '0'");
  EXPECT_EQ(parse_node_list("NodeName=a CPUTot=4 CPUAlloc=0 Gres=gpu:many\n", "").status().message(),
            "node list line 1: bad GPU count 'gpu:many'");
}

}  // namespace
}  // namespace goldminer
