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

// goldminer-sim job (see goldminer-sim(1), JOB SCENARIOS).
int job_main(int argc, char** argv) {
  SimJobArgs a;
  CommandLine command_line;
  if (int rc = parse_main_command_line(sim_job_command(&a), argc, argv, &command_line); rc >= 0) return rc;
  const JobRunOptions& o = a.options;
  if (!(o.duration_s > 0) || !(o.window_s > 0) || o.duration_s / o.window_s > 1e7)
    return fail("goldminer-sim job: --duration and --window-s must be > 0 (at most 10^7 windows)", 2);
  if (o.max_workers < 1 || o.max_workers > 65536 || o.start_workers < 1 || o.start_workers > o.max_workers)
    return fail("goldminer-sim job: --max-workers must be 1..65536 and --start-workers 1..--max-workers", 2);
  if (!(o.noise >= 0) || !(o.noise < 1)) return fail("goldminer-sim job: --noise: invalid value: expected [0, 1)", 2);
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

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "job") return job_main(argc - 1, argv + 1);
  SimArgs a;
  CommandLine command_line;
  if (int rc = parse_main_command_line(sim_command(&a), argc, argv, &command_line); rc >= 0) return rc;
  const std::string &trace = a.trace, &nodes_path = a.nodes_path, &policy_text = a.policy_text, &plot = a.plot,
                    &demand_text = a.demand_text, &jobs_csv = a.jobs_csv;
  const int gpus = a.gpus;
  const uint64_t seed = a.seed;
  SimOptions& options = a.options;
  auto policy = parse_policy(policy_text);
  if (!policy.ok()) return fail(policy.status().message(), 2);
  options.policy = *policy;
  options.seed = seed;
  if (options.load < 0) return fail("goldminer-sim: --load: invalid value: expected >= 0", 2);
  if (options.model.remote_efficiency <= 0 || options.model.remote_efficiency > 1)
    return fail("goldminer-sim: --remote-efficiency: invalid value: expected (0, 1]", 2);
  if (options.model.cpus_per_dw <= 0)
    return fail("goldminer-sim: --cpus-per-dw: invalid value: expected > 0", 2);
  auto demand = parse_demand_model(demand_text);
  if (!demand.ok()) return fail(demand.status().message(), 2);
  options.model.demand_model = *demand;
  if (options.model.cpu_demand_factor < 1)
    return fail("goldminer-sim: --cpu-demand-factor: invalid value: expected >= 1", 2);
  if (*demand == DemandModel::kCalibrated && command_line.given("cpu-demand-factor"))
    return fail("goldminer-sim: --cpu-demand-factor applies to --demand-model request only", 2);
  const CalibratedDemand& cd = options.model.calibrated;
  if (!(cd.median_cpus_per_gpu > 0) || !(cd.sigma >= 0) || !(cd.max_cpus_per_gpu >= cd.median_cpus_per_gpu))
    return fail("goldminer-sim: --demand-median must be > 0, --demand-sigma >= 0 and --demand-max >= "
                "--demand-median",
                2);
  if (!(options.model.worker_start_s >= 0) || !(options.model.job_start_s >= 0) || !(options.model.dispatch_s >= 0))
    return fail("goldminer-sim: --worker-start-s, --job-start-s and --dispatch-s must be >= 0", 2);
  auto curve = parse_speed_curve(a.speed_curve_text);
  if (!curve.ok()) return fail(curve.status().message(), 2);
  options.model.speed_curve = *curve;
  if (!(options.model.measure_noise >= 0) || !(options.model.measure_noise < 1))
    return fail("goldminer-sim: --measure-noise: invalid value: expected [0, 1)", 2);
  if (!(options.model.window_s > 0)) return fail("goldminer-sim: --window-s: invalid value: expected > 0", 2);
  if (options.model.dw_floor < 0 || options.model.dw_max < 1)
    return fail("goldminer-sim: --dw-floor must be >= 0 and --dw-max >= 1", 2);

  auto pods = read_pods(trace);
  if (!pods.ok()) return fail("goldminer-sim: " + pods.status().message(), 1);
  auto nodes = read_nodes(nodes_path);
  if (!nodes.ok()) return fail("goldminer-sim: " + nodes.status().message(), 1);
  ClusterSample sample = sample_cluster(*pods, *nodes, gpus, seed);

  auto result = simulate(sample.pods, sample.nodes, options);
  if (!result.ok()) return fail(result.status().message(), 1);
  if (command_line.given("json"))
    std::printf("%s\n", to_json(*result).c_str());
  else
    print_human(*result);

  if (!jobs_csv.empty()) {
    std::ofstream out(jobs_csv);
    out << job_records_csv(*result);
    if (!out.flush()) return fail("goldminer-sim: --jobs-csv: cannot write " + jobs_csv, 1);
  }
  if (!plot.empty()) {
    std::vector<Series> series;
    std::vector<Policy> plotted = {Policy::kBundled, Policy::kGoldminerJobLevel, Policy::kGoldminer};
    if (options.policy == Policy::kGoldminerMeasured) plotted.push_back(options.policy);
    for (Policy p : plotted) {
      if (p == options.policy) {
        series.emplace_back(policy_name(p), result->timeline);
        continue;
      }
      SimOptions other = options;
      other.policy = p;
      auto r = simulate(sample.pods, sample.nodes, other);
      if (!r.ok()) return fail(r.status().message(), 1);
      series.emplace_back(policy_name(p), r->timeline);
    }
    char title[160];
    std::snprintf(title, sizeof(title), "GPU allocation, %.0f GPUs, offered load %.2f", result->gpus,
                  result->offered_load);
    std::ofstream out(plot);
    out << render_allocation_svg(series, title);
    if (!out.flush()) return fail("goldminer-sim: --plot: cannot write " + plot, 1);
  }
  return 0;
}
