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

// A claim valued by measured speeds (workers, speed), base 0.
DwClaim measured(std::vector<std::pair<int, double>> points, double gain, int max_workers = 16, int floor = 0) {
  DwClaim c = claim(1, gain, max_workers, floor);
  c.measured = std::move(points);
  return c;
}

TEST(DwAllocationTest, MeasuredSpeedsAreInterpolatedThenExtendedNoSteeperThanTheModel) {
  // Rising: 0.1 a worker to 6; above, the last segment's slope (0.1, below
  // the model's 0.25) to full speed at 10, capped by max_workers.
  DwClaim rising = measured({{2, 0.2}, {6, 0.6}}, 0.25);
  EXPECT_EQ(saturating_workers(rising), 10);
  EXPECT_NEAR(marginal_value(rising, 3) * 1000, 1 / 0.3 - 1 / 0.4, 1e-9) << "between measured points";
  EXPECT_NEAR(marginal_value(rising, 7) * 1000, 1 / 0.7 - 1 / 0.8, 1e-9) << "above them";
  EXPECT_EQ(saturating_workers(measured({{2, 0.2}, {6, 0.6}}, 0.05)), 14) << "the model's gain is the smaller slope";
  EXPECT_EQ(saturating_workers(measured({{2, 0.2}, {6, 0.6}}, 0.25, 8)), 8) << "max_workers";
  // Flat from 2 on: workers above 2 add nothing.
  DwClaim flat = measured({{2, 0.4}, {6, 0.4}}, 0.25);
  EXPECT_EQ(saturating_workers(flat), 2);
  EXPECT_EQ(marginal_value(flat, 2), 0);
  // Falling: the best measured count, and nothing above it.
  DwClaim falling = measured({{2, 0.5}, {6, 0.3}}, 0.25);
  EXPECT_EQ(saturating_workers(falling), 2);
  EXPECT_EQ(marginal_value(falling, 4), 0);
  // Speeds above 1 count as 1.
  EXPECT_EQ(saturating_workers(measured({{2, 0.5}, {4, 1.5}}, 0.25)), 4);
}

TEST(DwAllocationTest, TheCapIsAKneeNoWorkerAboveItIsGranted) {
  DwClaim rising = measured({{2, 0.2}, {6, 0.6}}, 0.25);
  rising.cap = 3;
  EXPECT_EQ(saturating_workers(rising), 3);
  EXPECT_EQ(marginal_value(rising, 3), 0);
  EXPECT_EQ(allocate_workers({rising}, 100000), (std::vector<int>{3}));
  rising.cap = 4;  // re-probing one above the knee
  EXPECT_EQ(allocate_workers({rising}, 100000), (std::vector<int>{4}));
  DwClaim model = claim(100, 0.1, 16);
  model.cap = 2;
  EXPECT_EQ(allocate_workers({model, claim(100, 0.1, 16)}, 8000), (std::vector<int>{2, 6}))
      << "a model claim's cap too";
}

// A probe above a knee comes from slack only. A job at its knee 3 probing
// 2 more (cap 5) on a steep measured curve, beside a model job that wants
// 8 workers: with 10 CPUs the model job gets its 7 left after the knee,
// the probe nothing (by value alone the probe's workers, extrapolated at
// 0.1 a worker, would win); with 13 the model job has its 8 and the
// probe the 2 left; with 12, one.
TEST(DwAllocationTest, AProbeAboveTheKneeTakesOnlySlackCpus) {
  DwClaim probing = measured({{1, 0.1}, {3, 0.3}}, 0.1, 16);
  probing.remaining_work = 1e6;  // long: its workers are worth much by value
  probing.cap = 5;
  probing.probe = 2;
  const DwClaim model = claim(100, 0.125, 16);
  EXPECT_EQ(allocate_workers({probing, model}, 10000), (std::vector<int>{3, 7}));
  EXPECT_EQ(allocate_workers({probing, model}, 13000), (std::vector<int>{5, 8}));
  EXPECT_EQ(allocate_workers({probing, model}, 12000), (std::vector<int>{4, 8}));
  probing.held = 5;  // the probe runs: its workers stay while it is judged
  EXPECT_EQ(allocate_workers({probing, model}, 10000), (std::vector<int>{5, 5}));
  probing.held = 0;
  probing.probe = 0;  // the same cap, not a probe: it competes by value
  EXPECT_EQ(allocate_workers({probing, model}, 10000)[0], 5);
}

