#include "launch/job_settings.h"

namespace goldminer {

Status JobSettings::configure(const std::vector<std::string>& plugstack_args) {
  auto admin = parse_admin_config(plugstack_args);
  if (!admin.ok()) return admin.status();
  admin_ = *admin;
  return Status();
}

Status JobSettings::set_option(const char* value) {
  // A bare --goldminer reaches the plugin as NULL, and, where sbatch reads
  // it back from the job's environment (each component of a hetjob), as
  // the text "(null)" that Slurm printed for it there.
  if (value != nullptr && std::string(value) == "(null)") value = nullptr;
  auto options = parse_job_options(value ? value : "", admin_);
  if (!options.ok()) return options.status();
  options_ = *options;
  return Status();
}

std::vector<std::pair<std::string, std::string>> JobSettings::take_environment() {
  if (!options_ || exported_) return {};
  exported_ = true;
  return job_environment(*options_, admin_);
}

}  // namespace goldminer
