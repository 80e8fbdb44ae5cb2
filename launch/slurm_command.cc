#include "launch/slurm_command.h"

#include <cerrno>
#include <cstdlib>
#include <sstream>
#include <utility>

namespace goldminer {
namespace {

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

std::string env_value(const std::vector<std::string>& env, const std::string& name) {
  const std::string prefix = name + "=";
  for (const std::string& e : env)
    if (starts_with(e, prefix.c_str())) return e.substr(prefix.size());
  return "";
}

std::vector<std::string> slurm_command_env(const std::vector<std::string>& job_env) {
  std::vector<std::string> env;
  for (const char* name : {"PATH", "SLURM_CONF"}) {
    std::string value = env_value(job_env, name);
    if (!value.empty()) env.push_back(std::string(name) + "=" + value);
  }
  return env;
}

std::vector<SoftLimit> job_soft_limits(const std::vector<std::string>& job_env) {
  static const std::pair<const char*, int> kNames[] = {
      {"CPU", RLIMIT_CPU},         {"FSIZE", RLIMIT_FSIZE}, {"DATA", RLIMIT_DATA},    {"STACK", RLIMIT_STACK},
      {"CORE", RLIMIT_CORE},       {"RSS", RLIMIT_RSS},     {"NPROC", RLIMIT_NPROC},  {"NOFILE", RLIMIT_NOFILE},
      {"MEMLOCK", RLIMIT_MEMLOCK}, {"AS", RLIMIT_AS}};
  std::vector<SoftLimit> limits;
  for (const auto& [name, resource] : kNames) {
    std::string value = env_value(job_env, std::string("SLURM_RLIMIT_") + name);
    if (!value.empty() && value[0] == 'U') value.erase(0, 1);
    if (value.empty() || value.size() > 20 || value.find_first_not_of("0123456789") != std::string::npos) continue;
    errno = 0;
    const unsigned long long v = std::strtoull(value.c_str(), nullptr, 10);
    if (errno == 0) limits.push_back({resource, static_cast<rlim_t>(v)});
  }
  return limits;
}

Expected<uint32_t> parse_submitted_job_id(const std::string& output) {
  std::string text = output;
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\r')) text.pop_back();
  size_t nl = text.rfind('\n');
  std::string last = nl == std::string::npos ? text : text.substr(nl + 1);
  std::string digits = last.substr(0, last.find(';'));
  bool ok = !digits.empty() && digits.size() <= 10 && digits.find_first_not_of("0123456789") == std::string::npos;
  if (ok) {
    unsigned long long v = std::strtoull(digits.c_str(), nullptr, 10);
    if (v > 0 && v <= 0xffffffffULL) return static_cast<uint32_t>(v);
  }
  return Status::error("sbatch printed no job id: '" + text + "'");
}

JobState parse_job_state(int squeue_exit_code, const std::string& squeue_output) {
  std::string state = squeue_output;
  while (!state.empty() && (state.back() == '\n' || state.back() == ' ')) state.pop_back();
  // squeue fails ("Invalid job id specified") once the job left the queue.
  if (squeue_exit_code != 0 || state.empty()) return JobState::kGone;
  if (state == "RUNNING" || state == "CONFIGURING") return JobState::kRunning;
  for (const char* ended : {"COMPLETING", "COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED",
                            "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "SPECIAL_EXIT"})
    if (state == ended) return JobState::kGone;
  return JobState::kWaiting;  // PENDING, SUSPENDED, REQUEUED, ...: cancelled
}

std::map<uint32_t, JobState> parse_job_states(const std::string& squeue_output) {
  std::map<uint32_t, JobState> jobs;
  std::istringstream lines(squeue_output);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string id, state;
    if (!(words >> id >> state) || id.empty() || id.size() > 10 ||
        id.find_first_not_of("0123456789") != std::string::npos)
      continue;
    const unsigned long long v = std::strtoull(id.c_str(), nullptr, 10);
    if (v <= 0xffffffffULL) jobs[static_cast<uint32_t>(v)] = parse_job_state(0, state);
  }
  return jobs;
}

bool squeue_knows_none(const std::string& squeue_output) {
  return squeue_output.find("Invalid job id") != std::string::npos;
}

std::string job_list(const std::vector<uint32_t>& ids) {
  std::string out;
  for (uint32_t id : ids) out += (out.empty() ? "" : ",") + std::to_string(id);
  return out;
}

std::string trainer_job_ended(uint32_t job, int squeue_exit_code, const std::string& squeue_output) {
  const std::string name = "job " + std::to_string(job);
  if (squeue_exit_code != 0)
    return squeue_knows_none(squeue_output) ? name + " is no longer known to Slurm" : "";
  std::string state = squeue_output.substr(0, squeue_output.find_first_of(" \n"));
  if (state.empty()) return name + " is no longer listed by squeue";
  static const char* const kEnded[] = {"COMPLETED", "COMPLETING", "CANCELLED", "FAILED",      "TIMEOUT",
                                       "NODE_FAIL", "PREEMPTED",  "BOOT_FAIL", "DEADLINE",    "OUT_OF_MEMORY",
                                       "REVOKED",   "SPECIAL_EXIT", "STAGE_OUT"};
  for (const char* s : kEnded)
    if (state == s) return name + " is " + state;
  return "";
}

}  // namespace goldminer
