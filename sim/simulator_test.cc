#include "sim/simulator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "sim/sampling.h"
#include "sim/test_util.h"

namespace goldminer::sim {
namespace {

TracePod pod(const std::string& name, int64_t cpu, int gpus, int64_t created, int64_t run) {
  TracePod p;
  p.name = name;
  p.cpu_milli = cpu;
  p.num_gpu = gpus;
  p.gpu_milli = gpus > 0 ? 1000 : 0;
  p.creation_time = created;
  p.scheduled = true;
  p.scheduled_time = created;
  p.deletion_time = created + run;
  return p;
}

SimResult run(const std::vector<TracePod>& pods, const std::vector<TraceNode>& nodes, Policy policy,
              double load = 0) {
  SimOptions o;
  o.policy = policy;
  o.load = load;
  o.model.demand_model = DemandModel::kRequest;  // the request is right: only placement differs
  auto r = simulate(pods, nodes, o);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : SimResult();
}

// A CPU-only job takes the GPU node's CPUs under bundled placement (the
// small CPU node cannot hold it) and strands its GPUs; goldminer keeps the
// reserve (the CPU job waits instead) and runs the GPU job's pre-processing
// on data workers.
TEST(SimulatorTest, BundledStrandsGpusGoldminerDoesNot) {
  std::vector<TraceNode> nodes = {{"g1", 24000, 1, 8, "x"}, {"c1", 8000, 1, 0, ""}};
  std::vector<TracePod> pods = {pod("cpu", 12000, 0, 0, 1000), pod("gpu", 16000, 1, 1, 100)};

  SimResult bundled = run(pods, nodes, Policy::kBundled);
  EXPECT_EQ(bundled.jobs, 2);
  EXPECT_NEAR(bundled.avg_jct_gpu_s, 1099, 1e-6) << "waits for the CPU job to end";
  EXPECT_NEAR(bundled.cpu_short_wait_s, 999, 1e-6);

  // Under goldminer the GPU job keeps 1 CPU; its 15 CPUs of pre-processing
  // get 12 one-CPU workers (4 beyond g1's reserve of 7, 8 on c1):
  // speed 12 * 0.9 / 15 = 0.72, once they deliver (worker_start_s).
  const double ws = JobModel().worker_start_s;
  SimResult gm = run(pods, nodes, Policy::kGoldminer);
  EXPECT_NEAR(gm.avg_jct_gpu_s, ws + 100 / 0.72, 1e-6);
  EXPECT_NEAR(gm.cpu_short_wait_s, 0, 1e-9);
  EXPECT_NEAR(gm.avg_jct_s, (1000 + ws + 100 / 0.72) / 2, 1e-6);

  SimResult joblevel = run(pods, nodes, Policy::kGoldminerJobLevel);
  EXPECT_NEAR(joblevel.avg_jct_gpu_s, ws + 100 / 0.72, 1e-6) << "the autosizer converges to 12";
}

// The share of GPU jobs' waiting spent with enough GPUs free (for CPUs):
// all of it in the first case, none when the GPUs themselves are taken.
TEST(SimulatorTest, CountsTheShareOfGpuWaitingSpentShortOfCpus) {
  std::vector<TraceNode> nodes = {{"g1", 24000, 1, 8, "x"}, {"c1", 8000, 1, 0, ""}};
  SimResult cpu_short = run({pod("cpu", 12000, 0, 0, 1000), pod("gpu", 16000, 1, 1, 100)}, nodes, Policy::kBundled);
  EXPECT_NEAR(cpu_short.gpu_wait_cpu_short_fraction, 1.0, 1e-9);
  SimResult gpu_short = run({pod("big", 1000, 8, 0, 1000), pod("gpu", 1000, 1, 1, 100)}, nodes, Policy::kBundled);
  EXPECT_GT(gpu_short.avg_jct_gpu_s, 500) << "the second waited";
  EXPECT_NEAR(gpu_short.gpu_wait_cpu_short_fraction, 0.0, 1e-9);
  EXPECT_NE(to_json(gpu_short).find("\"gpu_wait_cpu_short_fraction\": 0.0000"), std::string::npos);
}

// The calibrated demand draw: deterministic per pod and seed, with the
// documented median, share above 8 CPUs per GPU and cap.
TEST(SimulatorTest, CalibratedDemandFollowsItsStatedDistribution) {
  CalibratedDemand d;
  std::vector<double> draws;
  int above8 = 0, at_cap = 0;
  for (int i = 0; i < 40000; ++i) {
    TracePod p = pod("pod-" + std::to_string(i), 8000, 1, 0, 10);
    double v = calibrated_cpus_per_gpu(p, d, 1);
    EXPECT_EQ(v, calibrated_cpus_per_gpu(p, d, 1));
    draws.push_back(v);
    above8 += v > 8;
    at_cap += v >= 64;
    ASSERT_LE(v, 64);
  }
  std::sort(draws.begin(), draws.end());
  EXPECT_NEAR(draws[draws.size() / 2], 12, 0.3);
  EXPECT_NEAR(above8 / 40000.0, 0.70, 0.01);
  EXPECT_NEAR(at_cap / 40000.0, 0.013, 0.003);
  TracePod p = pod("pod-1", 8000, 1, 0, 10);
  EXPECT_NE(calibrated_cpus_per_gpu(p, d, 1), calibrated_cpus_per_gpu(p, d, 2)) << "the seed changes the draw";
}

// Under the calibrated model a GPU job whose request falls short of its
// drawn need ran slower in the trace; goldminer's workers bring it to full
// speed.
TEST(SimulatorTest, CalibratedStarvedJobsRunAtFullSpeedWithWorkers) {
  std::vector<TraceNode> nodes = {{"g1", 16000, 1, 1, "x"}, {"c1", 96000, 1, 0, ""}};
  SimOptions o;  // calibrated by default
  // A pod whose draw is above its 4 CPUs per GPU.
  TracePod starved;
  double need = 0;
  for (int i = 0; need <= 6; ++i) {
    starved = pod("job-" + std::to_string(i), 4000, 1, 0, 200);
    need = calibrated_cpus_per_gpu(starved, o.model.calibrated, o.seed);
  }
  o.policy = Policy::kBundled;
  auto bundled = simulate({starved}, nodes, o);
  ASSERT_TRUE(bundled.ok()) << bundled.status().message();
  EXPECT_NEAR(bundled->avg_jct_s, 200, 1e-6) << "the trace as it ran";
  EXPECT_DOUBLE_EQ(bundled->cpu_starved_share, 1.0);
  o.policy = Policy::kGoldminer;
  auto gm = simulate({starved}, nodes, o);
  ASSERT_TRUE(gm.ok()) << gm.status().message();
  const double work = 200 * 4 / (std::round(need * 1000) / 1000);
  EXPECT_NEAR(gm->avg_jct_s, o.model.worker_start_s + work, 0.01) << "need " << need << " CPUs";
}

TEST(SimulatorTest, CpuJobsThatOnlyFitInTheReserveAreUnplaceableUnderGoldminer) {
  std::vector<TraceNode> nodes = {{"g1", 16000, 1, 8, "x"}};
  std::vector<TracePod> pods = {pod("cpu", 12000, 0, 0, 10)};
  EXPECT_EQ(run(pods, nodes, Policy::kBundled).jobs, 1);
  SimResult gm = run(pods, nodes, Policy::kGoldminer);
  EXPECT_EQ(gm.jobs, 0);
  EXPECT_EQ(gm.unplaceable, 1);
}

TEST(SimulatorTest, TooFewWorkerCpusSlowTheJobDown) {
  // 16 CPUs, 8 GPUs: one job with 1 GPU and 10 CPUs keeps 1; the reserve
  // for 7 free GPUs leaves 8 worker CPUs for 9 CPUs of pre-processing:
  // speed 8 * 0.9 / 9 = 0.8, after worker_start_s at speed 0.
  const double ws = JobModel().worker_start_s;
  std::vector<TraceNode> nodes = {{"g1", 16000, 1, 8, "x"}};
  SimResult gm = run({pod("gpu", 10000, 1, 0, 100)}, nodes, Policy::kGoldminer);
  EXPECT_NEAR(gm.avg_jct_s, ws + 125, 1e-6);
  EXPECT_NEAR(gm.gpu_effective_rate / gm.gpu_alloc_rate, 0.8 * 125 / (ws + 125), 1e-9);
  SimResult bundled = run({pod("gpu", 10000, 1, 0, 100)}, nodes, Policy::kBundled);
  EXPECT_NEAR(bundled.avg_jct_s, 100, 1e-6);
  EXPECT_NEAR(bundled.gpu_alloc_rate, 1.0 / 8, 1e-9);
}

TEST(SimulatorTest, CpuStarvedJobsRunFasterWithDataWorkers) {
  // The job asked for 8 CPUs, 1 for its trainer; its pre-processing needs
  // twice the other 7. Bundled runs it at 7/14 and the trace saw it run
  // 150 s: 75 s of work at full speed. goldminer gives it
  // ceil(14 / 0.9) = 16 one-CPU workers on the CPU node.
  std::vector<TraceNode> nodes = {{"g1", 16000, 1, 8, "x"}, {"c1", 32000, 1, 0, ""}};
  SimOptions o;
  o.model.demand_model = DemandModel::kRequest;
  o.model.cpu_demand_factor = 2.0;
  o.policy = Policy::kBundled;
  auto bundled = simulate({pod("gpu", 8000, 1, 0, 150)}, nodes, o);
  ASSERT_TRUE(bundled.ok()) << bundled.status().message();
  EXPECT_NEAR(bundled->avg_jct_s, 150, 1e-6) << "replays the trace as it ran";
  EXPECT_NEAR(bundled->gpu_effective_rate / bundled->gpu_alloc_rate, 0.5, 1e-9);
  o.policy = Policy::kGoldminer;
  auto gm = simulate({pod("gpu", 8000, 1, 0, 150)}, nodes, o);
  ASSERT_TRUE(gm.ok()) << gm.status().message();
  EXPECT_NEAR(gm->avg_jct_s, o.model.worker_start_s + 75, 1e-6);
}

// A job makes progress job_start_s after it starts; its data workers
// deliver worker_start_s after that (those it starts with) or after they
// are allocated (later ones), and hold their CPUs meanwhile.
TEST(SimulatorTest, JobsAndWorkersStartAfterTheirLatencies) {
  std::vector<TraceNode> nodes = {{"g1", 16000, 1, 2, "x"}, {"c1", 12000, 1, 0, ""}};
  SimOptions o;
  o.model.demand_model = DemandModel::kRequest;
  o.model.remote_efficiency = 1;
  o.model.job_start_s = 3;
  o.model.worker_start_s = 5;
  o.policy = Policy::kBundled;
  auto bundled = simulate({pod("a", 10000, 1, 0, 100)}, nodes, o);
  ASSERT_TRUE(bundled.ok()) << bundled.status().message();
  EXPECT_NEAR(bundled->avg_jct_s, 3 + 100, 1e-6);
  EXPECT_NEAR(bundled->gpu_effective_rate / bundled->gpu_alloc_rate, 100.0 / 103, 1e-9);
  // Dispatched 1.5 s after it arrives: it waits that long (queue time, and
  // a GPU job waiting while the other GPU is free: the contended share).
  o.model.dispatch_s = 1.5;
  auto dispatched = simulate({pod("a", 10000, 1, 0, 100)}, nodes, o);
  ASSERT_TRUE(dispatched.ok()) << dispatched.status().message();
  EXPECT_NEAR(dispatched->avg_jct_s, 1.5 + 3 + 100, 1e-6);
  EXPECT_NEAR(dispatched->avg_queue_s, 1.5, 1e-6);
  EXPECT_NEAR(dispatched->contended_share, 1.5 / 104.5, 1e-9);
  EXPECT_NEAR(dispatched->gpu_wait_cpu_short_fraction, 0, 1e-9) << "it waited, but not for CPUs";
  o.model.dispatch_s = 0;
  // Alone: 9 CPUs of pre-processing, 9 one-CPU workers deliver from 3 + 5 s.
  o.policy = Policy::kGoldminer;
  auto alone = simulate({pod("a", 10000, 1, 0, 100)}, nodes, o);
  ASSERT_TRUE(alone.ok()) << alone.status().message();
  EXPECT_NEAR(alone->avg_jct_s, 3 + 5 + 100, 1e-6);
  // Worker CPUs for one only: g1 (4 CPUs) keeps 1 per GPU, c1 has 10.
  // B arrives at 50 s while A runs with 9 workers; the 12 are shared, so A
  // is drained at once and slows down, and B's workers deliver 3 + 5 s
  // after it starts.
  nodes = {{"g1", 4000, 1, 2, "x"}, {"c1", 10000, 1, 0, ""}};
  auto two = simulate({pod("a", 10000, 1, 0, 100), pod("b", 10000, 1, 50, 100)}, nodes, o);
  ASSERT_TRUE(two.ok()) << two.status().message();
  ASSERT_EQ(two->job_records.size(), 2u);
  const JobRecord &a = two->job_records[0], &b = two->job_records[1];
  EXPECT_NEAR(a.start_s, 0, 1e-9);
  EXPECT_NEAR(b.start_s, 50, 1e-9) << "no queue: the GPUs are free";
  EXPECT_GT(a.finish_s, 108) << "slowed from 50 s on";
  EXPECT_GT(b.finish_s, 50 + 8 + 100) << "never at full speed while A runs";
}

TEST(SimulatorTest, JobsWithoutPreprocessingCpusAreNotSlowedByTheFactor) {
  // 1 CPU, all of it the trainer's: nothing to pre-process, full speed.
  std::vector<TraceNode> nodes = {{"g1", 16000, 1, 8, "x"}};
  SimOptions o;
  o.model.demand_model = DemandModel::kRequest;
  o.model.cpu_demand_factor = 3.0;
  for (Policy p : {Policy::kBundled, Policy::kGoldminer}) {
    o.policy = p;
    auto r = simulate({pod("gpu", 1000, 1, 0, 100)}, nodes, o);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_NEAR(r->avg_jct_s, 100, 1e-6) << policy_name(p);
  }
}

TEST(SimulatorTest, SkipsPodsThatNeverRanOrFitNowhere) {
  std::vector<TraceNode> nodes = {{"g1", 16000, 1, 2, "x"}};
  TracePod pending = pod("pending", 1000, 1, 0, 10);
  pending.scheduled = false;
  SimResult r = run({pending, pod("huge", 1000, 8, 0, 10), pod("ok", 1000, 1, 0, 10)}, nodes,
                    Policy::kBundled);
  EXPECT_EQ(r.jobs, 1);
  EXPECT_EQ(r.never_ran, 1);
  EXPECT_EQ(r.unplaceable, 1);
}

TEST(SimulatorTest, LoadOverlaysShiftedCopiesOfTheTrace) {
  std::vector<TraceNode> nodes = {{"g1", 96000, 1, 8, "x"}};
  std::vector<TracePod> pods;
  for (int i = 0; i < 50; ++i) pods.push_back(pod("p" + std::to_string(i), 4000, 1, i * 1000, 400));
  SimResult natural = run(pods, nodes, Policy::kBundled);
  const double natural_load = 50.0 * 400 / (8 * 49000.0);
  EXPECT_NEAR(natural.offered_load, natural_load, 1e-9);
  EXPECT_EQ(natural.jobs, 50);
  EXPECT_NEAR(natural.avg_queue_s, 0, 1e-9);
  SimResult loaded = run(pods, nodes, Policy::kBundled, 1.2);
  EXPECT_NEAR(loaded.offered_load, 1.2, 0.02) << "the last copy is a seeded partial one";
  EXPECT_NEAR(loaded.jobs, 50 * 1.2 / natural_load, 50);
  EXPECT_GT(loaded.avg_queue_s, 0) << "above capacity, jobs queue";
}

TEST(SimulatorTest, ClusterLevelAllocationBeatsFirstComeFirstServed) {
  // Two GPU jobs, worker CPUs for only one at full speed: the cluster-level
  // policy favours the short job, first-come-first-served the early one.
  std::vector<TraceNode> nodes = {{"g1", 12000, 1, 2, "x"}};
  std::vector<TracePod> pods = {pod("long", 10000, 1, 0, 10000), pod("short", 10000, 1, 1, 100)};
  SimResult gm = run(pods, nodes, Policy::kGoldminer);
  SimResult fcfs = run(pods, nodes, Policy::kGoldminerJobLevel);
  EXPECT_LT(gm.avg_jct_s, fcfs.avg_jct_s);
}

TEST(SimulatorTest, JsonHasEveryKey) {
  std::vector<TraceNode> nodes = {{"g1", 16000, 1, 8, "x"}};
  std::string json = to_json(run({pod("a", 4000, 1, 0, 10)}, nodes, Policy::kGoldminer));
  for (const char* key : {"policy", "jobs", "gpus", "avg_jct_s", "p50_jct_s", "p95_jct_s", "p99_jct_s",
                          "avg_queue_s", "gpu_alloc_rate", "gpu_effective_rate", "cpu_short_wait_s",
                          "makespan_s", "worker_cpu_s", "wasted_worker_cpu_s", "undone_growths",
                          "knees_above_useful"})
    EXPECT_NE(json.find(std::string("\"") + key + "\": "), std::string::npos) << key;
  EXPECT_EQ(json.find("\"policy\": \"goldminer\""), 1u);
}

TEST(SimulatorTest, RealTraceAt64GpusUnderLoad) {
  std::string dir = testing::shared_data_dir();
  if (dir.empty()) GTEST_SKIP() << "../shared/data is absent: the real trace is not replayed";
  auto sample = testing::real_trace_sample(dir, 64, 1);
  ASSERT_TRUE(sample.ok()) << sample.status().message();
  SimResult bundled = run(sample->pods, sample->nodes, Policy::kBundled, 0.8);
  SimResult gm = run(sample->pods, sample->nodes, Policy::kGoldminer, 0.8);
  EXPECT_GT(bundled.avg_queue_s, 0) << "the baseline queues at load 0.8";
  EXPECT_EQ(gm.jobs, bundled.jobs) << "same replay under both policies";
  // The reserve means no GPU job ever waits for CPUs next to free GPUs.
  EXPECT_EQ(gm.cpu_short_wait_s, 0);
  EXPECT_GT(bundled.cpu_short_wait_s, 0);
  for (const SimResult* r : {&bundled, &gm}) {
    EXPECT_GT(r->gpu_alloc_rate, 0);
    EXPECT_LE(r->gpu_alloc_rate, 1.0 + 1e-9);
    EXPECT_LE(r->gpu_effective_rate, r->gpu_alloc_rate + 1e-9);
    EXPECT_LE(r->p50_jct_s, r->p95_jct_s);
    EXPECT_LE(r->p95_jct_s, r->p99_jct_s);
  }
}

}  // namespace
}  // namespace goldminer::sim
