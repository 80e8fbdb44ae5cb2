#include "sim/sampling.h"

#include <gtest/gtest.h>

namespace goldminer::sim {
namespace {

std::vector<TraceNode> cluster() {
  std::vector<TraceNode> nodes;
  for (int i = 0; i < 40; ++i) nodes.push_back({"g" + std::to_string(i), 96000, 1, 8, "x"});
  for (int i = 0; i < 20; ++i) nodes.push_back({"c" + std::to_string(i), 32000, 1, 0, ""});
  return nodes;
}

std::vector<TracePod> pods(int n) {
  std::vector<TracePod> out(n);
  for (int i = 0; i < n; ++i) out[i].name = "p" + std::to_string(i);
  return out;
}

TEST(SamplingTest, TakesAboutTheGpusAskedAndThinsInProportion) {
  auto s = sample_cluster(pods(10000), cluster(), 64, 1);
  int gpus = 0, cpu_nodes = 0;
  for (const auto& n : s.nodes) {
    gpus += n.gpus;
    cpu_nodes += n.gpus == 0;
  }
  EXPECT_EQ(gpus, 64);
  EXPECT_DOUBLE_EQ(s.fraction, 0.2);
  EXPECT_EQ(cpu_nodes, 4);
  EXPECT_NEAR(static_cast<double>(s.pods.size()), 2000, 150);
}

TEST(SamplingTest, SameSeedSameSampleOtherSeedOther) {
  auto a = sample_cluster(pods(500), cluster(), 64, 42);
  auto b = sample_cluster(pods(500), cluster(), 64, 42);
  auto c = sample_cluster(pods(500), cluster(), 64, 43);
  ASSERT_EQ(a.nodes.size(), b.nodes.size());
  for (size_t i = 0; i < a.nodes.size(); ++i) EXPECT_EQ(a.nodes[i].name, b.nodes[i].name);
  ASSERT_EQ(a.pods.size(), b.pods.size());
  bool differs = a.pods.size() != c.pods.size();
  for (size_t i = 0; !differs && i < a.nodes.size(); ++i) differs = a.nodes[i].name != c.nodes[i].name;
  EXPECT_TRUE(differs);
}

TEST(SamplingTest, FullScaleWithoutTarget) {
  auto s = sample_cluster(pods(10), cluster(), 0, 1);
  EXPECT_EQ(s.nodes.size(), 60u);
  EXPECT_EQ(s.pods.size(), 10u);
  EXPECT_DOUBLE_EQ(s.fraction, 1.0);
}

}  // namespace
}  // namespace goldminer::sim
