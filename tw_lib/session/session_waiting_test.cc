// Tests of how the trainer session's C++ API (goldminer::Session) waits:
// elastic workers growing and shrinking with the trainer's pace, next()'s
// timeout and interruption, wait_for_workers. Local workers run as threads
// of this process.
#include "goldminer/session.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "dw_daemon/worker.h"
#include "tw_lib/session/dataplane_test_util.h"

namespace goldminer {
namespace {

using testing::TempDir;
using testing::text_session;

// Starts workers as threads of this process (Slurm's launcher submits
// jobs; gmcore/elastic_test.cc tests it with a fake Slurm).
struct ThreadLauncher : WorkerLauncher {
  std::string trainer, secret;
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  std::atomic<int> running{0};
  int started = 0;
  int start(int n, std::string* /*error*/) override {
    for (int i = 0; i < n; ++i, ++started) {
      ++running;
      threads.emplace_back([this, id = "elastic-" + std::to_string(started)] {
        dw::WorkerOptions w;
        w.trainer = trainer;
        w.secret = secret;
        w.id = id;
        (void)dw::run_worker(w, stop);
        --running;
      });
    }
    return n;
  }
  int waiting() override { return 0; }
  int live() override { return running; }
  int cancel_waiting(int /*n*/) override { return 0; }
  void end() override { stop = true; }
  ~ThreadLauncher() override {
    stop = true;
    for (auto& t : threads) t.join();
  }
};

// mode=elastic over `o`, its workers threads of this process: 50 ms
// windows, `initial` workers started with it, 1 to `max_workers`.
std::shared_ptr<ThreadLauncher> elastic_threads(SessionOptions* o, int initial, int max_workers) {
  auto launcher = std::make_shared<ThreadLauncher>();
  launcher->trainer = o->listen;
  launcher->secret = o->secret;
  o->elastic.launcher = launcher;
  o->elastic.interval_s = 0.05;
  o->elastic.config.initial_workers = initial;
  o->elastic.config.autosizer.min_workers = 1;
  o->elastic.config.autosizer.max_workers = max_workers;
  return launcher;
}

// mode=elastic: a trainer that waits gets more workers, up to the most
// allowed; one whose queue stays full has them drained, down to one; every
// epoch meanwhile delivers each sample once.
TEST(SessionTest, ElasticWorkersGrowWhileTheTrainerWaitsAndShrinkWhenTheQueueStaysFull) {
  TempDir d;
  SessionOptions o = text_session(d, 2000, "local://session-elastic-test");
  o.batch_size = 16;
  o.queue_batches = 32;
  o.local_workers = 1;
  auto launcher = elastic_threads(&o, 1, 3);
  o.elastic.config.join_grace_s = 5;
  // A queue of 32 batches over 2 or 3 workers' 4 credits each is full at
  // 8 or 12 batches: one batch taken shows 0.875 or 0.92; and each epoch's
  // end empties it.
  o.elastic.config.autosizer.shrink_queue_fill = 0.8;
  auto s = Session::create(o);
  ASSERT_TRUE(s.ok()) << s.status().message();
  auto run_epochs = [&](std::chrono::milliseconds per_batch, size_t until_workers) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    int epochs = 0;
    while ((*s)->metrics().workers != until_workers && std::chrono::steady_clock::now() < deadline) {
      std::set<int64_t> records;
      for (const SessionBatch& b : (*s)->epoch()) {
        for (uint32_t i = 0; i < b.samples; ++i) EXPECT_TRUE(records.insert(b.sample_ids[2 * i + 1]).second);
        std::this_thread::sleep_for(per_batch);
      }
      EXPECT_TRUE((*s)->status().ok()) << (*s)->status().message();
      EXPECT_EQ(records.size(), 2000u);
      ++epochs;
    }
    return epochs;
  };
  // A trainer that only takes batches waits for its one worker: it grows.
  const int fast = run_epochs(std::chrono::milliseconds(0), 3);
  EXPECT_EQ((*s)->metrics().workers, 3u) << "after " << fast << " epochs";
  EXPECT_EQ(launcher->started, 2) << "never above max_workers";
  // A slow trainer: the queue stays full, workers are drained to one.
  const int slow = run_epochs(std::chrono::milliseconds(5), 1);
  EXPECT_EQ((*s)->metrics().workers, 1u) << "after " << slow << " epochs";
  EXPECT_EQ(launcher->started, 2) << "it did not grow again";
  EXPECT_EQ((*s)->metrics().workers_lost, 0u) << "drained, not lost";
  s->reset();
  EXPECT_TRUE(launcher->stop) << "the session's end stops what it started";
}

// A slow trainer (one batch every 30 ms) under a 50 ms scaling interval:
// each window lasts until it took 8 batches (about 0.24 s), not one
// interval of one or two (at most 12 intervals).
TEST(SessionTest, AScalingWindowOfASlowTrainerHoldsSeveralBatches) {
  TempDir d;
  SessionOptions o = text_session(d, 4000, "local://session-window-test");
  o.batch_size = 16;
  o.local_workers = 1;
  auto launcher = elastic_threads(&o, 0, 1);
  auto s = Session::create(o);
  ASSERT_TRUE(s.ok()) << s.status().message();
  int taken = 0;
  for (const SessionBatch& b : (*s)->epoch()) {
    (void)b;
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    if (++taken == 60) break;
  }
  const SessionMetrics m = (*s)->metrics();
  EXPECT_GE(m.scaling_window_batches, 8u) << m.scaling_window_s << " s";
  EXPECT_GE(m.scaling_window_s, 0.2) << m.scaling_window_batches << " batches";
  EXPECT_LE(m.scaling_window_s, 12 * 0.05 + 0.1) << "at most 12 intervals";
}

SessionOptions with_timeout(SessionOptions o, double timeout_s) {
  o.timeout_s = timeout_s;
  return o;
}

// next(interrupted) is asked while it waits and stops when told to; the
// session goes on (a timeout still applies afterwards).
TEST(SessionTest, NextStopsWhenInterruptedAndTheSessionGoesOn) {
  TempDir d;
  auto s = Session::create(with_timeout(text_session(d, 300, "local://session-interrupt-test"), 0.5));
  ASSERT_TRUE(s.ok()) << s.status().message();
  int asked = 0;
  const auto start = std::chrono::steady_clock::now();
  auto b = (*s)->next([&asked] { return ++asked == 2; });
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message(), Session::kInterrupted);
  EXPECT_EQ(asked, 2);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(450)) << "stopped before the timeout";
  auto again = (*s)->next([] { return false; });
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("no batch within 0.5 s"), std::string::npos) << again.status().message();
}