// Scarce CPUs: after both floors, the flat job's second worker (2.5 s per
// unit of work) and the rising job's to its sixth (5, 1.67, 0.83, 0.5,
// 0.33) beat the flat job's third (1/0.4 - 1/0.405 = 0.03).
TEST(DwAllocationTest, ScarceCpusGoToTheJobWhoseMeasuredCurveRises) {
  DwClaim flat = measured({{2, 0.4}, {6, 0.42}}, 0.2, 16, 1);
  DwClaim rising = measured({{2, 0.2}, {6, 0.6}}, 0.2, 16, 1);
  EXPECT_EQ(allocate_workers({flat, rising}, 8000), (std::vector<int>{2, 6}));
  EXPECT_EQ(allocate_workers({rising, flat}, 8000), (std::vector<int>{6, 2})) << "whatever the order";
}

// A measured claim flat from 2 to 4 workers, then rising to full speed at
// 6, beside a model claim saturating at 4. Worker by worker, the flat
// stretch's first worker is worth nothing and the model claim takes the
// CPUs; by the curve's concave hull the stretch is worth 0.6 a worker up
// to 5 as a whole, more than the model claim's fourth worker (0.33).
TEST(DwAllocationTest, AFlatStretchBeforeARiseIsGrantedWhole) {
  std::vector<DwClaim> claims = {measured({{2, 0.3}, {4, 0.3}, {6, 1.0}}, 0.35, 6), claim(1, 0.25, 4)};
  std::vector<int> k = allocate_workers(claims, 8000);
  EXPECT_EQ(k, (std::vector<int>{5, 3}));
  auto time_of = [&](const std::vector<int>& counts) {
    double total = 0;
    for (size_t i = 0; i < claims.size(); ++i) {
      double t = 0;  // 1/s(k) from the marginal values: 1/s(k) = 1/s(k_max) + sum of the rest
      for (int w = counts[i]; w < saturating_workers(claims[i]); ++w) t += marginal_value(claims[i], w) * 1000;
      total += t;
    }
    return total;
  };
  EXPECT_LT(time_of(k), time_of({2, 4})) << "better than worker-by-worker";
  EXPECT_LE(time_of(k), time_of({6, 2}));
  EXPECT_LE(time_of(k), time_of({4, 4}));
}

TEST(DwAllocationTest, MeasuredClaimsNeverExceedCapacityOrCap) {
  std::mt19937 rng(11);
  for (int round = 0; round < 50; ++round) {
    std::vector<DwClaim> claims;
    int n = 2 + static_cast<int>(rng() % 6);
    for (int i = 0; i < n; ++i) {
      if (rng() % 3 == 0) {
        claims.push_back(claim(50 + rng() % 500, 0.05 + (rng() % 100) / 400.0, 12, 1));
        continue;
      }
      std::vector<std::pair<int, double>> points;
      for (int w = 1 + static_cast<int>(rng() % 2); w <= 12; w += 1 + static_cast<int>(rng() % 3))
        points.push_back({w, (rng() % 1000) / 800.0});
      DwClaim c = measured(points, 0.05 + (rng() % 100) / 400.0, 12, 1);
      c.remaining_work = 50 + rng() % 500;
      c.cap = static_cast<int>(rng() % 14) - 1;
      claims.push_back(c);
    }
    int64_t cap = 1000 * static_cast<int64_t>(rng() % (3 * n + 10));
    auto k = allocate_workers(claims, cap);
    EXPECT_LE(std::accumulate(k.begin(), k.end(), int64_t{0}) * 1000, cap) << "round " << round;
    for (size_t i = 0; i < k.size(); ++i) {
      EXPECT_LE(k[i], saturating_workers(claims[i])) << "round " << round << " claim " << i;
      if (claims[i].cap >= 0) {
        EXPECT_LE(k[i], claims[i].cap) << "round " << round << " claim " << i;
      }
    }
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
