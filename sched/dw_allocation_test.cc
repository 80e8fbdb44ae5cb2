#include "sched/dw_allocation.h"

#include <gtest/gtest.h>

#include <numeric>
#include <random>

namespace goldminer {
namespace {

DwClaim claim(double remaining, double gain, int max_workers = 100, int floor = 0) {
  DwClaim c;
  c.remaining_work = remaining;
  c.base_speed = 0;
  c.gain_per_worker = gain;
  c.cpu_per_worker = 1000;
  c.min_workers = floor;
  c.max_workers = max_workers;
  return c;
}

double total_remaining_time(const std::vector<DwClaim>& claims, const std::vector<int>& k) {
  double sum = 0;
  for (size_t i = 0; i < claims.size(); ++i) {
    double s = std::min(1.0, claims[i].base_speed + k[i] * claims[i].gain_per_worker);
    sum += s > 0 ? claims[i].remaining_work / s : 1e18;
  }
  return sum;
}

TEST(DwAllocationTest, SaturatingWorkers) {
  EXPECT_EQ(saturating_workers(claim(100, 0.25)), 4);
  EXPECT_EQ(saturating_workers(claim(100, 0.3)), 4) << "3 give 0.9, the 4th reaches 1";
  EXPECT_EQ(saturating_workers(claim(100, 0.25, 2)), 2) << "capped by max_workers";
  EXPECT_EQ(saturating_workers(claim(0, 0.25)), 0) << "nothing left to do";
}

TEST(DwAllocationTest, EnoughCapacityGivesEveryJobFullSpeed) {
  std::vector<DwClaim> claims = {claim(100, 0.5), claim(1000, 0.1)};
  EXPECT_EQ(allocate_workers(claims, 100000), (std::vector<int>{2, 10}));
}

TEST(DwAllocationTest, FloorsComeFirst) {
  std::vector<DwClaim> claims = {claim(10, 0.1, 100, 1), claim(10000, 0.1, 100, 1),
                                 claim(50, 0.1, 100, 1)};
  auto k = allocate_workers(claims, 3000);
  EXPECT_EQ(k, (std::vector<int>{1, 1, 1}));
}

TEST(DwAllocationTest, ScarceCpusGoWhereTheySaveMostTime) {
  // Both jobs at 1 worker; a second worker saves R/0.1 - R/0.2 = 5R.
  std::vector<DwClaim> claims = {claim(10, 0.1, 100, 1), claim(1000, 0.1, 100, 1)};
  auto k = allocate_workers(claims, 6000);
  EXPECT_EQ(k[0] + k[1], 6);
  EXPECT_GT(k[1], k[0]) << "the job with more remaining work gains more per CPU";
}

TEST(DwAllocationTest, NeverExceedsCapacity) {
  std::vector<DwClaim> claims;
  for (int i = 0; i < 50; ++i) claims.push_back(claim(100 + 37 * i, 0.05 + 0.01 * (i % 7), 30, 1));
  for (int64_t cap : {0, 1000, 17000, 123000, 10000000}) {
    auto k = allocate_workers(claims, cap);
    int64_t used = std::accumulate(k.begin(), k.end(), int64_t{0}) * 1000;
    EXPECT_LE(used, cap);
    for (size_t i = 0; i < k.size(); ++i) EXPECT_LE(k[i], saturating_workers(claims[i]));
  }
}

// Water-filling is optimal for this separable convex objective: compare with
// exhaustive greedy one worker at a time (exact marginal values).
TEST(DwAllocationTest, MatchesExactGreedyOnRandomClaims) {
  std::mt19937 rng(7);
  for (int round = 0; round < 20; ++round) {
    std::vector<DwClaim> claims;
    int n = 2 + static_cast<int>(rng() % 8);
    for (int i = 0; i < n; ++i) {
      double gain = 0.05 + (rng() % 100) / 400.0;
      claims.push_back(claim(50 + rng() % 5000, gain, 40, 1));
    }
    int64_t cap = 1000 * static_cast<int64_t>(n + rng() % 30);
    auto fast = allocate_workers(claims, cap);

    std::vector<int> greedy(n, 0);
    int64_t left = cap;
    for (int i = 0; i < n && left >= 1000; ++i) {
      greedy[i] = std::min(1, saturating_workers(claims[i]));
      left -= 1000 * greedy[i];
    }
    while (left >= 1000) {
      int best = -1;
      double best_v = 0;
      for (int i = 0; i < n; ++i) {
        double v = marginal_value(claims[i], greedy[i]);
        if (v > best_v) best_v = v, best = i;
      }
      if (best < 0) break;
      ++greedy[best];
      left -= 1000;
    }
    EXPECT_NEAR(total_remaining_time(claims, fast), total_remaining_time(claims, greedy),
                1e-6 * total_remaining_time(claims, greedy))
        << "round " << round;
  }
}

}  // namespace
}  // namespace goldminer
