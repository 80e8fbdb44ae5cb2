#include "launch/slurm_command.h"

#include <cerrno>
#include <cstdlib>
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

}  // namespace goldminer
