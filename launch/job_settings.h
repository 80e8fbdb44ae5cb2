// The SPANK plugin's knowledge of one job, in one Slurm process (sbatch,
// srun, slurmstepd or slurmd): the site settings from plugstack.conf, the
// job's --goldminer value, and whether its environment was exported yet.
// All decisions of the plugin live here so they are unit-tested without
// Slurm; spank_plugin/ only moves values in and out.
#ifndef GOLDMINER_LAUNCH_JOB_SETTINGS_H_
#define GOLDMINER_LAUNCH_JOB_SETTINGS_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "launch/admin_config.h"
#include "launch/job_options.h"
#include "gmcore/status.h"

namespace goldminer {

// Thread-compatible, not thread-safe: SPANK calls a plugin from one thread.
class JobSettings {
 public:
  // plugstack.conf arguments; call once, before set_option.
  Status configure(const std::vector<std::string>& plugstack_args);

  // The value of --goldminer; nullptr when given without a value.
  Status set_option(const char* value);

  bool requested() const { return options_.has_value(); }
  const std::optional<JobOptions>& options() const { return options_; }
  const AdminConfig& admin() const { return admin_; }

  // The variables to export into the job: the full set on the first call of
  // a job that asked for --goldminer, nothing on later calls (SPANK calls
  // user_init once per node per step) and nothing for other jobs.
  std::vector<std::pair<std::string, std::string>> take_environment();

 private:
  AdminConfig admin_;
  std::optional<JobOptions> options_;
  bool exported_ = false;
};

}  // namespace goldminer

#endif  // GOLDMINER_LAUNCH_JOB_SETTINGS_H_
