// Tests of the Cachew-style baseline (sim/cachew.h), part of
// tests/sim_test, on exact and noisy synthetic curves.
#include "sim/cachew.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <functional>

#include "gmcore/splitmix.h"

namespace goldminer::sim {
namespace {

// Runs the scaler for `windows` windows on `curve` (samples/s by
// workers), each window's rate times (1 + noise x a uniform draw in
// [-1, 1]); the count it asks for is granted at once. Returns the count
// it ends at.
int run(CachewScaler* s, const std::function<double(int)>& curve, int windows, double noise = 0, uint64_t seed = 1) {
  SplitMix64 rng(seed);
  int workers = s->wanted();
  for (int w = 0; w < windows; ++w) {
    const double u = static_cast<double>(rng.next() >> 11) / 9007199254740992.0 * 2 - 1;
    workers = s->observe(workers, curve(workers) * (1 + noise * u));
  }
  return workers;
}

TEST(CachewTest, AddsWhileAWorkerPaysMoreThanSevenPercentThenSettles) {
  CachewConfig c;
  CachewScaler linear(c);
  // 1,000 samples/s per worker up to 8 workers, flat after.
  EXPECT_EQ(run(&linear, [](int k) { return 1000.0 * std::min(k, 8); }, 200), 8);
  EXPECT_TRUE(linear.settled());
  // Diminishing returns: the 5th worker adds 5 % (under 7 %), so the job
  // stops at 4; the 4th cost more than 3 % to remove.
  CachewScaler concave(c);
  const double rates[] = {0, 1000, 1500, 1800, 2000, 2100, 2150, 2180};
  EXPECT_EQ(run(&concave, [&](int k) { return rates[std::min(k, 7)]; }, 200), 4);
  // Flat after 2 (the trainer's limit): 2.
  CachewScaler flat(c);
  EXPECT_EQ(run(&flat, [](int k) { return 1000.0 * std::min(k, 2); }, 200), 2);
}

TEST(CachewTest, ScalesDownWhileARemovalCostsUnderThreePercent) {
  CachewConfig c;
  c.min_workers = 6;  // starts above where the curve is flat
  CachewScaler s(c);
  // 3 workers give all: 6 -> 7 does not pay; then down while free.
  const int end = run(&s, [](int k) { return 1000.0 * std::min(k, 3); }, 200);
  EXPECT_EQ(end, 6) << "the floor holds";
  c.min_workers = 1;
  CachewScaler from_one(c);
  EXPECT_EQ(run(&from_one, [](int k) { return k >= 3 ? 3000.0 : 1000.0 * k; }, 200), 3);
}

TEST(CachewTest, ReScalesOnASignalNotATimer) {
  CachewConfig c;
  CachewScaler s(c);
  int workers = run(&s, [](int k) { return 1000.0 * std::min(k, 4); }, 200);
  ASSERT_EQ(workers, 4);
  ASSERT_TRUE(s.settled());
  // Steady conditions: no re-scaling however long it runs.
  for (int w = 0; w < 1000; ++w) workers = s.observe(workers, 4000);
  EXPECT_EQ(s.signals(), 0);
  EXPECT_EQ(workers, 4);
  // The limit rises to 10 workers: the rate at 4 does not move (a limit
  // above says nothing at 4)... but a faster trainer does: each worker now
  // makes 1,300 samples/s (+30 %), a signal; it scales up again.
  workers = run(&s, [](int k) { return 1300.0 * std::min(k, 10); }, 400);
  EXPECT_EQ(s.signals(), 1);
  EXPECT_EQ(workers, 10);
}

// A job granted no worker (the CPUs are taken) judges nothing and keeps
// asking for its first; once granted, it scales as any other job.
TEST(CachewTest, AJobGrantedNoWorkerKeepsAsking) {
  CachewScaler s{CachewConfig()};
  for (int w = 0; w < 100; ++w) EXPECT_EQ(s.observe(0, 0), 1);
  EXPECT_FALSE(s.settled());
  EXPECT_EQ(run(&s, [](int k) { return 1000.0 * std::min(k, 3); }, 200), 3);
}

// With 5 % noise (uniform) and 3 windows a count, a job on a linear
// curve to 16 never gets there: a threshold of 7 % cannot see one
// worker's gain past about 14 (1/14 = 7 %), and the noise stops it
// earlier: the 20 seeds end at 8 to 14 workers, 13 of them at 12 or more
// (printed). Cachew's own limit at scale, which the shipped policy's pay
// rule (a worker against one worker's rate) does not have.
TEST(CachewTest, NoisyLinearCurvesStopShortOfSixteen) {
  CachewConfig c;
  int ends_at_or_above_12 = 0, ends_at_16 = 0;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    CachewScaler s(c);
    const int end = run(&s, [](int k) { return 1000.0 * std::min(k, 16); }, 600, 0.05, seed);
    ends_at_or_above_12 += end >= 12;
    ends_at_16 += end == 16;
    std::printf("%d ", end);
  }
  std::printf(": where 20 seeds ended\n");
  EXPECT_GE(ends_at_or_above_12, 10);
  EXPECT_EQ(ends_at_16, 0);
}

}  // namespace
}  // namespace goldminer::sim
