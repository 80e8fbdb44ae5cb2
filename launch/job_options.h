// The settings of one job's data workers, from `--goldminer[=key=value,...]`,
// and the GOLDMINER_* environment they give the job's tasks.
#ifndef GOLDMINER_LAUNCH_JOB_OPTIONS_H_
#define GOLDMINER_LAUNCH_JOB_OPTIONS_H_

#include <string>
#include <utility>
#include <vector>

#include "launch/admin_config.h"
#include "gmcore/option_table.h"
#include "gmcore/status.h"

namespace goldminer {

enum class Transport { kUcx, kMpi };
// elastic: data workers join and leave while the job runs (UCX);
// static: a fixed set started with the job (MPI companion steps).
enum class ScalingMode { kElastic, kStatic };

// Value type.
struct JobOptions {
  int dw = 1;           // data workers at start
  int dw_max = 8;       // most data workers the job may grow to
  int cpus_per_dw = 2;  // CPUs of each data worker
  Transport transport = Transport::kUcx;
  ScalingMode mode = ScalingMode::kElastic;

  // "dw=1,dw-max=8,cpus-per-dw=2,transport=ucx,mode=elastic": every key,
  // parseable by parse_job_options.
  std::string canonical() const;
};

const OptionTable& job_option_table();

// The longest value of --goldminer taken (every key with its longest
// value is under 200 bytes): Slurm hands the value to slurmctld, slurmd and
// slurmstepd, which parse it as root; a longer one is refused unread.
inline constexpr size_t kMaxJobOptionsLength = 1024;

// Parses the value of --goldminer ("" = all defaults) under the site's
// limits. Errors read "goldminer: <key>: invalid value '<v>': <why>".
Expected<JobOptions> parse_job_options(const std::string& text, const AdminConfig& admin);

// The GOLDMINER_* variables every task of the job receives, in table order
// (site settings only when set),
// then GOLDMINER_OPTIONS (the canonical form).
std::vector<std::pair<std::string, std::string>> job_environment(const JobOptions& options,
                                                                 const AdminConfig& admin);

// One-line usage for `sbatch --help` (the SPANK option's usage string).
std::string job_option_usage();

}  // namespace goldminer

#endif  // GOLDMINER_LAUNCH_JOB_OPTIONS_H_
