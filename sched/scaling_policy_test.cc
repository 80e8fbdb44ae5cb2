#include "sched/scaling_policy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace goldminer {
namespace {

constexpr double kInterval = 5;      // seconds per observation window
constexpr double kBatch = 100;       // samples per batch
// A settle window: the dropped window after a resize and the measured ones.
constexpr int kSettleWindow = 1 + 3;

// A job whose k workers deliver curve(t, k) samples/s when the trainer
// keeps up, to a trainer that takes at most demand(t) samples/s, and that
// is busy elsewhere (takes nothing, waits for nothing) while paused(t);
// each window's rate is off by a normal relative error of sd `noise`.
// Produces what the session measures (tw_lib/session/session_elastic.cc):
// the trainer's rate and wait, the queue's fill, one worker's best rate
// while the queue had room.
struct SyntheticJob {
  std::function<double(double, int)> curve;
  std::function<double(double)> demand;
  double noise = 0;
  std::function<bool(double)> paused = [](double) { return false; };
  std::mt19937 rng{7};
  double capacity = 0;

  QueueMetrics window(double t, int k) {
    std::normal_distribution<double> err(0, noise);
    const double made = std::max(0.0, curve(t, k) * (noise > 0 ? 1 + err(rng) : 1));
    const double want = demand(t);
    const bool pause = paused(t);
    const double taken = pause ? 0.02 * std::min(want, made) : std::min(want, made);
    QueueMetrics m;
    m.workers = m.joined = k;
    m.arrival_rate = (pause ? taken : made) / kBatch;
    m.consumption_rate = taken / kBatch;
    m.samples_per_s = taken;
    m.trainer_wait_fraction = pause ? 0 : 1 - taken / want;
    m.queue_fill = pause || made > want ? 1.0 : 0.1;
    const double observed = k > 0 ? m.arrival_rate / k : 0;
    if (m.queue_fill < 0.5) capacity = std::max(capacity, observed);
    m.per_worker_rate = m.queue_fill < 0.5 || capacity == 0 ? observed : capacity;
    return m;
  }
};

SyntheticJob fixed(std::function<double(int)> curve, double demand, double noise = 0) {
  SyntheticJob j;
  j.curve = [curve](double, int k) { return curve(k); };
  j.demand = [demand](double) { return demand; };
  j.noise = noise;
  return j;
}

struct Trace {
  std::vector<int> counts;   // workers in each window
  std::vector<int> knees;    // the policy's knee after each window
  std::vector<int> resizes;  // window index of each resize
  std::vector<std::string> lines;
  int judgments = 0;
};

// `windows` windows from `start` workers; a resize takes effect in the
// next window (workers join at once).
Trace run_job(SyntheticJob& job, const AutosizerConfig& cfg, int start, int windows) {
  ScalingPolicy p(cfg);
  Trace r;
  int k = start;
  for (int i = 0; i < windows; ++i) {
    r.counts.push_back(k);
    ScalingDecision d = p.observe(job.window(i * kInterval, k), i * kInterval, false);
    r.knees.push_back(p.knee());
    if (!d.why.empty()) r.lines.push_back(d.why);
    if (d.change != 0) {
      k = std::clamp(k + d.change, cfg.min_workers, cfg.max_workers);
      r.resizes.push_back(i);
    }
  }
  r.judgments = p.judgments();
  return r;
}

AutosizerConfig settings(int max_workers = 8) {
  AutosizerConfig c;
  c.max_workers = max_workers;
  c.min_workers = 1;
  c.patience = 1;
  return c;
}

std::string lines(const Trace& r) {
  std::string out;
  for (const auto& l : r.lines) out += "  " + l + "\n";
  return out;
}

// What a true (noise-free) curve says at time t: the throughput of k
// workers, min(curve, demand); the pay count P, the most workers each of
// whose last adds at least half of one worker's rate (the pay rule's
// threshold, pay_fraction 0.5, one worker's rate = the best per worker).
struct Truth {
  std::function<double(double, int)> rate;
  int max_workers;
  int pay_count(double t) const {
    double r1 = 0;
    for (int k = 1; k <= max_workers; ++k) r1 = std::max(r1, rate(t, k) / k);
    int best = 1;
    for (int k = 2; k <= max_workers; ++k)
      if (rate(t, k) - rate(t, k - 1) >= 0.5 * r1 - 1e-9) best = k;
    return best;
  }
};

// One phase of a run (from window `begin` to `end`, the true curve fixed):
// after how many resizes from the phase's start the count first gives a
// throughput within 10 % of the pay count's (-1: never), the share of the
// phase's windows from then on that do, and the longest run of windows
// (after `grace` windows from the phase's start, not counting those the
// trainer was paused in) held above the pay count by more than `slack`
// workers: workers that do not pay.
struct PhaseResult {
  int resizes_to_settle = -1;
  double share_settled = 0;
  int longest_unpaid = 0;
};
PhaseResult phase(const Trace& r, const Truth& truth, int begin, int end, int slack, int grace,
                  const std::function<bool(double)>& paused) {
  PhaseResult out;
  const double t = begin * kInterval;
  const int pay = truth.pay_count(t);
  const double target = 0.9 * truth.rate(t, pay);
  // A window at a probe above or below a knee that is settled counts as
  // settled (a probe lasts a settle window or two, every back-off).
  auto settled = [&](int i) {
    const int knee = i > 0 ? r.knees[i - 1] : -1;
    return truth.rate(t, r.counts[i]) >= target || (knee >= 0 && r.counts[i] != knee && truth.rate(t, knee) >= target);
  };
  int first = begin;
  while (first < end && !settled(first)) ++first;
  if (first < end) {
    out.resizes_to_settle = 0;
    for (int w : r.resizes) out.resizes_to_settle += w >= begin && w < first;
    int n = 0;
    for (int i = first; i < end; ++i) n += settled(i);
    out.share_settled = static_cast<double>(n) / (end - first);
  }
  int run = 0;
  for (int i = begin + grace; i < end; ++i) {
    if (paused(i * kInterval)) continue;  // a window the trainer was away measures nothing
    run = r.counts[i] > pay + slack ? run + 1 : 0;
    out.longest_unpaid = std::max(out.longest_unpaid, run);
  }
  return out;
}

// A case at scale: `truth` with the noise, 20 seeds, from `start` workers
// for `windows` windows; phases as [begin, end) window ranges. Checks each
// phase of each seed: settled within `max_resizes` resizes, and never more
// than two settle windows above the pay count by more than `slack` (after
// `grace` windows of a phase: what a change of conditions takes to show).
// Prints the worst figures seen, which the tests' comments state.
struct AtScale {
  Truth truth;
  std::function<bool(double)> paused = [](double) { return false; };
  int start = 1;
  int windows = 1440;
  std::vector<std::pair<int, int>> phases;
  int max_resizes = 8;
  double min_share = 0.8;
  int slack = 1;
  int grace = 0;
};
void expect_at_scale(const AtScale& c, double noise) {
  int worst_resizes = 0, worst_unpaid = 0, worst_judgments = 0;
  double worst_share = 1;
  for (unsigned seed = 1; seed <= 20; ++seed) {
    SyntheticJob job;
    job.curve = c.truth.rate;
    job.demand = [](double) { return 1e12; };
    job.noise = noise;
    job.paused = c.paused;
    job.rng.seed(seed);
    Trace r = run_job(job, settings(c.truth.max_workers), c.start, c.windows);
    worst_judgments = std::max(worst_judgments, r.judgments);
    for (const auto& [begin, end] : c.phases) {
      SCOPED_TRACE("seed " + std::to_string(seed) + ", noise " + std::to_string(noise) + ", windows " +
                   std::to_string(begin) + "-" + std::to_string(end) + ", pay count " +
                   std::to_string(c.truth.pay_count(begin * kInterval)));
      const PhaseResult p = phase(r, c.truth, begin, end, c.slack, c.grace, c.paused);
      EXPECT_GE(p.resizes_to_settle, 0) << "never within 10 % of the pay count's throughput\n" << lines(r);
      EXPECT_LE(p.resizes_to_settle, c.max_resizes) << lines(r);
      EXPECT_GE(p.share_settled, c.min_share) << lines(r);
      EXPECT_LE(p.longest_unpaid, 2 * kSettleWindow) << lines(r);
      worst_resizes = std::max(worst_resizes, p.resizes_to_settle);
      worst_share = std::min(worst_share, p.share_settled);
      worst_unpaid = std::max(worst_unpaid, p.longest_unpaid);
    }
  }
  std::printf("noise %.0f %%: within 10 %% after at most %d resizes, then %.0f %% of the windows at least; at most "
              "%d windows above the pay count + %d; %d judgments\n",
              100 * noise, worst_resizes, 100 * worst_share, worst_unpaid, c.slack, worst_judgments);
}

// Linear: r samples/s per worker up to `best` workers (the trainer's
// limit is there).
Truth linear_to(int best, int max_workers, double r = 1000) {
  return {[best, r](double, int k) { return r * std::min(k, best); }, max_workers};
}

// Linear to 16, 32 and 64 workers (1,000 samples/s each, the trainer's
// limit there), from 1 worker, 2 h of 5 s windows, 2 % and 5 % noise, 20
// seeds each. One-worker steps cannot be told from the noise near 64
// (5 %: one worker is 1.6 % of the rate), so steps are sized to be.
TEST(ScalingPolicyAtScaleTest, LinearTo16_32And64SettleAtTheirBest) {
  for (int best : {16, 32, 64}) {
    AtScale c;
    c.truth = linear_to(best, best + best / 4);
    c.phases = {{0, c.windows}};
    c.slack = std::max(1, best / 10);
    for (double noise : {0.02, 0.05}) {
      SCOPED_TRACE("linear to " + std::to_string(best));
      expect_at_scale(c, noise);
    }
  }
}

// Concave, 10,000 (1 - e^(-k/3)): the k-th worker adds 2,835, 2,031,
// 1,455, 1,043: with one worker's 2,835 the pay rule's threshold is 1,417,
// so 3 pay. Flat after 2 (5,000 each). Falling past 2 (the README demo's
// figures: workers sharing the trainer's cores). Max 8 workers.
TEST(ScalingPolicyAtScaleTest, ConcaveFlatAndFallingCurvesSettleAtTheLastWorkerThatPays) {
  const std::vector<std::pair<std::string, Truth>> cases = {
      {"concave", {[](double, int k) { return 10000 * (1 - std::exp(-k / 3.0)); }, 8}},
      {"flat after 2", {[](double, int k) { return 5000.0 * std::min(k, 2); }, 8}},
      {"falling past 2", {[](double, int k) { return k <= 2 ? 6843.0 * k : 13686 - 1436.5 * (k - 2); }, 8}},
  };
  for (const auto& [name, truth] : cases) {
    AtScale c;
    c.truth = truth;
    c.start = 2;
    c.phases = {{0, c.windows}};
    for (double noise : {0.02, 0.05}) {
      SCOPED_TRACE(name);
      expect_at_scale(c, noise);
    }
  }
}

// The knee moves: linear (1,000 each) to 4 for the first 20 minutes (a
// busy file system), to 16 until 100 minutes, then to 6, until 160. Each
// phase is judged on its own; a change shows only once windows at the new
// conditions outweigh the old (grace: 3 settle windows). Nothing signals
// the move up (4 workers deliver 4,000 either way): it is found by the
// back-off's probes, at most reprobe_max_s (960 s) apart.
TEST(ScalingPolicyAtScaleTest, AKneeThatMovesUpThenDownIsFollowed) {
  AtScale c;
  c.truth = {[](double t, int k) { return 1000.0 * std::min(k, t < 1200 ? 4 : t < 6000 ? 16 : 6); }, 20};
  c.windows = 1920;
  c.phases = {{0, 240}, {240, 1200}, {1200, c.windows}};
  c.slack = 1;
  // Measured (20 seeds): 2 %: within 10 % after at most 2 resizes, 9
  // windows above 7 once the knee fell; 5 %: after at most 17 resizes
  // (probes found the move up late: 40 % of the windows from then on).
  c.grace = 4 * kSettleWindow;
  c.max_resizes = 20;
  c.min_share = 0.35;
  for (double noise : {0.02, 0.05}) expect_at_scale(c, noise);
}

// Linear to 16, and the trainer is busy elsewhere (an evaluation) for 30 s
// every 10 minutes: it takes nearly nothing and waits for nothing. Those
// windows are left out, so the job stays at its best through them.
TEST(ScalingPolicyAtScaleTest, ATrainerThatPausesEveryTenMinutesKeepsItsWorkers) {
  AtScale c;
  c.truth = linear_to(16, 20);
  c.paused = [](double t) { return std::fmod(t, 600) >= 570; };
  c.phases = {{0, c.windows}};
  c.slack = 2;
  for (double noise : {0.02, 0.05}) expect_at_scale(c, noise);
}

// The first 20 minutes limited to 4, then linear to 16: the policy does
// not sit at 7 (where one-worker steps stop paying); it reaches 16.
TEST(ScalingPolicyAtScaleTest, AJobLimitedAtFirstClimbsPastSevenOnceItIsNot) {
  SyntheticJob job;
  job.curve = [](double t, int k) { return 1000.0 * std::min(k, t < 1200 ? 4 : 16); };
  job.demand = [](double) { return 1e12; };
  Trace r = run_job(job, settings(20), 1, 1440);
  EXPECT_GE(r.counts.back(), 16) << lines(r);
  EXPECT_LE(r.counts.back(), 17) << lines(r);
}

TEST(ScalingPolicyTest, WorkersThatShareTheTrainersCoresAreUndone) {
  // The README demo's figures: 2 workers 13.7k samples/s, 6 workers 7.9k.
  auto job = fixed([](int k) { return k <= 2 ? 6843.0 * k : 13686 - 1436.5 * (k - 2); }, 37000);
  Trace r = run_job(job, settings(8), 2, 100);
  ASSERT_FALSE(r.lines.empty());
  EXPECT_NE(r.lines[0].find(", 2: 13.7k (needs +3.4k per worker, z 1.96): did not pay: back to 2, the knee; "
                            "next probe above it in 60 s"),
            std::string::npos)
      << lines(r);
  EXPECT_EQ(r.counts.back(), 2) << lines(r);
}

TEST(ScalingPolicyTest, TheFalsePositiveBudgetRaisesZWithEveryJudgment) {
  EXPECT_NEAR(normal_quantile_upper(0.025), 1.96, 0.01);
  EXPECT_NEAR(normal_quantile_upper(0.05 / 30), 2.94, 0.01);
  EXPECT_NEAR(normal_quantile_upper(0.05 / 420), 3.67, 0.01);
  // Flat after 2 with 5 % noise for 4 hours: every re-probe adds nothing;
  // none may keep a worker above 3 for good.
  for (unsigned seed = 1; seed <= 20; ++seed) {
    auto job = fixed([](int k) { return 5000.0 * std::min(k, 2); }, 30000, 0.05);
    job.rng.seed(seed);
    Trace r = run_job(job, settings(8), 2, 4 * 720);
    SCOPED_TRACE("seed " + std::to_string(seed));
    int kept = 0;
    for (const auto& l : r.lines) kept += l.find("paid: keeping") != std::string::npos;
    EXPECT_EQ(kept, 0) << lines(r);
    EXPECT_LE(r.counts.back(), 3) << lines(r);
  }
}

TEST(ScalingPolicyTest, AnOversuppliedJobShrinksAndTheShrinkIsJudged) {
  // 4 workers paid over 3 (5,000 each) until the trainer slowed to 12,000
  // samples/s: the autosizer's oversupply rule asks for one fewer, which
  // costs nothing (the trainer still takes 12,000) and is kept.
  double demand = 40000;
  auto job = fixed([](int k) { return 5000.0 * k; }, 0);
  AutosizerConfig cfg = settings(4);
  ScalingPolicy p(cfg);
  int k = 3;
  std::string why;
  int i = 0;
  auto step = [&] {
    job.demand = [&demand](double) { return demand; };
    ScalingDecision d = p.observe(job.window(i * kInterval, k), i * kInterval, false);
    ++i;
    if (!d.why.empty()) why = d.why;
    k += d.change;
  };
  for (int n = 0; n < 12; ++n) step();
  ASSERT_EQ(k, 4) << why;
  demand = 12000;
  for (int n = 0; n < 24 && why.find("removed") == std::string::npos; ++n) step();
  EXPECT_EQ(k, 3) << why;
  EXPECT_NE(why.find("the 1 workers removed did not pay: keeping 3"), std::string::npos) << why;
  EXPECT_EQ(p.knee(), 3);
}

// A probe below a knee whose workers pay brings them back at once: linear
// to 6 (1,000 each), from 6 workers with a knee found above them.
TEST(ScalingPolicyTest, AProbeBelowTheKneeWhoseWorkersPaidComesBack) {
  auto job = fixed([](int k) { return 1000.0 * std::min(k, 6); }, 1e12);
  Trace r = run_job(job, settings(8), 6, 240);
  int below = 0, back = 0;
  for (const auto& l : r.lines) {
    below += l.find("below the knee 6") != std::string::npos;
    back += l.find("workers removed paid: back to 6") != std::string::npos;
  }
  EXPECT_GE(below, 1) << lines(r);
  EXPECT_EQ(back, below) << lines(r);
  EXPECT_EQ(r.counts.back(), 6) << lines(r);
}

TEST(ScalingPolicyTest, FollowingATargetOnlyUndoes) {
  auto job = fixed([](int k) { return 5000.0 * std::min(k, 2); }, 30000);
  ScalingPolicy p(settings(8));
  int k = 2;
  for (int i = 0; i < 4; ++i) EXPECT_EQ(p.observe(job.window(i * kInterval, k), i * kInterval, false, true).change, 0);
  k = 6;  // goldminer-ctld's target
  ScalingDecision d;
  int i = 4;
  for (; i < 12 && d.change == 0; ++i) d = p.observe(job.window(i * kInterval, k), i * kInterval, false, true);
  EXPECT_EQ(d.change, -4) << d.why;
  EXPECT_EQ(p.knee(), 2);
  EXPECT_EQ(p.ceiling(i * kInterval), 2);
  EXPECT_TRUE(p.probing(i * kInterval + 61));
  EXPECT_EQ(p.ceiling(i * kInterval + 61), 3);
}

TEST(ScalingPolicyTest, JudgingWaitsForWorkersOnTheirWay) {
  auto job = fixed([](int k) { return 5000.0 * std::min(k, 2); }, 30000);
  ScalingPolicy p(settings(8));
  for (int i = 0; i < 4; ++i) p.observe(job.window(i * kInterval, 2), i * kInterval, false);
  // 6 asked for, 3 here and the rest still coming: not judged.
  for (int i = 4; i < 8; ++i) EXPECT_EQ(p.observe(job.window(i * kInterval, 3), i * kInterval, true).change, 0);
  EXPECT_EQ(p.knee(), -1);
}

TEST(ScalingPolicyTest, WhileNothingFlowsGrowthIsNeitherHeldNorJudged) {
  // The trainer waits for 3 workers before its first batch: 0 samples/s.
  auto job = fixed([](int k) { return k < 3 ? 0.0 : 1000.0 * k; }, 1e9);
  AutosizerConfig cfg = settings(8);
  ScalingPolicy p(cfg);
  int k = 1;
  int i = 0;
  for (; i < 6 && k < 3; ++i) k += p.observe(job.window(i * kInterval, k), i * kInterval, false).change;
  EXPECT_EQ(k, 3) << "one worker a window, unmeasured";
  EXPECT_EQ(p.knee(), -1);
}

// Two workers join a linear job (1,000 samples/s each) and start their
// producers for 30 s (six 5-s windows, longer than measure_windows): on
// cores they share, the job makes only 1,000 samples/s meanwhile. Windows
// in which a worker is still starting (QueueMetrics::starting: it asked
// for no split yet) are left out, so the growth is judged on what 4
// workers make once started, and kept; judged on the start, the same
// growth is undone. A worker still starting after kMaxStartingS (60 s)
// no longer holds the judgment back.
TEST(ScalingPolicyTest, WindowsWhileAWorkerStartsItsProducersAreLeftOut) {
  auto job = fixed([](int k) { return 1000.0 * k; }, 1e9);
  auto run = [&](bool say_starting, double starting_s) {
    ScalingPolicy p(settings(8));
    int i = 0;
    for (; i < 4; ++i) p.observe(job.window(i * kInterval, 2), i * kInterval, false, true);
    const double joined = i * kInterval;
    ScalingDecision d;
    for (; i < 40 && d.change == 0; ++i) {
      const double t = i * kInterval;
      QueueMetrics m = job.window(t, 4);
      if (t - joined < starting_s) {
        m.samples_per_s = 1000, m.consumption_rate = m.arrival_rate = 10;
        m.warming = 2;
        m.starting = say_starting ? 2 : 0;
      }
      d = p.observe(m, t, false, true);
    }
    return std::make_pair(d.change, p.knee());
  };
  EXPECT_EQ(run(true, 30), std::make_pair(0, -1)) << "kept: judged once started";
  EXPECT_EQ(run(false, 30).first, -2) << "undone when the start is measured as the count";
  EXPECT_EQ(run(true, 1000).first, -2) << "a worker starting for longer than kMaxStartingS is not waited for";
}

// Under goldminer-ctld (follow), before any knee, the claim is capped by
// the exploring cap: 1, then, measured at the whole cap with the trainer
// waiting, raised by the workers that would bring the trainer to its
// demand at one worker's rate, at most doubling. Linear 1,000 samples/s a
// worker, a trainer that takes 6,500: 1 -> 2 -> 4 -> 7 (3 more bring 4's
// 4,000 to its 6,500, within doubling); the step to 7 is then judged as
// any growth: its gain, 2,500, is worth 2.5 workers at one worker's rate,
// so the knee is 6 and the claim's ceiling is the knee's from then on.
TEST(ScalingPolicyTest, FollowingBeforeAKneeTheClaimIsCappedByTheExploringCap) {
  auto job = fixed([](int k) { return 1000.0 * k; }, 6500);
  ScalingPolicy p(settings(16));
  EXPECT_EQ(p.claim_ceiling(0), 1);
  EXPECT_EQ(p.ceiling(0), 16) << "the controller's own ceiling is the knee's, none yet";
  std::vector<int> caps{1};
  int k = 1;
  int i = 0;
  for (; i < 80 && p.knee() < 0; ++i) {
    p.observe(job.window(i * kInterval, k), i * kInterval, false, true);
    if (p.knee() < 0 && p.claim_ceiling(i * kInterval) != caps.back()) caps.push_back(p.claim_ceiling(i * kInterval));
    k = p.claim_ceiling(i * kInterval);  // goldminer-ctld grants the cap
  }
  EXPECT_EQ(caps, (std::vector<int>{1, 2, 4, 7}));
  EXPECT_EQ(p.knee(), 6);
  EXPECT_EQ(p.claim_ceiling(i * kInterval), p.ceiling(i * kInterval));
  // Nothing flowing (a trainer that waits for 4 workers before its first
  // batch): the cap doubles each window the job holds all of it.
  auto waiting = fixed([](int k) { return k < 4 ? 0.0 : 1000.0 * k; }, 1e9);
  ScalingPolicy q(settings(16));
  k = 1;
  int windows = 0;
  for (; windows < 10 && k < 4; ++windows) {
    q.observe(waiting.window(windows * kInterval, k), windows * kInterval, false, true);
    k = q.claim_ceiling(windows * kInterval);
  }
  EXPECT_EQ(k, 4);
  EXPECT_LE(windows, 4) << "1 -> 2 -> 4, a window or two each";
}

// Under goldminer-ctld the knee is soft: a second worker that adds 30 % of
// the first's rate (under the pay rule's 50 %, over useful_fraction's 10
// %) is kept when goldminer-ctld grants it, and the third, which adds
// nothing, is not. On its own the same job keeps the pay rule: 1 worker.
TEST(ScalingPolicyTest, UnderGoldminerCtldTheKneeIsSoft) {
  const auto curve = [](int k) { return k <= 1 ? 1000.0 * k : 1300.0; };
  for (const bool follow : {true, false}) {
    auto job = fixed(curve, 5000);
    ScalingPolicy p(settings(8));
    int k = 1;
    std::string counts;
    int held_above_two = 0;
    for (int i = 0; i < 400; ++i) {
      const double t = i * kInterval;
      const ScalingDecision d = p.observe(job.window(t, k), t, false, follow);
      // goldminer-ctld grants what the claim allows (no other job here);
      // the policy's own undo comes first.
      k = follow ? (d.change != 0 ? k + d.change : p.claim_ceiling(t)) : std::clamp(k + d.change, 1, 8);
      if (i >= 200) held_above_two += k > 2;
      if (counts.empty() || counts.back() - '0' != k) counts += static_cast<char>('0' + k);
    }
    SCOPED_TRACE(std::string(follow ? "follow" : "alone") + ", counts " + counts);
    EXPECT_EQ(p.knee(), follow ? 2 : 1);
    EXPECT_EQ(k, follow ? 2 : 1);
    // In the last 1,000 s: only probes above the knee (a back-off of at
    // least 240 s by then, each judged within 8 windows).
    EXPECT_LE(held_above_two, 3 * 8) << counts;
  }
}

// A curve is keyed by placement: workers added on the trainer's own node
// (they share its cores: each adds nothing) did not pay, but workers on
// other nodes do (1,000 samples/s each, linear to 8). The growth is undone
// there and later workers go elsewhere; the knee it set is probed again
// after the first back-off, and the job then climbs to 8.
TEST(ScalingPolicyTest, AKneeLearnedOnTheTrainersNodeDoesNotCapWorkersElsewhere) {
  ScalingPolicy p(settings(8));
  auto job = fixed([](int k) { return 1000.0 * k; }, 1e9);
  int k = 2, local = 0;
  bool avoided = false;
  int i = 0, undone_at = -1;
  for (; i < 200 && !(avoided && k == 8 && p.knee() < 0 && local == 0); ++i) {
    const double t = i * kInterval;
    QueueMetrics m = job.window(t, k - local);  // the local ones add nothing
    m.workers = m.joined = k;
    m.local_workers = local;
    const ScalingDecision d = p.observe(m, t, false);
    if (d.avoid_trainer_node) {
      EXPECT_FALSE(avoided) << "once";
      avoided = true;
      undone_at = i;
      EXPECT_NE(d.why.find("back to 2, the knee, removing the 6 on the trainer's node; later workers start on other nodes"), std::string::npos) << d.why;
      EXPECT_EQ(k + d.change, 2);
      EXPECT_EQ(p.knee(), 2);
      EXPECT_FALSE(p.probing(t + 59));
      EXPECT_EQ(p.ceiling(t + 61), 3) << "probed again after the first back-off, not a doubled one";
    }
    const int next = std::clamp(k + d.change, 1, 8);
    // Before it is avoided, new workers land on the trainer's node;
    // removals take those there first; later ones start elsewhere.
    if (next > k && !avoided) local += next - k;
    if (next < k) local = std::max(0, local - (k - next));
    k = next;
  }
  EXPECT_TRUE(avoided);
  EXPECT_EQ(k, 8) << "after " << i << " windows";
  EXPECT_LT(i - undone_at, 60) << "within 5 minutes of the undo";
}

TEST(ScalingPolicyTest, ModelPrediction) {
  QueueMetrics m;
  m.consumption_rate = 100, m.samples_per_s = 10000, m.per_worker_rate = 50, m.trainer_wait_fraction = 0.5;
  // Demand 200 batches/s: 1 more worker +50, 4 more only the 100 left.
  EXPECT_DOUBLE_EQ(predicted_gain(m, 1), 5000);
  EXPECT_DOUBLE_EQ(predicted_gain(m, 4), 10000);
  m.per_worker_rate = 0;
  EXPECT_DOUBLE_EQ(predicted_gain(m, 1), 0);
}

}  // namespace
}  // namespace goldminer
