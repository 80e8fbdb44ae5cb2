#include "sched/autosizer.h"

#include <gtest/gtest.h>

namespace goldminer {
namespace {

QueueMetrics metrics(int workers, double per_worker, double gpu_rate) {
  // The trainer can consume gpu_rate batches/s; workers produce.
  QueueMetrics m;
  m.workers = workers;
  m.per_worker_rate = per_worker;
  m.arrival_rate = workers * per_worker;
  m.consumption_rate = std::min(gpu_rate, m.arrival_rate);
  m.trainer_wait_fraction = 1 - m.consumption_rate / gpu_rate;
  m.queue_fill = m.arrival_rate > gpu_rate ? 1.0 : 0.1;
  return m;
}

TEST(AutosizerTest, GrowsAfterPatienceWhileTheTrainerWaits) {
  AutosizerConfig c;
  c.max_workers = 16;
  c.patience = 3;
  Autosizer a(c);
  // 2 workers of 10 batches/s for a trainer that takes 50: 60% waiting.
  EXPECT_EQ(a.observe(metrics(2, 10, 50)), 0);
  EXPECT_EQ(a.observe(metrics(2, 10, 50)), 0);
  EXPECT_EQ(a.observe(metrics(2, 10, 50)), 3) << "gap 30 batches/s = 3 workers";
}

TEST(AutosizerTest, DoesNotGrowWhenTheNextWorkerWouldIdle) {
  AutosizerConfig c;
  c.patience = 1;
  c.grow_wait_fraction = 0.01;
  Autosizer a(c);
  // Gap of 2 batches/s, a worker makes 10: it would be 20% used.
  QueueMetrics m = metrics(4, 10, 42);
  EXPECT_EQ(a.observe(m), 0);
}

TEST(AutosizerTest, ShrinksWhenTheQueueStaysFullAndOneFewerSuffices) {
  AutosizerConfig c;
  c.patience = 2;
  Autosizer a(c);
  EXPECT_EQ(a.observe(metrics(8, 10, 50)), 0);
  EXPECT_EQ(a.observe(metrics(8, 10, 50)), -1);
  // 6 workers make 60 = 1.2x consumption: one fewer (50) is not 1.1x.
  Autosizer b(c);
  EXPECT_EQ(b.observe(metrics(6, 10, 50)), 0);
  EXPECT_EQ(b.observe(metrics(6, 10, 50)), 0);
}

TEST(AutosizerTest, HysteresisResetsOnDisagreement) {
  AutosizerConfig c;
  c.patience = 2;
  c.max_workers = 16;
  Autosizer a(c);
  EXPECT_EQ(a.observe(metrics(2, 10, 50)), 0);
  EXPECT_EQ(a.observe(metrics(5, 10, 50)), 0) << "balanced: streak broken";
  EXPECT_EQ(a.observe(metrics(2, 10, 50)), 0);
  EXPECT_GT(a.observe(metrics(2, 10, 50)), 0);
}

TEST(AutosizerTest, RespectsBounds) {
  AutosizerConfig c;
  c.min_workers = 2;
  c.max_workers = 4;
  c.patience = 1;
  Autosizer a(c);
  EXPECT_EQ(a.observe(metrics(0, 10, 50)), 2) << "below min: at once";
  EXPECT_EQ(a.observe(metrics(6, 10, 50)), -2) << "above max: at once";
  EXPECT_EQ(a.observe(metrics(3, 10, 100)), 1) << "grows to max, not beyond";
  EXPECT_EQ(a.observe(metrics(4, 10, 100)), 0) << "at max";
}

TEST(AutosizerTest, StartsAJobThatHasNoWorker) {
  AutosizerConfig c;
  c.patience = 1;
  Autosizer a(c);
  EXPECT_EQ(a.observe(metrics(0, 0, 50)), 1);
}

}  // namespace
}  // namespace goldminer
