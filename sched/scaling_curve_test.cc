#include "sched/scaling_curve.h"

#include <gtest/gtest.h>

#include <cmath>

namespace goldminer {
namespace {

TEST(ScalingCurveTest, DropsTheSettleWindowsAndMeasuresAfterEnough) {
  ScalingCurve c;  // 1 settle window, 3 to measure
  c.observe(2, 9999, 5);  // the count is new: dropped
  EXPECT_FALSE(c.point(2));
  c.observe(2, 1000, 10);
  c.observe(2, 1100, 15);
  EXPECT_FALSE(c.point(2)) << "two windows are not a measurement";
  c.observe(2, 1050, 20);
  auto p = c.point(2);
  ASSERT_TRUE(p);
  EXPECT_DOUBLE_EQ(p->samples_per_s, 1050);
  EXPECT_EQ(p->windows, 3);
  EXPECT_EQ(c.settled_windows(), 3);
}

TEST(ScalingCurveTest, TheMedianIgnoresOneOutlierAndTheNoiseIsPooledOverTheCounts) {
  CurveConfig cfg;
  cfg.settle_windows = 0;
  ScalingCurve c(cfg);
  for (double r : {1000.0, 1010.0, 990.0, 5.0, 1005.0}) c.observe(4, r, 1);
  auto p = c.point(4);
  ASSERT_TRUE(p);
  EXPECT_DOUBLE_EQ(p->samples_per_s, 1000) << "an epoch's end (5 samples/s) does not move the median";
  ScalingCurve quiet(cfg);
  for (double r : {1000.0, 1000.0, 1000.0, 1000.0}) quiet.observe(4, r, 1);
  EXPECT_DOUBLE_EQ(quiet.relative_noise(), 0.01) << "quiet windows: the 1 % noise floor";
  EXPECT_DOUBLE_EQ(quiet.standard_error(*quiet.point(4)), 0.01 * 1000 / 2);
  EXPECT_DOUBLE_EQ(quiet.points()[0].band, 2 * 5.0);
  // Two counts, each with a relative sd of 10 % and 20 % over 4 windows:
  // pooled, sqrt((3 x 0.01 + 3 x 0.04) / 6).
  ScalingCurve noisy(cfg);
  for (double r : {900.0, 1100.0, 900.0, 1100.0}) noisy.observe(4, r, 1);
  for (double r : {1600.0, 2400.0, 1600.0, 2400.0}) noisy.observe(8, r, 2);
  const double sd4 = std::sqrt(4 * 100.0 * 100.0 / 3) / 1000, sd8 = std::sqrt(4 * 400.0 * 400.0 / 3) / 2000;
  EXPECT_NEAR(noisy.relative_noise(), std::sqrt((3 * sd4 * sd4 + 3 * sd8 * sd8) / 6), 1e-12);
  EXPECT_NEAR(noisy.standard_error(*noisy.point(8)), noisy.relative_noise() * 2000 / 2, 1e-9);
}

TEST(ScalingCurveTest, ACountChangeMidWindowRestartsSettling) {
  ScalingCurve c;
  for (double t : {0.0, 1.0, 2.0, 3.0}) c.observe(2, 1000, t);
  c.observe(4, 3000, 4);  // changed: dropped
  c.observe(4, 1500, 5, true);  // changed again within the window: dropped
  EXPECT_EQ(c.settled_windows(), 0);
  c.observe(4, 2000, 6);
  c.observe(4, 2000, 7);
  c.observe(4, 2000, 8);
  EXPECT_DOUBLE_EQ(c.point(4)->samples_per_s, 2000);
  ASSERT_EQ(c.points().size(), 2u);
  EXPECT_EQ(c.points()[0].workers, 2);
}

TEST(ScalingCurveTest, ForgetsOldWindowsAndOnRequest) {
  CurveConfig cfg;
  cfg.max_age_s = 100;
  ScalingCurve c(cfg);
  for (double t : {0.0, 5.0, 10.0, 15.0}) c.observe(2, 1000, t);
  EXPECT_TRUE(c.point(2));
  c.observe(3, 1500, 108);  // the windows at 2 from 0 and 5 s are now too old
  EXPECT_FALSE(c.point(2));
  for (double t : {110.0, 115.0, 120.0}) c.observe(3, 1500, t);
  EXPECT_TRUE(c.point(3));
  c.forget(3);
  EXPECT_FALSE(c.point(3));
}

TEST(ScalingCurveTest, KeepsOnlyTheRecentWindows) {
  CurveConfig cfg;
  cfg.settle_windows = 0;
  cfg.keep_windows = 3;
  ScalingCurve c(cfg);
  for (double r : {100.0, 100.0, 100.0, 500.0, 500.0, 500.0}) c.observe(1, r, 1);
  EXPECT_DOUBLE_EQ(c.point(1)->samples_per_s, 500) << "the trainer got slower: the old figure is gone";
}

TEST(ScalingCurveTest, FormatsAndParsesStrictly) {
  std::vector<CurvePoint> pts(2);
  pts[0].workers = 2, pts[0].samples_per_s = 13686.4;
  pts[1].workers = 6, pts[1].samples_per_s = 7940;
  EXPECT_EQ(format_curve(pts), "2:13686,6:7940");
  EXPECT_EQ(format_curve({}), "");
  auto back = parse_curve("2:13686,6:7940");
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[1].workers, 6);
  EXPECT_DOUBLE_EQ((*back)[1].samples_per_s, 7940);
  EXPECT_TRUE(parse_curve("").ok());
  for (const char* bad : {"2", "2:", ":5", "x:5", "2:5,", "2:5,2:6", "3:5,2:6", "2:-1", "2:nan", "-1:5", "2:1e99"}) {
    auto r = parse_curve(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find("curve"), std::string::npos) << r.status().message();
    }
  }
}

TEST(ScalingCurveTest, ShortRates) {
  EXPECT_EQ(short_rate(13686), "13.7k");
  EXPECT_EQ(short_rate(940), "940");
  EXPECT_EQ(short_rate(2.1e6), "2.1M");
}

}  // namespace
}  // namespace goldminer
