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

// The built-in settings but for acting after `patience` agreeing
// observations, between `min_workers` and `max_workers`.
AutosizerConfig settings(int patience, int max_workers = AutosizerConfig{}.max_workers, int min_workers = 0) {
  AutosizerConfig c;
  c.patience = patience;
  c.max_workers = max_workers;
  c.min_workers = min_workers;
  return c;
}

TEST(AutosizerTest, GrowsAfterPatienceWhileTheTrainerWaits) {
  Autosizer a(settings(3, 16));
  // 2 workers of 10 batches/s for a trainer that takes 50: 60% waiting.
  EXPECT_EQ(a.observe(metrics(2, 10, 50)), 0);
  EXPECT_EQ(a.observe(metrics(2, 10, 50)), 0);
  EXPECT_EQ(a.observe(metrics(2, 10, 50)), 3) << "gap 30 batches/s = 3 workers";
}

TEST(AutosizerTest, DoesNotGrowWhenTheNextWorkerWouldIdle) {
  AutosizerConfig c = settings(1);
  c.grow_wait_fraction = 0.01;
  Autosizer a(c);
  // Gap of 2 batches/s, a worker makes 10: it would be 20% used.
  QueueMetrics m = metrics(4, 10, 42);
  EXPECT_EQ(a.observe(m), 0);
}

TEST(AutosizerTest, ShrinksWhenTheQueueStaysFullAndOneFewerSuffices) {
  const AutosizerConfig c = settings(2);
  Autosizer a(c);
  EXPECT_EQ(a.observe(metrics(8, 10, 50)), 0);
  EXPECT_EQ(a.observe(metrics(8, 10, 50)), -1);
  // 6 workers make 60 = 1.2x consumption: one fewer (50) is not 1.1x.
  Autosizer b(c);
  EXPECT_EQ(b.observe(metrics(6, 10, 50)), 0);
  EXPECT_EQ(b.observe(metrics(6, 10, 50)), 0);
}

TEST(AutosizerTest, HysteresisResetsOnDisagreement) {
  Autosizer a(settings(2, 16));
  EXPECT_EQ(a.observe(metrics(2, 10, 50)), 0);
  EXPECT_EQ(a.observe(metrics(5, 10, 50)), 0) << "balanced: streak broken";
  EXPECT_EQ(a.observe(metrics(2, 10, 50)), 0);
  EXPECT_GT(a.observe(metrics(2, 10, 50)), 0);
}

TEST(AutosizerTest, RespectsBounds) {
  Autosizer a(settings(1, 4, 2));
  EXPECT_EQ(a.observe(metrics(0, 10, 50)), 2) << "below min: at once";
  EXPECT_EQ(a.observe(metrics(6, 10, 50)), -2) << "above max: at once";
  EXPECT_EQ(a.observe(metrics(3, 10, 100)), 1) << "grows to max, not beyond";
  EXPECT_EQ(a.observe(metrics(4, 10, 100)), 0) << "at max";
}

TEST(AutosizerTest, StartsAJobThatHasNoWorker) {
  Autosizer a(settings(1));
  EXPECT_EQ(a.observe(metrics(0, 0, 50)), 1);
}

}  // namespace
}  // namespace goldminer
