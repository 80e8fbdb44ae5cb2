// A job's elastic data workers under Slurm (sched/elastic.h decides how
// many): SlurmWorkerLauncher starts each worker as a companion job of one
// task and cancels them, and elastic_from_environment reads the setup the
// SPANK plugin gave the trainer (GOLDMINER_DW_SBATCH and the rest; whether
// a job grows so is decided with its first workers: launch/worker_start.h,
// WorkerStartPlan::elastic). Slurm's commands run through a SlurmCommand
// (launch/slurm_cli.h); only their text crosses.
#ifndef GOLDMINER_LAUNCH_ELASTIC_SETUP_H_
#define GOLDMINER_LAUNCH_ELASTIC_SETUP_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "gmcore/status.h"
#include "goldminer/elastic.h"
#include "launch/job_environment.h"
#include "launch/slurm_cli.h"
#include "launch/subprocess.h"

namespace goldminer {

// Under Slurm: each worker is a companion job of one task, submitted with
// `sbatch_args` (those of the job's first companion job but --ntasks=1).
// `run` runs sbatch with the workers' environment, squeue and scancel.
class SlurmWorkerLauncher : public WorkerLauncher {
 public:
  SlurmWorkerLauncher(std::vector<std::string> sbatch_args, SlurmCommand run);
  ~SlurmWorkerLauncher() override;

  int start(int n, std::string* error) override;
  int waiting() override;
  int live() override;
  int cancel_waiting(int n) override;
  void end() override;
  // Later sbatch calls add --exclude=NODE, the trainer's node (Slurm's
  // name for it, SLURMD_NODENAME); nothing when it is not known.
  void avoid_trainer_node() override;
  void set_trainer_node(std::string node) { trainer_node_ = std::move(node); }

  // The jobs it submitted, oldest first.
  const std::vector<uint32_t>& jobs() const { return jobs_; }

 private:
  std::map<uint32_t, JobState> states();  // of jobs_ not known gone
  std::vector<std::string> sbatch_args_;
  std::string trainer_node_;
  bool avoiding_ = false;
  SlurmCommand run_;
  std::vector<uint32_t> jobs_;
  std::vector<uint32_t> gone_;
  bool ended_ = false;
};

// Seconds between observations when GOLDMINER_AUTOSCALE_INTERVAL is unset.
constexpr double kDefaultAutoscaleIntervalS = 5;

// `runner` runs the launcher's Slurm commands (found on the environment's
// PATH); empty: run_command (launch/subprocess.h). Tests pass a fake.
// Nothing (no launcher) when the environment asks for no elastic workers:
// no GOLDMINER_DW_SBATCH (no companion job: dw=0, transport=mpi, not under
// spank_goldminer.so) or GOLDMINER_MODE=static. An error names the
// variable whose value is wrong. `env`: "NAME=value" strings.
using CommandRunner = std::function<Expected<CommandResult>(const CommandSpec&)>;
Expected<ElasticSetup> elastic_from_environment(const std::vector<std::string>& env,
                                                const CommandRunner& runner = {});
// The same from what a session already read of `env` (its GOLDMINER_*
// variables; `env` itself gives the workers' environment and Slurm's).
Expected<ElasticSetup> elastic_from_environment(const JobEnvironment& job, const std::vector<std::string>& env,
                                                const CommandRunner& runner = {});

}  // namespace goldminer

#endif  // GOLDMINER_LAUNCH_ELASTIC_SETUP_H_
