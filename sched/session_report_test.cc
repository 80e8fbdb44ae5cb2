#include "sched/session_report.h"

#include <gtest/gtest.h>

namespace goldminer {
namespace {

TEST(SessionReportTest, OneWorkersRateIsWhatItMakesWhileTheQueueHasRoom) {
  WorkerRateEstimate e;
  EXPECT_DOUBLE_EQ(e.observe(0, 0, 0), 0) << "no worker";
  EXPECT_DOUBLE_EQ(e.observe(30, 2, 0.9), 15) << "full from the start: all it knows";
  EXPECT_DOUBLE_EQ(e.observe(40, 2, 0.2), 20);
  EXPECT_DOUBLE_EQ(e.observe(30, 3, 0.3), 10) << "with room: what they make now";
  // Full: credits hold the workers to the trainer's pace; the most seen
  // with room stands for what one can make.
  EXPECT_DOUBLE_EQ(e.observe(12, 4, 1.0), 20);
}

// A policy that measured 2 workers at 2,000 samples/s and 4 at 4,000,
// as a session under goldminer-ctld feeds it.
ScalingPolicy measured_policy() {
  AutosizerConfig c;
  c.min_workers = 1;
  c.max_workers = 8;
  c.settle_windows = 0;
  c.measure_windows = 1;
  ScalingPolicy p(c);
  double t = 0;
  for (int workers : {2, 4}) {
    QueueMetrics m;
    m.workers = m.joined = workers;
    m.arrival_rate = m.consumption_rate = 10.0 * workers;
    m.per_worker_rate = 10;
    m.trainer_wait_fraction = 0.5;
    m.samples_per_s = 100 * m.consumption_rate;
    for (int k = 0; k < 3; ++k) p.observe(m, t += 5, false, /*follow=*/true);
  }
  return p;
}

TEST(SessionReportTest, TheReportCarriesTheWindowTheCurveAndThePolicysState) {
  const ScalingPolicy policy = measured_policy();
  QueueMetrics m;
  m.workers = 4;
  m.consumption_rate = 40;
  m.per_worker_rate = 10;
  m.trainer_wait_fraction = 0.5;
  m.queue_fill = 1.5;  // over-full readings are clamped
  m.samples_per_s = 4000;
  SessionReport r = report_window(ReportedJob{77, 8, 2}, m, policy, 40, 6, 1);
  EXPECT_EQ(r.job_id, 77u);
  EXPECT_EQ(r.dw_max, 8);
  EXPECT_DOUBLE_EQ(r.cpus_per_dw, 2);
  EXPECT_EQ(r.workers, 4);
  EXPECT_EQ(r.coming, 1);
  EXPECT_DOUBLE_EQ(r.queue_fill, 1);
  EXPECT_DOUBLE_EQ(r.consumption_rate, 40);
  EXPECT_DOUBLE_EQ(r.samples_per_s, 4000);
  ASSERT_EQ(r.curve.size(), 2u);
  EXPECT_EQ(r.curve[0].workers, 2);
  EXPECT_EQ(r.curve[1].workers, 4);
  EXPECT_DOUBLE_EQ(r.curve[1].samples_per_s, 4000);
  EXPECT_EQ(r.knee, policy.knee());
  EXPECT_EQ(r.ceiling, 6);
  EXPECT_TRUE(decode_report(encode_report(r)).ok()) << "what goldminer-ctld accepts";
  // Between windows only the policy's state is set again.
  report_policy_state(policy, 41, 3, 0, &r);
  EXPECT_EQ(r.ceiling, 3);
  EXPECT_EQ(r.coming, 0);
  EXPECT_EQ(r.curve.size(), 2u);
}

TEST(SessionReportTest, WhileGrowthIsHeldTheCeilingIsWhatTheJobHolds) {
  const ScalingPolicy policy = measured_policy();
  const int ceiling = policy.reported_ceiling(40);
  ASSERT_GT(ceiling, 3);
  EXPECT_EQ(policy.report_ceiling(40, 3, /*holding=*/false), ceiling);
  EXPECT_EQ(policy.report_ceiling(40, 3, /*holding=*/true), 3);
  EXPECT_EQ(policy.report_ceiling(40, 0, /*holding=*/true), 1) << "never below one";
  EXPECT_EQ(policy.report_ceiling(40, ceiling + 2, /*holding=*/true), ceiling) << "never above the policy's";
}

}  // namespace
}  // namespace goldminer
