// The cut choice alone (tw_lib/split/cut.h): no torch.
#include "tw_lib/split/cut.h"

#include <gtest/gtest.h>

#include <random>

namespace goldminer::split {
namespace {

// input -> a (one-hot: cheap, big output) -> trainer
// Shipping the input (8 bytes) and doing `a` on the trainer (1 ms) beats
// shipping a's output (20 ms), unless the trainer time of `a` dominates.
CutProblem one_hot_chain(double onehot_ms, double onehot_out_ms) {
  CutProblem p;
  p.node_ms = {onehot_ms};
  CutProblem::Value input;
  input.producer = -1;
  input.cost = 0.5;
  input.consumers = {0};
  CutProblem::Value out;
  out.producer = 0;
  out.cost = onehot_out_ms;
  out.trainer_reads = true;
  p.values = {input, out};
  return p;
}

TEST(CutTest, ShipsIndicesWhenOneHotIsCheaperOnTheTrainer) {
  CutChoice c = choose_min_cost_cut(one_hot_chain(1.0, 20.0));
  EXPECT_FALSE(c.moved[0]);
  EXPECT_DOUBLE_EQ(c.cost, 1.5);
}

TEST(CutTest, MovesWorkWhenItCostsMoreThanTheTransfer) {
  CutChoice c = choose_min_cost_cut(one_hot_chain(30.0, 20.0));
  EXPECT_TRUE(c.moved[0]);
  EXPECT_DOUBLE_EQ(c.cost, 20.0);
}

TEST(CutTest, MaxMovesEverythingThatCanCross) {
  CutChoice c = choose_max_cut(one_hot_chain(1.0, 20.0));
  EXPECT_TRUE(c.moved[0]);
  EXPECT_DOUBLE_EQ(c.cost, 20.0);
}

TEST(CutTest, ValueThatCannotCrossPullsItsProducerBack) {
  CutProblem p = one_hot_chain(30.0, 20.0);
  p.values[1].cost = kCannotCross;
  EXPECT_FALSE(choose_max_cut(p).moved[0]);
  EXPECT_FALSE(choose_min_cost_cut(p).moved[0]);
}

// input -> a -> b -> trainer; b needs a. A memory-order constraint c -> a.
TEST(CutTest, KeepsProducersAndMemoryOrder) {
  CutProblem p;
  p.node_ms = {0.1, 50.0, 0.1};
  CutProblem::Value in{-1, 10.0, {0, 2}, false};
  CutProblem::Value a_out{0, 10.0, {1}, false};
  CutProblem::Value b_out{1, 1.0, {}, true};
  CutProblem::Value c_out{2, 0.1, {}, true};
  p.values = {in, a_out, b_out, c_out};
  CutChoice c = choose_min_cost_cut(p);
  // b is worth moving; it needs a on the worker too.
  EXPECT_TRUE(c.moved[1]);
  EXPECT_TRUE(c.moved[0]);
  p.requires_moved = {{0, 2}};  // a may move only if c does
  c = choose_min_cost_cut(p);
  EXPECT_TRUE(c.moved[0] && c.moved[1] && c.moved[2]);
  EXPECT_DOUBLE_EQ(c.cost, cut_cost(p, c.moved));
}

// The flow solution equals exhaustive search on random small problems.
TEST(CutTest, MatchesExhaustiveSearch) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> ms(0.0, 10.0);
  for (int round = 0; round < 300; ++round) {
    const int n = 1 + static_cast<int>(rng() % 7);
    CutProblem p;
    for (int i = 0; i < n; ++i) p.node_ms.push_back(ms(rng));
    // One value per node and two inputs; consumers only later nodes (a DAG).
    for (int v = -2; v < n; ++v) {
      CutProblem::Value val;
      val.producer = v < 0 ? -1 : v;
      val.cost = rng() % 10 == 0 && v >= 0 ? kCannotCross : ms(rng);
      for (int c = std::max(v + 1, 0); c < n; ++c)
        if (rng() % 3 == 0) val.consumers.push_back(c);
      val.trainer_reads = rng() % 2 == 0;
      p.values.push_back(val);
    }
    if (n > 2 && rng() % 2) p.requires_moved.emplace_back(n - 1, 0);
    double best = kCannotCross;
    for (int mask = 0; mask < (1 << n); ++mask) {
      std::vector<bool> moved(n);
      for (int i = 0; i < n; ++i) moved[i] = (mask >> i) & 1;
      best = std::min(best, cut_cost(p, moved));
    }
    CutChoice c = choose_min_cost_cut(p);
    ASSERT_NEAR(c.cost, best, 1e-9) << "round " << round;
  }
}

}  // namespace
}  // namespace goldminer::split