// With a timeout, next() fails when no batch comes (here: no worker ever
// joins) and names what it saw; a worker joining later still delivers.
TEST(SessionTest, NextTimesOutWithoutWorkersAndGoesOnWhenOneJoins) {
  TempDir d;
  const SessionOptions o = with_timeout(text_session(d, 300, "local://session-timeout-test"), 0.3);
  auto s = Session::create(o);
  ASSERT_TRUE(s.ok()) << s.status().message();
  const auto start = std::chrono::steady_clock::now();
  auto b = (*s)->next();
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message(), "no batch within 0.3 s (0 workers connected, 0 lost with splits in hand)");
  EXPECT_GE(waited, 0.3);
  EXPECT_LT(waited, 5.0);
  std::atomic<bool> stop{false};
  std::thread worker([&] {
    dw::WorkerOptions w;
    w.trainer = o.listen;
    w.secret = o.secret;
    w.id = "late-worker";
    (void)dw::run_worker(w, stop);
  });
  uint64_t samples = 0;
  for (;;) {
    auto next = (*s)->next();
    if (!next.ok()) continue;  // the worker may take longer than 0.3 s to join
    if (!next->has_value()) break;
    samples += (**next).samples;
  }
  EXPECT_EQ(samples, 300u);
  stop = true;
  s->reset();
  worker.join();
}

// wait_for_workers: an error naming how many joined when the time is up
// (the session goes on), kInterrupted when asked to stop, and the count as
// soon as enough workers are connected.
TEST(SessionTest, WaitForWorkersTimesOutOrReturnsOnceTheyJoined) {
  TempDir d;
  SessionOptions o = text_session(d, 300, "local://session-wait-test");
  auto s = Session::create(o);
  ASSERT_TRUE(s.ok()) << s.status().message();
  auto none = (*s)->wait_for_workers(1, 0.2);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().message(), "only 0 of 1 workers joined within 0.2 s");
  // In a --goldminer batch job whose companion job could not be submitted,
  // the plugin's reason (GOLDMINER_DW_ERROR, as from_environment reads it)
  // follows.
  setenv("GOLDMINER_DW_ERROR", "goldminer: job 7: cannot start its data workers: sbatch: exit 1: no partition", 1);
  SessionOptions failed = text_session(d, 300, "local://session-wait-test-no-companion");
  Status read = failed.from_environment();
  unsetenv("GOLDMINER_DW_ERROR");
  ASSERT_TRUE(read.ok()) << read.message();
  auto without = Session::create(failed);
  ASSERT_TRUE(without.ok()) << without.status().message();
  none = (*without)->wait_for_workers(1, 0.1);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().message(),
            "only 0 of 1 workers joined within 0.1 s; goldminer: job 7: cannot start its data workers: sbatch: exit "
            "1: no partition");
  int asked = 0;
  auto stopped = (*s)->wait_for_workers(1, 60, [&asked] { return ++asked == 3; });
  ASSERT_FALSE(stopped.ok());
  EXPECT_EQ(stopped.status().message(), Session::kInterrupted);
  auto zero = (*s)->wait_for_workers(0, 0);
  ASSERT_TRUE(zero.ok()) << zero.status().message();
  EXPECT_EQ(*zero, 0u);

  std::atomic<bool> stop{false};
  std::vector<std::thread> workers;
  for (const char* id : {"w1", "w2"})
    workers.emplace_back([&, id] {
      dw::WorkerOptions w;
      w.trainer = o.listen;
      w.secret = o.secret;
      w.id = id;
      (void)dw::run_worker(w, stop);
    });
  auto two = (*s)->wait_for_workers(2, 60);
  ASSERT_TRUE(two.ok()) << two.status().message();
  EXPECT_EQ(*two, 2u);
  EXPECT_EQ((*s)->metrics().workers, 2u);
  uint64_t samples = 0;
  for (const SessionBatch& b : (*s)->epoch()) samples += b.samples;
  EXPECT_EQ(samples, 300u);
  stop = true;
  s->reset();
  for (auto& t : workers) t.join();
}

}  // namespace
}  // namespace goldminer
