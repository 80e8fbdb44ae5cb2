#include "sim/speed_curve.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace goldminer::sim {
namespace {

TracePod named(const std::string& name) {
  TracePod p;
  p.name = name;
  return p;
}

TEST(SpeedCurveTest, LinearRisesToSaturation) {
  SpeedCurve c(0.3, std::numeric_limits<double>::infinity());
  EXPECT_TRUE(c.linear());
  EXPECT_DOUBLE_EQ(c.speed(0), 0);
  EXPECT_DOUBLE_EQ(c.speed(2), 0.6);
  EXPECT_DOUBLE_EQ(c.speed(4), 1.0);
  EXPECT_DOUBLE_EQ(c.delivered(4), 1.2);
  // Workers 1-3 add 0.3 each, the 4th 0.1 (>= 5 % of g), the 5th nothing.
  EXPECT_EQ(c.useful(256), 4);
  EXPECT_EQ(c.useful(2), 2) << "at most max_workers";
}

TEST(SpeedCurveTest, ConcaveRisesWithDiminishingReturnsAndIsFlatPastItsKnee) {
  const double g = 0.1, L = 0.6;  // knee at x = 2 L = 1.2: 12 workers
  SpeedCurve c(g, L);
  EXPECT_FALSE(c.linear());
  double last_gain = g + 1e-12;
  for (int k = 1; k <= 12; ++k) {
    const double x = k * g;
    EXPECT_NEAR(c.delivered(k), x - x * x / (4 * L), 1e-12) << k;
    EXPECT_LE(c.speed(k), k * g + 1e-12) << "never above the linear model";
    const double gain = c.speed(k) - c.speed(k - 1);
    EXPECT_GT(gain, 0) << k;
    EXPECT_LT(gain, last_gain) << "diminishing returns at " << k;
    last_gain = gain;
  }
  for (int k = 13; k <= 40; ++k) EXPECT_NEAR(c.speed(k), L, 1e-12) << "flat past the knee";
  // The k-th worker adds g (1 - (2k - 1) g / (4 L)): >= 0.05 g up to
  // k = 11 (the 12th adds 0.042 g).
  EXPECT_EQ(c.useful(256), 11);
}

TEST(SpeedCurveTest, FlatAfterTwoWorkers) {
  const double g = 0.3;
  SpeedCurve c(g, g);  // L = g
  EXPECT_NEAR(c.speed(1), 0.75 * g, 1e-12);
  EXPECT_NEAR(c.speed(2), g, 1e-12);
  EXPECT_NEAR(c.speed(8), g, 1e-12);
  EXPECT_EQ(c.useful(256), 2);
}

TEST(SpeedCurveTest, ConcaveCapsAtFullSpeed) {
  SpeedCurve c(0.2, 2.0);  // s = 1 at x = 4 (1 - sqrt(1/2)) = 1.17
  EXPECT_LT(c.speed(5), 1.0);
  EXPECT_DOUBLE_EQ(c.speed(6), 1.0);
  EXPECT_EQ(c.useful(256), 6);
}

// The stated distribution: 20 % flat after 2 workers (L = g, at least
// 0.25), 30 % L uniform in [0.25, 1), 50 % L uniform in [1, 4); per pod
// name and seed.
TEST(SpeedCurveTest, ConcaveCurvesFollowTheirStatedDistribution) {
  const ConcaveCurves curves;
  const double g = 0.4;
  const int n = 20000;
  int flat = 0, limited = 0, full = 0;
  double limited_sum = 0, full_sum = 0;
  for (int i = 0; i < n; ++i) {
    const TracePod p = named("pod-" + std::to_string(i));
    SpeedCurve c = draw_speed_curve(SpeedCurveModel::kConcave, curves, p, g, 1);
    EXPECT_EQ(c.gain(), g);
    SpeedCurve again = draw_speed_curve(SpeedCurveModel::kConcave, curves, p, g, 1);
    EXPECT_EQ(c.ceiling(), again.ceiling()) << "the same pod and seed draw the same curve";
    if (c.ceiling() == g) {
      ++flat;
    } else if (c.ceiling() < 1) {
      ++limited;
      limited_sum += c.ceiling();
      EXPECT_GE(c.ceiling(), 0.25);
    } else {
      ++full;
      full_sum += c.ceiling();
      EXPECT_LT(c.ceiling(), 4.0);
    }
  }
  EXPECT_NEAR(static_cast<double>(flat) / n, 0.2, 0.015);
  EXPECT_NEAR(static_cast<double>(limited) / n, 0.3, 0.015);
  EXPECT_NEAR(static_cast<double>(full) / n, 0.5, 0.015);
  EXPECT_NEAR(limited_sum / limited, 0.625, 0.02);
  EXPECT_NEAR(full_sum / full, 2.5, 0.05);
  // The flat class is floored at limited_min.
  int floored = 0;
  for (int i = 0; i < 200; ++i) {
    SpeedCurve c = draw_speed_curve(SpeedCurveModel::kConcave, curves, named("pod-" + std::to_string(i)), 0.05, 1);
    floored += c.ceiling() == 0.25;
    EXPECT_GE(c.ceiling(), 0.25);
  }
  EXPECT_GT(floored, 0);
  // Another seed draws other curves; linear ignores the draw.
  int differ = 0;
  for (int i = 0; i < 100; ++i) {
    const TracePod p = named("pod-" + std::to_string(i));
    differ += draw_speed_curve(SpeedCurveModel::kConcave, curves, p, g, 1).ceiling() !=
              draw_speed_curve(SpeedCurveModel::kConcave, curves, p, g, 2).ceiling();
  }
  EXPECT_GT(differ, 50);
  EXPECT_TRUE(draw_speed_curve(SpeedCurveModel::kLinear, curves, named("a"), g, 1).linear());
}

TEST(SpeedCurveTest, NoiseIsSeededAndHasTheStatedSpread) {
  SplitMix64 a(7), b(7), exact(7);
  const int n = 20000;
  double sum = 0, sq = 0;
  for (int i = 0; i < n; ++i) {
    const double x = measured(2.0, 0.05, &a);
    EXPECT_EQ(x, measured(2.0, 0.05, &b)) << "the same stream reads the same";
    sum += x;
    sq += x * x;
  }
  const double mean = sum / n, sd = std::sqrt(sq / n - mean * mean);
  EXPECT_NEAR(mean, 2.0, 0.005);
  EXPECT_NEAR(sd, 0.1, 0.005);
  EXPECT_EQ(measured(2.0, 0, &exact), 2.0);
  SplitMix64 untouched(7);
  EXPECT_EQ(exact.next(), untouched.next()) << "no noise: no draw taken";
  EXPECT_GE(measured(1.0, 0.9, &a), 0.0);
}

TEST(SpeedCurveTest, ParsesItsNames) {
  EXPECT_EQ(*parse_speed_curve("linear"), SpeedCurveModel::kLinear);
  EXPECT_EQ(*parse_speed_curve("concave"), SpeedCurveModel::kConcave);
  auto bad = parse_speed_curve("cubic");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--speed-curve"), std::string::npos);
  EXPECT_STREQ(speed_curve_name(SpeedCurveModel::kConcave), "concave");
}

}  // namespace
}  // namespace goldminer::sim
