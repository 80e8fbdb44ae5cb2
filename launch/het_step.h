// The data workers of a heterogeneous `--goldminer` job, started as a step
// of its CPU-only component: co-scheduled with the trainer (Slurm
// allocates every component at once) and with no line in the user's
// script. The SPANK plugin asks squeue what the job's components are
// (kJobComponentsFormat), launch/worker_start.h picks the one the
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
#include "gmcore/status.h"

namespace goldminer {

// `squeue --noheader --jobs=J --Format=<this>`: one line per component of
// job J (one line for a job that is not heterogeneous), fields ended by '|'.
extern const char kJobComponentsFormat[];

struct JobComponent {
  uint32_t job_id = 0;
  uint32_t het_job_id = 0;  // the leader's id; 0: not a heterogeneous job
  int offset = -1;          // its place in the hetjob; -1: not heterogeneous
  int ntasks = 1;
  int cpus_per_task = 1;
  bool asks_gpus = false;   // --gpus*, --gres=gpu in any of its TRES requests
  bool batch = false;       // sbatch's (its batch step starts the workers), not salloc's or srun's
  std::string work_dir;     // "" when squeue names none
  std::string time_left;    // as squeue prints it ("9:58", "1-00:00:00"); "" when unlimited
};

// Parses that squeue output; an error quotes the line it cannot read (or
// says squeue failed, with its last line).
Expected<std::vector<JobComponent>> parse_job_components(int squeue_exit_code, const std::string& squeue_output);

// Asks squeue (`squeue --noheader --jobs=JOB --Format=kJobComponentsFormat`
// through `run`) for job `job`'s components.
Expected<std::vector<JobComponent>> job_components(const SlurmCommand& run, uint32_t job);

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
