#include "sched/data_worker.h"

#include <cstdlib>
#include <cstring>

#include "launch/admin_config.h"
#include "launch/job_options.h"

namespace goldminer {
namespace {
constexpr char kNamePrefix[] = "goldminer-dw.";
// SPANK_OPTION_ENV_PREFIX + plugin name + '_' + option name.
constexpr char kOptionVariable[] = "_SLURM_SPANK_OPTION_goldminer_goldminer=";
}  // namespace

uint32_t companion_trainer_id(const char* job_name) {
  if (!job_name || std::strncmp(job_name, kNamePrefix, sizeof(kNamePrefix) - 1) != 0) return 0;
  const char* digits = job_name + sizeof(kNamePrefix) - 1;
  if (*digits < '1' || *digits > '9') return 0;
  char* end = nullptr;
  unsigned long long id = std::strtoull(digits, &end, 10);
  if (*end != '\0' || id > UINT32_MAX) return 0;
  return static_cast<uint32_t>(id);
}

std::optional<std::string> goldminer_option_in_spank_env(const char* const* env, size_t count) {
  const size_t n = sizeof(kOptionVariable) - 1;
  for (size_t i = 0; env && i < count; ++i)
    if (env[i] && std::strncmp(env[i], kOptionVariable, n) == 0) return std::string(env[i] + n);
  return std::nullopt;
}

std::string verify_data_worker(uint32_t trainer_id, const WorkerClaim& claim, const SelectConfig& site) {
  std::string job = "job " + std::to_string(trainer_id);
  if (!claim.trainer_found) return job + " does not exist";
  if (claim.trainer_uid != claim.worker_uid)
    return job + " belongs to uid " + std::to_string(claim.trainer_uid) + ", not " +
           std::to_string(claim.worker_uid);
  if (!claim.trainer_running) return job + " is not running";
  if (!claim.trainer_option) return job + " is not a --goldminer job";
  // The job's value as the SPANK plugin read it at submission, under the
  // site's limits: dw-max defaults to min(8, max_dw_per_job) when not given,
  // and a value beyond a limit is not backed.
  AdminConfig limits;
  limits.max_dw_per_job = site.max_dw_per_job;
  limits.max_cpus_per_dw = site.max_cpus_per_dw;
  auto options = parse_job_options(*claim.trainer_option, limits);
  if (!options.ok()) {
    // parse_job_options names plugstack.conf, where the SPANK plugin reads
    // these limits; here they came from goldminer.conf.
    std::string why = options.status().message();
    const std::string from = "(plugstack.conf ", to = "(goldminer.conf ";
    for (size_t at = why.find(from); at != std::string::npos; at = why.find(from, at + to.size()))
      why.replace(at, from.size(), to);
    return job + ": " + why;
  }
  uint64_t limit = static_cast<uint64_t>(options->dw_max) * static_cast<uint64_t>(options->cpus_per_dw);
  uint64_t wanted = uint64_t{claim.cpus_held} + claim.worker_cpus;
  if (wanted > limit)
    return job + "'s workers would hold " + std::to_string(wanted) + " CPUs, more than dw-max x cpus-per-dw = " +
           std::to_string(limit);
  return "";
}

}  // namespace goldminer
