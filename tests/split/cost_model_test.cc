// The pricing of a cut for its trainer (tw_lib/split/cost_model.h) and the
// candidate cuts (cut.h): no torch.
#include "tw_lib/split/cost_model.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "tw_lib/split/cut.h"

namespace goldminer::split {
namespace {

TEST(CostModelTest, FitsFixedAndPerSampleParts) {
  LinearCost c = fit_linear(64, 1.0 + 64 * 0.01, 128, 1.0 + 128 * 0.01);
  EXPECT_NEAR(c.fixed, 1.0, 1e-9);
  EXPECT_NEAR(c.per_sample, 0.01, 1e-12);
  EXPECT_NEAR(c.at(4096), 1.0 + 40.96, 1e-9) << "the example's overhead is not multiplied by the batch ratio";
}

TEST(CostModelTest, NoisyFitsNeverGoNegative) {
  LinearCost falls = fit_linear(64, 2.0, 128, 1.5);  // faster at the larger batch: noise
  EXPECT_DOUBLE_EQ(falls.fixed, 1.5);
  EXPECT_DOUBLE_EQ(falls.per_sample, 0);
  LinearCost steep = fit_linear(64, 0.1, 128, 1.0);  // more than proportional: through the origin
  EXPECT_DOUBLE_EQ(steep.fixed, 0);
  EXPECT_DOUBLE_EQ(steep.per_sample, 1.0 / 128);
  LinearCost one = fit_linear(64, 6.4, 64, 6.4);  // one batch size only: proportional
  EXPECT_DOUBLE_EQ(one.fixed, 0);
  EXPECT_DOUBLE_EQ(one.at(128), 12.8);
}

TEST(CostModelTest, CountsKernelsButNotViewsOrInterpreterNodes) {
  EXPECT_EQ(kernels_of("aten::one_hot"), 1);
  EXPECT_EQ(kernels_of("aten::bucketize"), 1);
  EXPECT_EQ(kernels_of("aten::view"), 0);
  EXPECT_EQ(kernels_of("aten::size"), 0);
  EXPECT_EQ(kernels_of("prim::ListConstruct"), 0);
}

TEST(CostModelTest, PricesNodesForTheTrainersDevice) {
  NodeFigures f;
  f.cpu_ms = {0.05, 0.001};
  f.bytes = {0, 1000};
  f.kernels = 2;
  Pricing cpu;
  cpu.device = TrainerDevice::kCpu;
  cpu.batch = 4096;
  EXPECT_NEAR(node_ms(f, cpu), 0.05 + 4.096, 1e-9);
  Pricing gpu = cpu;
  gpu.device = TrainerDevice::kCuda;
  // Two launches plus 4.096 MB over device memory.
  EXPECT_NEAR(node_ms(f, gpu), 2 * kDeviceModel.launch_us / 1e3 + 4.096e6 / (kDeviceModel.memory_gbps * 1e6), 1e-9);
  f.gpu_ms = {0.01, 0};
  f.gpu_measured = true;
  EXPECT_DOUBLE_EQ(node_ms(f, gpu), 0.01) << "a GPU measurement beats the model";
}

TEST(CostModelTest, PricesTransferOverTheLinkAndPcie) {
  Pricing p;
  p.link_gbps = 0.5;
  p.device = TrainerDevice::kCpu;
  TransferMs cpu = transfer_ms(1e6, p);
  EXPECT_DOUBLE_EQ(cpu.network, 2.0);
  EXPECT_DOUBLE_EQ(cpu.host_to_device, 0) << "a CPU trainer copies nothing to a device";
  p.device = TrainerDevice::kCuda;
  EXPECT_DOUBLE_EQ(transfer_ms(1e6, p).host_to_device, 1e6 / (kDeviceModel.pcie_pageable_gbps * 1e6));
  p.pinned = true;
  EXPECT_DOUBLE_EQ(transfer_ms(1e6, p).host_to_device, 1e6 / (kDeviceModel.pcie_pinned_gbps * 1e6));
  EXPECT_DOUBLE_EQ(transfer_ms(1e6, p).total(), 2.0 + 1e6 / (kDeviceModel.pcie_pinned_gbps * 1e6));
}

// A sysfs-like tree of interfaces: NAME -> (operstate, speed or "" for none).
class FakeSysfs {
 public:
  FakeSysfs() {
    char tmpl[] = "/tmp/gm-cost-sysfs.XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  ~FakeSysfs() { std::system(("rm -rf " + dir_).c_str()); }
  void add(const std::string& name, const std::string& state, const std::string& speed) {
    std::system(("mkdir -p " + dir_ + "/" + name).c_str());
    std::ofstream(dir_ + "/" + name + "/operstate") << state << "\n";
    if (!speed.empty()) std::ofstream(dir_ + "/" + name + "/speed") << speed << "\n";
  }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

TEST(CostModelTest, LinkIsTheFastestUpInterfaceSharedByTheGpus) {
  FakeSysfs sys;
  sys.add("lo", "unknown", "");
  sys.add("eth0", "up", "25000");
  sys.add("ib0", "down", "100000");  // down: not the trainer's link
  sys.add("veth1", "up", "-1");      // virtual: no speed
  Link link = detect_link(sys.dir(), "", 4);
  EXPECT_DOUBLE_EQ(link.gbps, 25000 / 8e3 / 4);
  EXPECT_NE(link.source.find("eth0 25000 Mb/s"), std::string::npos) << link.source;
  EXPECT_NE(link.source.find("/ 4 GPUs per node"), std::string::npos) << link.source;
  Link named = detect_link(sys.dir(), "eth0", 1);
  EXPECT_DOUBLE_EQ(named.gbps, 25000 / 8e3);
}

TEST(CostModelTest, LinkWithoutASpeedIsAssumedAndSaysSo) {
  FakeSysfs sys;
  sys.add("eth0", "up", "-1");
  Link link = detect_link(sys.dir(), "", 8);
  EXPECT_DOUBLE_EQ(link.gbps, 10e3 / 8e3 / 8);
  EXPECT_NE(link.source.find("10 Gb/s Ethernet assumed"), std::string::npos) << link.source;
  Link named = detect_link(sys.dir(), "ib7", 1);
  EXPECT_NE(named.source.find("ib7 reports no speed"), std::string::npos) << named.source;
}

TEST(CostModelTest, TrainerDeviceParses) {
  EXPECT_EQ(*parse_trainer_device("cuda"), TrainerDevice::kCuda);
  EXPECT_EQ(*parse_trainer_device("cpu"), TrainerDevice::kCpu);
  auto bad = parse_trainer_device("gpu");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'gpu'"), std::string::npos);
}

// input (1 ms to ship) -> a (0.1 ms; output 20 ms to ship) -> b (5 ms;
// output 0.5 ms to ship) -> trainer.
CutProblem chain() {
  CutProblem p;
  p.node_ms = {0.1, 5.0};
  CutProblem::Value in{-1, 1.0, {0}, false, 100};
  CutProblem::Value a{0, 20.0, {1}, false, 2000};
  CutProblem::Value b{1, 0.5, {}, true, 50};
  p.values = {in, a, b};
  return p;
}

TEST(CandidateCutsTest, CheapestFirstEachOnceDatasetAmongThem) {
  auto c = candidate_cuts(chain());
  ASSERT_GE(c.size(), 2u);
  EXPECT_EQ(c[0].name, "min-cost");
  EXPECT_EQ(c[0].choice.moved, (std::vector<bool>{true, true}));
  EXPECT_DOUBLE_EQ(c[0].choice.cost, 0.5);
  bool dataset = false;
  for (size_t i = 0; i < c.size(); ++i) {
    if (i > 0) {
      EXPECT_LE(c[i - 1].choice.cost, c[i].choice.cost);
    }
    for (size_t j = 0; j < i; ++j) EXPECT_NE(c[i].choice.moved, c[j].choice.moved) << "listed twice";
    if (c[i].name == "dataset") {
      dataset = true;
      EXPECT_EQ(c[i].choice.moved, (std::vector<bool>{false, false}));
      EXPECT_DOUBLE_EQ(c[i].choice.cost, 6.1);
    }
  }
  EXPECT_TRUE(dataset);
  EXPECT_DOUBLE_EQ(crossing_bytes(chain(), {true, true}), 50);
  EXPECT_DOUBLE_EQ(crossing_bytes(chain(), {false, false}), 100);
  EXPECT_DOUBLE_EQ(trainer_part(chain(), {true, false}), 5.0);
}

TEST(CandidateCutsTest, ACutMovingNothingIsDatasetMode) {
  CutProblem p = chain();
  p.values[1].cost = p.values[2].cost = 100;  // shipping anything but the input is dear
  p.node_ms = {0.01, 0.01};
  auto c = candidate_cuts(p);
  ASSERT_FALSE(c.empty());
  EXPECT_EQ(c[0].name, "dataset") << "the cheapest cut moves nothing";
  EXPECT_EQ(c[0].choice.moved, (std::vector<bool>{false, false}));
  int datasets = 0;
  for (const auto& x : c) datasets += x.name == "dataset";
  EXPECT_EQ(datasets, 1);
}

}  // namespace
}  // namespace goldminer::split
