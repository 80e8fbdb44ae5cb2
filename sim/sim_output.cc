// goldminer-sim's names of the policies and its output formats: the
// result as JSON, the job records as CSV.
#include <cstdio>
#include <string>

#include "sim/simulator.h"

namespace goldminer::sim {

Expected<Policy> parse_policy(const std::string& name) {
  if (name == "bundled") return Policy::kBundled;
  if (name == "goldminer") return Policy::kGoldminer;
  if (name == "goldminer-joblevel") return Policy::kGoldminerJobLevel;
  if (name == "goldminer-measured") return Policy::kGoldminerMeasured;
  if (name == "oracle") return Policy::kOracle;
  if (name == "cachew") return Policy::kCachew;
  return Status::error("goldminer-sim: --policy: invalid value '" + name +
                       "': expected one of bundled, goldminer, goldminer-joblevel, goldminer-measured, oracle, cachew");
}

const char* policy_name(Policy policy) {
  switch (policy) {
    case Policy::kBundled: return "bundled";
    case Policy::kGoldminer: return "goldminer";
    case Policy::kGoldminerJobLevel: return "goldminer-joblevel";
    case Policy::kGoldminerMeasured: return "goldminer-measured";
    case Policy::kOracle: return "oracle";
    case Policy::kCachew: return "cachew";
  }
  return "unknown";
}

std::string to_json(const SimResult& r) {
  char buf[2048];
  std::snprintf(buf, sizeof(buf),
                "{\"policy\": \"%s\", \"jobs\": %d, \"gpus\": %.0f, \"avg_jct_s\": %.1f, "
                "\"p50_jct_s\": %.1f, \"p95_jct_s\": %.1f, \"p99_jct_s\": %.1f, "
                "\"avg_queue_s\": %.1f, \"gpu_alloc_rate\": %.4f, \"gpu_effective_rate\": %.4f, "
                "\"cpu_short_wait_s\": %.1f, \"makespan_s\": %.1f, \"gpu_jobs\": %d, "
                "\"avg_jct_gpu_s\": %.1f, \"offered_load\": %.4f, \"unplaceable_jobs\": %d, "
                "\"never_ran_jobs\": %d, \"contended_share\": %.4f, \"events\": %lld, "
                "\"decision_us_per_event\": %.2f, \"gpu_wait_cpu_short_fraction\": %.4f, "
                "\"cpu_starved_share\": %.4f, \"worker_cpu_s\": %.0f, \"wasted_worker_cpu_s\": %.0f, "
                "\"unpaying_worker_cpu_s\": %.0f, \"undone_growths\": %d, \"knees_above_useful\": %d}",
                r.policy.c_str(), r.jobs, r.gpus, r.avg_jct_s, r.p50_jct_s, r.p95_jct_s,
                r.p99_jct_s, r.avg_queue_s, r.gpu_alloc_rate, r.gpu_effective_rate,
                r.cpu_short_wait_s, r.makespan_s, r.gpu_jobs, r.avg_jct_gpu_s, r.offered_load,
                r.unplaceable, r.never_ran, r.contended_share, static_cast<long long>(r.events),
                r.decision_us_per_event, r.gpu_wait_cpu_short_fraction, r.cpu_starved_share, r.worker_cpu_s,
                r.wasted_worker_cpu_s, r.unpaying_worker_cpu_s, r.undone_growths, r.knees_above_useful);
  return buf;
}

namespace {

// A CSV field, quoted as RFC 4180 says when it needs to be (read_pods reads
// it back with split_csv_line).
std::string csv_field(const std::string& v) {
  if (v.find_first_of(",\"\r\n") == std::string::npos) return v;
  std::string q = "\"";
  for (char c : v) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

}  // namespace

std::string job_records_csv(const SimResult& result) {
  std::string out = "name,gpus,cpus_requested,cpus_needed,cpus_trainer,work_s,bundled_speed,arrival_s,start_s,finish_s\n";
  char row[256];
  for (const JobRecord& j : result.job_records) {
    std::snprintf(row, sizeof row, ",%.3f,%.3f,%.3f,%.3f,%.3f,%.4f,%.3f,%.3f,%.3f\n", j.gpus, j.cpus_requested,
                  j.cpus_needed, j.cpus_trainer, j.work_s, j.bundled_speed, j.arrival_s, j.start_s, j.finish_s);
    out += csv_field(j.name) + row;
  }
  return out;
}

}  // namespace goldminer::sim
