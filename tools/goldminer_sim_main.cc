// goldminer-sim: replays a GPU cluster trace under one scheduling policy
// and prints job completion times and GPU allocation (see goldminer-sim(1)).
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "sim/job_scenario.h"
#include "sim/sampling.h"
#include "sim/simulator.h"
#include "sim/svg_plot.h"
#include "sim/trace.h"
#include "tools/goldminer_sim_options.h"

using namespace goldminer;
using namespace goldminer::sim;

namespace {

int fail(const std::string& message, int code) {
  std::fprintf(stderr, "%s\n", message.c_str());
  return code;
}

void print_human(const SimResult& r) {
  std::printf("policy %s: %d jobs (%d with GPUs) on %.0f GPUs, offered load %.3f\n", r.policy.c_str(),
              r.jobs, r.gpu_jobs, r.gpus, r.offered_load);
  std::printf("  jct avg %.0f s (GPU jobs %.0f s), p50 %.0f s, p95 %.0f s, p99 %.0f s\n", r.avg_jct_s,
              r.avg_jct_gpu_s, r.p50_jct_s, r.p95_jct_s, r.p99_jct_s);
  std::printf("  queue avg %.0f s, waiting for CPUs with GPUs free %.0f s per GPU job (%.0f%% of GPU jobs' "
              "waiting)\n",
              r.avg_queue_s, r.cpu_short_wait_s, 100 * r.gpu_wait_cpu_short_fraction);
  std::printf("  GPU jobs below full speed with their CPU request: %.0f%%\n", 100 * r.cpu_starved_share);
  std::printf("  data workers held %.0f CPU-s, %.0f CPU-s of them by workers that did not pay (under half of "
              "a first worker's gain), %.0f CPU-s by workers that added nothing",
              r.worker_cpu_s, r.unpaying_worker_cpu_s, r.wasted_worker_cpu_s);
  if (r.policy == "goldminer-measured")
    std::printf("; %d growths undone, %d jobs ended with their knee above their useful workers", r.undone_growths,
                r.knees_above_useful);
  std::printf("\n");
  std::printf("  GPU allocation %.1f%%, effective %.1f%%, makespan %.0f s\n", 100 * r.gpu_alloc_rate,
              100 * r.gpu_effective_rate, r.makespan_s);
  std::printf("  %lld events, %.1f us of scheduling per event; skipped %d never-run and %d "
              "unplaceable pods\n",
              static_cast<long long>(r.events), r.decision_us_per_event, r.never_ran, r.unplaceable);
}

// Option KEY's value as the user wrote it, else its value now (its default).
std::string written(const CommandLine& command_line, const std::string& key, double value) {
  const std::string* text = command_line.text(key);
  return text != nullptr ? *text : default_text(value);
}

// What goldminer-sim job's rows cannot check: the options that relate.
Status check_job_options(const JobRunOptions& o, const CommandLine& command_line) {
  if (o.duration_s / o.window_s > 1e7)
    return Status::error("goldminer-sim job: --duration: invalid value '" + written(command_line, "duration", o.duration_s) +
                         "': expected at most 10^7 windows of --window-s");
  if (o.start_workers > o.max_workers)
    return Status::error("goldminer-sim job: --start-workers: invalid value '" + std::to_string(o.start_workers) +
                         "': expected at most --max-workers (" + std::to_string(o.max_workers) + ")");
  return Status();
}

// goldminer-sim job (see goldminer-sim(1), JOB SCENARIOS).
int job_main(int argc, char** argv) {
  SimJobArgs a;
  CommandLine command_line;
  if (int rc = parse_main_command_line(sim_job_command(&a), argc, argv, &command_line); rc >= 0) return rc;
  const JobRunOptions& o = a.options;
  if (Status st = check_job_options(o, command_line); !st.ok()) return fail(st.message(), 2);
  std::ifstream in(a.scenario);
  if (!in) return fail("goldminer-sim job: --scenario: cannot read " + a.scenario, 1);
  std::stringstream text;
  text << in.rdbuf();
  auto scenario = JobScenario::parse(text.str(), a.scenario);
  if (!scenario.ok()) return fail("goldminer-sim job: " + scenario.status().message(), 1);
  const auto windows = run_job_scenario(*scenario, o);
  const bool json = command_line.given("json");
  for (const ScenarioWindow& w : windows) {
    if (json)
      std::printf("%s\n", window_json(w).c_str());
    else if (!w.why.empty())
      std::printf("%.0f s, %d workers, %.0f samples/s: %s\n", w.t_s, w.workers, w.samples_per_s, w.why.c_str());
  }
  if (!json && !windows.empty())
    std::printf("at %.0f s: %d workers, %.0f samples/s\n", windows.back().t_s, windows.back().workers + windows.back().change,
                windows.back().samples_per_s);
  return 0;
}

// The named models into a.options, and what the rows cannot check: the
// options that relate to each other.
Status complete_options(SimArgs& a, const CommandLine& command_line) {
  SimOptions& options = a.options;
  auto policy = parse_policy(a.policy_text);
  if (!policy.ok()) return policy.status();
  options.policy = *policy;
  options.seed = a.seed;
  auto demand = parse_demand_model(a.demand_text);
  if (!demand.ok()) return demand.status();
  options.model.demand_model = *demand;
  if (*demand == DemandModel::kCalibrated && command_line.given("cpu-demand-factor"))
    return Status::error("goldminer-sim: --cpu-demand-factor applies to --demand-model request only");
  const CalibratedDemand& cd = options.model.calibrated;
  if (!(cd.max_cpus_per_gpu >= cd.median_cpus_per_gpu))
    return Status::error("goldminer-sim: --demand-max: invalid value '" + written(command_line, "demand-max", cd.max_cpus_per_gpu) +
                         "': expected at least --demand-median (" + default_text(cd.median_cpus_per_gpu) + ")");
  auto curve = parse_speed_curve(a.speed_curve_text);
  if (!curve.ok()) return curve.status();
  options.model.speed_curve = *curve;
  return Status();
}

// --jobs-csv: every replayed job.
Status write_jobs_csv(const std::string& path, const SimResult& result) {
  std::ofstream out(path);
  out << job_records_csv(result);
  if (!out.flush()) return Status::error("goldminer-sim: --jobs-csv: cannot write " + path);
  return Status();
}

// --plot: GPU allocation over time of bundled, goldminer-joblevel and
// goldminer (and --policy), each replayed on the same sample.
Status write_plot(const std::string& path, const ClusterSample& sample, const SimOptions& options,
                  const SimResult& result) {
  std::vector<Series> series;
  std::vector<Policy> plotted = {Policy::kBundled, Policy::kGoldminerJobLevel, Policy::kGoldminer};
  if (options.policy == Policy::kGoldminerMeasured) plotted.push_back(options.policy);
  for (Policy p : plotted) {
    if (p == options.policy) {
      series.emplace_back(policy_name(p), result.timeline);
      continue;
    }
    SimOptions other = options;
    other.policy = p;
    auto r = simulate(sample.pods, sample.nodes, other);
    if (!r.ok()) return r.status();
    series.emplace_back(policy_name(p), r->timeline);
  }
  char title[160];
  std::snprintf(title, sizeof(title), "GPU allocation, %.0f GPUs, offered load %.2f", result.gpus,
                result.offered_load);
  std::ofstream out(path);
  out << render_allocation_svg(series, title);
  if (!out.flush()) return Status::error("goldminer-sim: --plot: cannot write " + path);
  return Status();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "job") return job_main(argc - 1, argv + 1);
  SimArgs a;
  CommandLine command_line;
  if (int rc = parse_main_command_line(sim_command(&a), argc, argv, &command_line); rc >= 0) return rc;
  if (Status st = complete_options(a, command_line); !st.ok()) return fail(st.message(), 2);
  auto pods = read_pods(a.trace);
  if (!pods.ok()) return fail("goldminer-sim: " + pods.status().message(), 1);
  auto nodes = read_nodes(a.nodes_path);
  if (!nodes.ok()) return fail("goldminer-sim: " + nodes.status().message(), 1);
  const ClusterSample sample = sample_cluster(*pods, *nodes, a.gpus, a.seed);
  auto result = simulate(sample.pods, sample.nodes, a.options);
  if (!result.ok()) return fail(result.status().message(), 1);
  if (command_line.given("json"))
    std::printf("%s\n", to_json(*result).c_str());
  else
    print_human(*result);
  Status written = a.jobs_csv.empty() ? Status() : write_jobs_csv(a.jobs_csv, *result);
  if (written.ok() && !a.plot.empty()) written = write_plot(a.plot, sample, a.options, *result);
  return written.ok() ? 0 : fail(written.message(), 1);
}
