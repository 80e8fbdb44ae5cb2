// The data workers of a heterogeneous `--goldminer` job, started as a step
// of its CPU-only component: co-scheduled with the trainer (Slurm
// allocates every component at once) and with no line in the user's
// script. The SPANK plugin asks squeue what the job's components are
// (launch/slurm_cli.h job_components), launch/worker_start.h picks the one the
// workers run in (worker_component), and the plugin starts the step
// planned here with spawn_detached (launch/subprocess.h). Slurm-free.
//
//   sbatch --goldminer job.sh          job.sh: #SBATCH -p gpu --gpus=1
//                                              #SBATCH hetjob
//                                              #SBATCH -p cpu -n 4 -c 2
//   component 0 (leader J): batch step runs the trainer, GOLDMINER_LISTEN
//   component 1 (J+1):      srun --jobid=J --het-group=1 --ntasks=4
//                           --cpus-per-task=2 --overlap goldminer-dw ...
//
// Growth beyond the component (mode=elastic) still comes as companion jobs
// (launch/companion_job.h): the trainer gets GOLDMINER_DW_SBATCH as usual.
#ifndef GOLDMINER_LAUNCH_HET_STEP_H_
#define GOLDMINER_LAUNCH_HET_STEP_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "launch/admin_config.h"
#include "launch/companion_job.h"
#include "launch/slurm_cli.h"
#include "gmcore/status.h"

namespace goldminer {

// The component the workers of trainer component `trainer` run in: the
// first other component that asks for no GPU; none when the job is not
// heterogeneous, `trainer` is not its leader (offset 0: only the leader
// starts workers), or every other component asks for GPUs.
std::optional<JobComponent> worker_component(const std::vector<JobComponent>& components, uint32_t trainer);

// Why `components` gives no worker component, in words for the log; ""
// when it gives one.
std::string why_no_worker_component(const std::vector<JobComponent>& components, uint32_t trainer);

struct HetStep {
  std::string name;                  // the step's name: goldminer-dw.J (companion_job_name)
  std::string component;             // "J+K", as Slurm names the component
  std::vector<std::string> srun_args;  // after srun itself
  std::vector<std::string> srun_env;   // the companion plan's sbatch_env
  std::string output_path;           // <work dir>/goldminer-dw-J+K.out
  // Into the trainer's environment besides plan.trainer_env: GOLDMINER_DW
  // (the component's tasks: one worker each) and GOLDMINER_DW_STEP (J+K).
  std::vector<std::pair<std::string, std::string>> trainer_env;
};

// The step of `workers` for batch job `leader` whose companion plan (the
// trainer address, secret, environment, working directory) is `plan`: one
// goldminer-dw per task of the component, as many threads as its CPUs per
// task. --overlap: under srun or salloc the user's own step may already
// hold the component's CPUs.
HetStep plan_het_step(const CompanionJob& plan, const AdminConfig& admin, uint32_t leader,
                      const JobComponent& workers);

}  // namespace goldminer

#endif  // GOLDMINER_LAUNCH_HET_STEP_H_
