#include "sched/elastic.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <utility>

namespace goldminer {
namespace {

// Starts nothing real: counts what it was asked.
struct FakeLauncher : WorkerLauncher {
  int started = 0, waiting_now = 0, cancelled = 0, ended = 0, gone = 0;
  int refuse_after = 1 << 20;  // start() fails beyond this many
  int start(int n, std::string* error) override {
    const int ok = std::max(0, std::min(n, refuse_after - started));
    started += ok;
    if (ok < n) *error = "sbatch: exit 1: Batch job submission failed";
    return ok;
  }
  int waiting() override { return waiting_now; }
  int live() override { return started - cancelled - gone; }
  int cancel_waiting(int n) override {
    const int c = std::min(n, waiting_now);
    waiting_now -= c;
    cancelled += c;
    return c;
  }
  void end() override { ++ended; }
  void avoid_trainer_node() override { ++avoided; }
  int avoided = 0;
};

ElasticConfig config(int initial, int max) {
  ElasticConfig c;
  c.initial_workers = initial;
  c.autosizer.min_workers = 1;
  c.autosizer.max_workers = max;
  c.autosizer.patience = 2;
  // Every window measures its count at once (scaling_policy_test.cc covers
  // settling and judging).
  c.autosizer.settle_windows = 0;
  c.autosizer.measure_windows = 1;
  c.join_grace_s = 30;
  c.retry_after_s = 60;
  return c;
}

// What the session reports of `workers` connected (`joined` ever joined)
// that make 10 batches/s each, all of which (`rate` batches/s) the trainer
// consumes.
QueueMetrics queue(int workers, int joined, double rate, double trainer_wait_fraction, double queue_fill) {
  QueueMetrics m;
  m.workers = workers;
  m.joined = joined;
  m.arrival_rate = m.consumption_rate = rate;
  m.samples_per_s = 100 * rate;
  m.per_worker_rate = 10;
  m.trainer_wait_fraction = trainer_wait_fraction;
  m.queue_fill = queue_fill;
  return m;
}

// The trainer waits half the time.
QueueMetrics starved(int workers, int joined = 0) { return queue(workers, joined, 10.0 * workers, 0.5, 0); }

// The queue stays full; consumption 5 batches/s.
QueueMetrics oversupplied(int workers, int joined = 0) { return queue(workers, joined, 5, 0, 1); }

// goldminer-ctld's target: growth at once (no patience) once the count it
// leaves is measured, counting the workers on their way; shrinking cancels
// waiting ones, then drains connected ones, only after `patience`
// agreeing observations.
TEST(ElasticTest, FollowsTheCtldTarget) {
  FakeLauncher l;
  ElasticController c(config(2, 8), &l, 0);
  // The trainer takes all its workers make (10 batches/s each), the queue
  // full: every worker pays.
  auto busy = [](int workers, int joined = 0) { return queue(workers, joined, 10.0 * workers, 0, 1); };
  // The first two have not joined: nothing more starts (measure, then grow).
  ElasticStep s = c.observe(busy(0), 1, 5);
  EXPECT_EQ(s.started, 0);
  // Both joined, and (this config) the window measured their count: a
  // target of 5 starts the other 3 now.
  s = c.observe(busy(2, 2), 1.5, 5);
  EXPECT_EQ(s.started, 3);
  l.waiting_now = 3;
  EXPECT_EQ(c.observe(busy(2, 2), 2, 5).started, 0) << "5 on their way already";
  // The target drops to 3 while all wait: after 2 observations, 2 of those
  // the launcher started are cancelled, nothing is drained.
  EXPECT_EQ(c.observe(busy(2, 2), 3, 3).cancelled, 0) << "one observation is not enough";
  s = c.observe(busy(2, 2), 3.5, 3);
  EXPECT_EQ(s.cancelled, 2);
  EXPECT_EQ(s.drain, 0);
  l.waiting_now = 0;
  // The third joined; the target falls to 1: drained after 2 observations.
  EXPECT_EQ(c.observe(busy(3), 4, 1).drain, 0);
  s = c.observe(busy(3), 5, 1);
  EXPECT_EQ(s.drain, 2);
  // Never below min_workers.
  EXPECT_EQ(c.observe(busy(1), 6, 0).drain, 0) << "kept at min_workers 1";
  // Grows beyond max_workers never: 8 at most.
  s = c.observe(starved(1), 7, 50);
  EXPECT_EQ(s.started, 7);
  EXPECT_EQ(l.started, 10);
}

// A target that moves while a growth is judged starts nothing more until
// the judgement.
TEST(ElasticTest, NoStartWhileAGrowthIsJudged) {
  FakeLauncher l;
  ElasticConfig cfg = config(2, 8);
  cfg.autosizer.measure_windows = 3;
  ElasticController c(cfg, &l, 0);
  for (double t = 1; t <= 3; ++t) c.observe(starved(2, 2), t, 2);
  EXPECT_EQ(c.observe(starved(2, 2), 4, 4).started, 2);
  // Joined; judged after 3 windows at 4 (this config drops none).
  EXPECT_EQ(c.observe(starved(4, 4), 5, 8).started, 0) << "judging";
  EXPECT_EQ(c.observe(starved(4, 4), 6, 8).started, 0) << "judging";
  EXPECT_EQ(c.observe(starved(4, 4), 7, 8).started, 4) << "judged: paid (linear), then the target";
}

// What the report tells goldminer-ctld it may grant: while workers are
// on their way or a growth is judged, no more than the job holds and has
// coming (the rest is lent to other jobs); once judged, its policy's
// ceiling again.
TEST(ElasticTest, WhileGrowthIsHeldTheReportAsksForNoMoreThanItHolds) {
  FakeLauncher l;
  ElasticConfig cfg = config(2, 8);
  cfg.autosizer.measure_windows = 3;
  ElasticController c(cfg, &l, 0);
  // The first two are on their way.
  EXPECT_EQ(c.coming(starved(0), 0.5), 2);
  for (double t = 1; t <= 3; ++t) c.observe(starved(2, 2), t, 2);
  EXPECT_EQ(c.coming(starved(2, 2), 3.5), 0);
  const int measured = c.policy().reported_ceiling(3.5);
  EXPECT_GT(measured, 2) << "2 measured with the trainer waiting: the exploring cap rose";
  EXPECT_EQ(c.report_ceiling(starved(2, 2), 3.5), measured);
  ASSERT_EQ(c.observe(starved(2, 2), 4, 4).started, 2);
  EXPECT_EQ(c.coming(starved(2, 2), 4.5), 2);
  EXPECT_EQ(c.report_ceiling(starved(2, 2), 4.5), 4) << "2 connected, 2 coming";
  // Joined: their count is judged (3 windows).
  c.observe(starved(4, 4), 5, 4);
  EXPECT_EQ(c.coming(starved(4, 4), 5.5), 0);
  EXPECT_EQ(c.report_ceiling(starved(4, 4), 5.5), 4) << "judging";
  c.observe(starved(4, 4), 6, 4);
  c.observe(starved(4, 4), 7, 4);
  c.observe(starved(4, 4), 8, 4);
  EXPECT_GT(c.report_ceiling(starved(4, 4), 8.5), 4) << "judged (paid), the trainer waits: the policy's ceiling";
  EXPECT_EQ(c.report_ceiling(starved(4, 4), 8.5), c.policy().reported_ceiling(8.5));
  // Workers that never join stop counting after the join grace.
  ASSERT_GT(c.observe(starved(4, 4), 9, 8).started, 0);
  EXPECT_GT(c.coming(starved(4, 4), 10), 0);
  EXPECT_EQ(c.coming(starved(4, 4), 9 + cfg.join_grace_s + 1), 0);
}

// Both first workers joined and one was lost before the first observation:
// the lost one is not counted as still on its way.
TEST(ElasticTest, AWorkerLostBeforeTheFirstObservationIsReplaced) {
  FakeLauncher l;
  ElasticController c(config(2, 2), &l, 0);
  QueueMetrics m = starved(1, 2);
  EXPECT_EQ(c.observe(m, 5, 2).started, 1);
}

// A worker that leaves unasked is replaced at once, up to goldminer-ctld's
// last target, counting those on their way; not beyond dw-max, and not
// while a failed start's retry wait runs.
TEST(ElasticTest, ALostWorkerIsReplacedAtOnceUpToTheCtldTarget) {
  FakeLauncher l;
  ElasticController c(config(2, 8), &l, 0);
  QueueMetrics m = oversupplied(2, 2);
  EXPECT_EQ(c.observe(m, 5, 3).started, 1);  // the target 3: one more now
  EXPECT_EQ(c.replace_lost(1, 1, 2, 6).started, 1) << "2 connected + 1 on its way - 1 lost: 2 of 3";
  EXPECT_EQ(l.started, 2);
  EXPECT_EQ(c.replace_lost(1, 0, 2, 7).started, 1) << "the second loss: 0 connected + 2 on their way of 3";
  EXPECT_EQ(c.replace_lost(0, 0, 2, 7).started, 0) << "nothing left";
  // The target drops below what is connected: a loss is not replaced.
  m = oversupplied(3, 5);
  c.observe(m, 10, 2);
  EXPECT_EQ(c.replace_lost(1, 2, 5, 11).started, 0);
}

TEST(ElasticTest, ALostWorkerIsReplacedAtOnceWhenSizingItself) {
  FakeLauncher l;
  l.refuse_after = 3;
  ElasticController c(config(2, 3), &l, 0);
  QueueMetrics m = oversupplied(3, 3);
  c.observe(m, 5);  // sizing itself: 3 connected
  EXPECT_EQ(c.replace_lost(2, 1, 3, 6).started, 2) << "back to the 3 it had";
  EXPECT_EQ(c.replace_lost(1, 0, 3, 7).started, 1) << "0 + 2 on their way of 3";
  // The launcher refuses: no new start until retry_after_s has passed.
  l.started = 3;
  m = oversupplied(3, 6);
  c.observe(m, 8);
  EXPECT_EQ(c.replace_lost(1, 2, 6, 9).started, 0);
  EXPECT_EQ(c.replace_lost(1, 2, 6, 10).started, 0) << "retry wait";
  l.refuse_after = 10;
  EXPECT_EQ(c.replace_lost(1, 2, 6, 70).started, 1);
}

// The job's first two workers joined and one was killed before the first
// observation: both joins are counted, so the lost one is replaced at once.
TEST(ElasticTest, AWorkerLostBeforeTheFirstObservationIsReplacedAtOnce) {
  FakeLauncher l;
  ElasticController c(config(2, 2), &l, 0);
  EXPECT_EQ(c.replace_lost(1, 1, 2, 3).started, 1);
  EXPECT_EQ(c.replace_lost(1, 0, 2, 4).started, 1) << "the other one too";
  EXPECT_EQ(c.replace_lost(0, 0, 2, 5).started, 0) << "both replacements on their way";
}

// A target that flickers between 1 and 2 each interval (the noise of one
// interval's rates) keeps the second worker: it is started once and never
// cancelled or drained.
TEST(ElasticTest, AFlickeringTargetKeepsTheHigherOne) {
  FakeLauncher l;
  ElasticController c(config(1, 8), &l, 0);
  QueueMetrics m = starved(1, 1);
  EXPECT_EQ(c.observe(m, 1, 2).started, 1);
  l.waiting_now = 1;
  for (int i = 0; i < 10; ++i) {
    const ElasticStep s = c.observe(m, 2 + i, i % 2 == 0 ? 1 : 2);
    EXPECT_EQ(s.started + s.cancelled + s.drain, 0) << "interval " << i;
  }
  EXPECT_EQ(l.started, 1);
}

TEST(ElasticTest, AFailedStartWaitsBeforeTheTargetIsTriedAgain) {
  FakeLauncher l;
  l.refuse_after = 1;
  ElasticController c(config(0, 8), &l, 0);
  ElasticStep s = c.observe(starved(0), 1, 3);
  EXPECT_EQ(s.started, 1);
  EXPECT_FALSE(s.error.empty());
  EXPECT_EQ(c.observe(starved(0), 2, 3).started, 0) << "retry_after_s";
  l.refuse_after = 100;
  EXPECT_EQ(c.observe(starved(1), 70, 3).started, 2) << "the one that joined counts";
}

TEST(ElasticTest, GrowsWhenTheTrainerWaitsOnceTheFirstWorkersJoined) {
  FakeLauncher l;
  ElasticController c(config(2, 8), &l, 0);
  // The job's first two workers have not joined yet: no growth.
  for (double t = 1; t <= 4; ++t) EXPECT_EQ(c.observe(starved(0), t).started, 0);
  EXPECT_EQ(l.started, 0);
  EXPECT_EQ(c.observe(starved(2), 5).started, 0) << "patience: one agreeing observation";
  ElasticStep s = c.observe(starved(2), 6);
  // Trainer waits half: it could take twice as much: 2 more workers.
  EXPECT_EQ(s.started, 2);
  EXPECT_EQ(l.started, 2);
  EXPECT_TRUE(s.error.empty());
  // Those two on their way hold further growth back until they join.
  for (double t = 7; t <= 10; ++t) EXPECT_EQ(c.observe(starved(2), t).started, 0);
  c.observe(starved(4), 11);
  EXPECT_EQ(c.observe(starved(4), 12).started, 4);
  EXPECT_EQ(l.started, 6);
}

TEST(ElasticTest, NeverAboveMaxAndNotWhileWorkersWaitForResources) {
  FakeLauncher l;
  ElasticController c(config(1, 3), &l, 0);
  c.observe(starved(1), 1);
  EXPECT_EQ(c.observe(starved(1), 2).started, 1) << "gap 10/s = one worker";
  l.waiting_now = 1;  // Slurm has no CPUs for it yet
  for (double t = 3; t < 100; ++t) EXPECT_EQ(c.observe(starved(1), t).started, 0);
  l.waiting_now = 0;
  // The window the second worker arrives in judges its growth (paid); the
  // next proposal comes after `patience` more.
  int more = 0;
  for (double t = 100; t < 103; ++t) more += c.observe(starved(2), t).started;
  EXPECT_EQ(more, 1) << "max 3: one more, not two";
  for (double t = 103; t < 110; ++t) EXPECT_EQ(c.observe(starved(3), t).started, 0);
  EXPECT_EQ(l.started, 2);
}

TEST(ElasticTest, WorkersThatNeverJoinStopHoldingGrowthBackAfterTheGrace) {
  FakeLauncher l;
  ElasticController c(config(2, 8), &l, 0);
  EXPECT_EQ(c.observe(starved(0), 10).started, 0);
  EXPECT_EQ(c.observe(starved(0), 20).started, 0);
  // 30 s: the job's first workers never came (its companion job failed).
  EXPECT_EQ(c.observe(starved(0), 31).started, 1) << "below min_workers: back to one at once";
}

// Preemption: the workers it started are preempted before they join, and
// the connected ones drain and leave: nothing is on its way any more, so
// the next observation starts a worker at once.
TEST(ElasticTest, WorkersPreemptedBeforeTheyJoinedHoldNothingBack) {
  FakeLauncher l;
  ElasticController c(config(2, 8), &l, 0);
  c.observe(starved(2), 1);
  ASSERT_EQ(c.observe(starved(2), 2).started, 2);
  EXPECT_EQ(c.observe(starved(2), 3).started, 0) << "the two started are on their way";
  l.gone = 2;
  EXPECT_EQ(c.observe(starved(0), 4).started, 1) << "below min_workers, nothing on its way: one at once";
}

// Connected workers that leave lower the target the started ones count
// towards: those still to join are what is on its way.
TEST(ElasticTest, WorkersThatLeaveLowerTheTargetStartedOnesCountTowards) {
  FakeLauncher l;
  ElasticController c(config(2, 8), &l, 0);
  c.observe(starved(2), 1);
  ASSERT_EQ(c.observe(starved(2), 2).started, 2);  // target 4, both live
  c.observe(starved(4), 3);                        // they joined
  EXPECT_GT(c.observe(starved(2), 4).started, 0) << "the first two left: not held back by them";
}

TEST(ElasticTest, AFailedStartWaitsBeforeTheNextTry) {
  FakeLauncher l;
  l.refuse_after = 0;
  ElasticController c(config(1, 4), &l, 0);
  c.observe(starved(1), 1);
  ElasticStep s = c.observe(starved(1), 2);
  EXPECT_EQ(s.started, 0);
  EXPECT_EQ(s.error, "sbatch: exit 1: Batch job submission failed");
  for (double t = 3; t < 62; ++t) EXPECT_TRUE(c.observe(starved(1), t).error.empty()) << t;
  l.refuse_after = 10;
  EXPECT_EQ(c.observe(starved(1), 62).started + c.observe(starved(1), 63).started, 1);
}

// Workers that only share the trainer's cores: 2 make 2,000 samples/s, 6
// make less. Sizing itself, the job grows (the trainer waits), measures
// the growth, and drains it again in the window that judged it.
TEST(ElasticTest, AGrowthThatDidNotPayIsDrainedAgain) {
  FakeLauncher l;
  ElasticController c(config(2, 8), &l, 0);
  auto flat = [](int workers) {
    QueueMetrics m = starved(workers, workers);
    m.samples_per_s = workers <= 2 ? 1000.0 * workers : 2000 - 100.0 * (workers - 2);
    m.consumption_rate = m.samples_per_s / 100;
    return m;
  };
  double t = 1;
  for (; t < 10 && l.started == 0; ++t) c.observe(flat(2), t);
  ASSERT_GT(l.started, 0);
  const int grown = 2 + l.started;
  ElasticStep s;
  for (; t < 20 && s.drain == 0; ++t) s = c.observe(flat(grown), t);
  EXPECT_EQ(s.drain, grown - 2) << s.decision;
  EXPECT_NE(s.decision.find("did not pay: back to 2"), std::string::npos) << s.decision;
  EXPECT_EQ(c.policy().knee(), 2);
  // Held at the knee while the trainer still waits, until the back-off ends.
  const int before = l.started;
  for (double u = t; u < t + 30; ++u) c.observe(flat(2), u);
  EXPECT_EQ(l.started, before);
}

// Following goldminer-ctld's target, a growth that did not pay is drained
// at once (no `patience`), and the target is capped at the knee after.
TEST(ElasticTest, FollowingATargetAboveTheKneeDrainsAtOnce) {
  FakeLauncher l;
  ElasticController c(config(2, 8), &l, 0);
  auto flat = [](int workers) {
    QueueMetrics m = starved(workers, workers);
    m.samples_per_s = 1000.0 * std::min(workers, 2);
    m.consumption_rate = m.samples_per_s / 100;
    return m;
  };
  c.observe(flat(2), 1, 2);
  c.observe(flat(2), 2, 2);
  EXPECT_EQ(c.observe(flat(2), 3, 6).started, 4);
  ElasticStep s;
  double t = 4;
  for (; t < 12 && s.drain == 0; ++t) s = c.observe(flat(6), t, 6);
  EXPECT_EQ(s.drain, 4) << s.decision;
  EXPECT_EQ(c.policy().ceiling(t), 2);
  EXPECT_EQ(c.observe(flat(2), t, 6).started, 0) << "the target is capped at the knee";
}

// A growth whose workers landed on the trainer's node and did not pay:
// those are drained, and the launcher starts later ones elsewhere.
TEST(ElasticTest, WorkersOnTheTrainersNodeThatDidNotPayAreDrainedThereAndAvoided) {
  FakeLauncher l;
  ElasticController c(config(2, 8), &l, 0);
  auto here = [](int workers, int local) {
    QueueMetrics m = starved(workers, workers);
    m.local_workers = local;
    m.samples_per_s = 1000.0 * (workers - local);  // workers there add nothing
    m.consumption_rate = m.samples_per_s / 100;
    return m;
  };
  c.observe(here(2, 0), 1, 2);
  c.observe(here(2, 0), 2, 2);
  EXPECT_EQ(c.observe(here(2, 0), 3, 4).started, 2);
  ElasticStep s;
  double t = 4;
  for (; t < 12 && s.drain == 0; ++t) s = c.observe(here(4, 2), t, 4);
  EXPECT_EQ(s.drain, 2) << s.decision;
  EXPECT_TRUE(s.drain_trainer_node_first);
  EXPECT_EQ(l.avoided, 1);
  EXPECT_NE(s.decision.find("did not pay: back to 2, the knee, removing the 2 on the trainer's node"), std::string::npos) << s.decision;
}

TEST(ElasticTest, ShrinksByCancellingWaitingWorkersFirstThenDraining) {
  FakeLauncher l;
  ElasticController c(config(3, 8), &l, 0);
  l.waiting_now = 1;
  c.observe(oversupplied(3), 1);
  ElasticStep s = c.observe(oversupplied(3), 2);
  EXPECT_EQ(s.cancelled, 1);
  EXPECT_EQ(s.drain, 0);
  c.observe(oversupplied(3), 3);
  s = c.observe(oversupplied(3), 4);
  EXPECT_EQ(s.cancelled, 0);
  EXPECT_EQ(s.drain, 1);
  // One worker (10/s) still covers 5/s, but min_workers is 1.
  for (double t = 5; t < 20; ++t) EXPECT_EQ(c.observe(oversupplied(1), t).drain, 0);
}

}  // namespace
}  // namespace goldminer
