// The data workers of a `sbatch --goldminer` job, started as a companion
// job: what the SPANK plugin submits from the batch step's slurmstepd, the
// environment the batch script gets so that its session and those workers
// meet, and how the companion job ends with the job. Slurm-free: the
// plugin passes in what SPANK told it and runs the commands planned here
// (launch/subprocess.h).
//
//   batch job J (component 0 of a hetjob too)      companion job, dw tasks
//   GOLDMINER_LISTEN=ucx://ADDR:PORT  <---------   goldminer-dw (srun, one per
//   GOLDMINER_AUTH=munge                            task, cpus-per-dw CPUs each)
//   GOLDMINER_AUTH_JOB=J                            GOLDMINER_TRAINER=ucx://ADDR:PORT
//   GOLDMINER_DW_JOB=K                              GOLDMINER_AUTH=munge
//                                                   GOLDMINER_AUTH_JOB=J
//
// ADDR is the batch node's address, PORT the one the plugin reserved for
// the job on that node (launch/port_registry.h). No secret exists: trainer and workers
// prove uid and job J to each other with munge (gmcore/peer_auth.h), so
// nothing secret sits in a job's environment, Slurm's state or slurmdbd
// (GOLDMINER_MUNGE_SOCKET joins them when plugstack.conf names munged's
// socket). The workers retry until the session
// listens; the session drains them when it ends; the plugin cancels the
// companion job when the batch job ends, whatever happened; and its time
// limit is the batch job's time left when it is submitted, so that it ends
// by itself even when the batch node (with the plugin) is lost.
#ifndef GOLDMINER_LAUNCH_COMPANION_JOB_H_
#define GOLDMINER_LAUNCH_COMPANION_JOB_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "launch/admin_config.h"
#include "launch/job_options.h"
#include "launch/slurm_cli.h"
#include "launch/slurm_command.h"
#include "gmcore/status.h"

namespace goldminer {

// How long a companion worker waits for the session to listen (goldminer-dw
// --connect-timeout): a training script may spend hours before it opens its
// session; the companion job is cancelled with the batch job anyway.
constexpr int kCompanionConnectTimeoutS = 86400;

// What the plugin knows of the batch job.
struct BatchJob {
  uint32_t job_id = 0;
  std::vector<std::string> env;  // the batch script's environment, "NAME=value"
  std::string node_address;      // where workers reach the batch node
  int trainer_port = 0;          // reserved for the job on that node (launch/port_registry.h)
  // firewall=nftables: the port reserved for the trainer's UCX TCP
  // transport (GOLDMINER_UCX_PORT); 0: none.
  int ucx_port = 0;
  // The job's working directory (sbatch --chdir), which the plugin asks
  // squeue for: its environment's PWD is still the submitter's at
  // user_init. "" when unknown.
  std::string work_dir;
  // The job's time left as squeue prints it (JobComponent::time_left);
  // "" when unlimited or unknown. The companion job gets it as its time
  // limit, so that it ends by itself when nobody is left to cancel it
  // (the batch node lost with its slurmstepd).
  std::string time_left;
  // plan_worker_start's WorkerStartPlan::elastic: the session may add
  // workers, each a one-task copy of the companion job (GOLDMINER_DW_SBATCH).
  bool elastic = false;
};

// "" when the job's workers start as a companion job; else why not, in
// words for the log (dw=0; transport=mpi, whose workers share the
// trainer's MPI_COMM_WORLD and so start with it: `srun ... : ...`).
std::string why_no_companion_job(const JobOptions& options);

struct CompanionJob {
  std::string trainer;  // ucx://ADDR:PORT
  // Into the batch script: GOLDMINER_LISTEN, GOLDMINER_TRAINER,
  // GOLDMINER_AUTH=munge, GOLDMINER_AUTH_JOB (the batch job's id),
  // GOLDMINER_UCX_PORT when BatchJob::ucx_port is set and, with mode=elastic, GOLDMINER_DW_SBATCH: quote_words(worker_sbatch_args),
  // how the session starts more workers (sched/elastic.h); last,
  // UCX_TCP_CM_REUSEADDR=y unless the job sets it (the port is fixed per
  // job, and a job may open sessions one after another).
  std::vector<std::pair<std::string, std::string>> trainer_env;
  std::vector<std::string> sbatch_args;  // after sbatch itself
  std::vector<std::string> worker_sbatch_args;  // the same for one more worker (--ntasks=1)
  // sbatch's whole environment, exported to the workers (--export=ALL):
  // the job's, without Slurm's input variables (SLURM_* but SLURM_CONF,
  // SBATCH_*, SALLOC_*, SRUN_*, SPANK options: they describe the batch job,
  // e.g. SLURM_GPUS would make the workers' srun ask for GPUs, and a
  // --goldminer the companion job's sbatch took from its environment would
  // start more workers) and without GOLDMINER_*, plus GOLDMINER_TRAINER,
  // GOLDMINER_AUTH=munge, GOLDMINER_AUTH_JOB and GOLDMINER_MUNGE_SOCKET.
  std::vector<std::string> sbatch_env;
  // The batch job's: BatchJob::work_dir, else PWD, else SLURM_SUBMIT_DIR,
  // else /. The workers' output, goldminer-dw-JOB.out, goes there.
  std::string work_dir;
};

// The companion jobs' name: goldminer-dw.JOB.
std::string companion_job_name(uint32_t job_id);

// The environment of a companion job's sbatch (CompanionJob::sbatch_env)
// from the job's environment `env`: workers of trainer job `auth_job`,
// reaching munged at `munge_socket` ("": munge's default).
std::vector<std::string> companion_job_env(const std::vector<std::string>& env, const std::string& trainer,
                                           uint32_t auth_job, const std::string& munge_socket);

CompanionJob plan_companion_job(const JobOptions& options, const AdminConfig& admin, const BatchJob& job);

// How long end_companion_jobs gives running workers to end by themselves
// (a session that ended has drained its workers) before their SIGTERM,
// and then to drain after it (goldminer-dw drains and exits 0, so the job
// ends COMPLETED) before what is left is cancelled.
constexpr double kCompanionSelfEndS = 3;
constexpr double kCompanionDrainGraceS = 10;

// Ends the companion jobs of batch job `job_id` (all of them: the first
// and those an elastic session added, found by name among user `uid`'s
// jobs) as their JobState says (kRunning: waited for, then SIGTERM, then
// cancelled; kWaiting: cancelled at once), waiting up to `self_end_s`, then
// `drain_grace_s`, in steps of `poll_s`. When squeue cannot list them,
// cancels by name. A command that returns an error (it could not run, or
// overran its time: slurmctld is slow) ends the waiting: only the final
// scancel follows, so a slow controller holds the caller for at most
// about two command timeouts more. An error names what could not be done
// (the final scancel failed).
Status end_companion_jobs(uint32_t job_id, uint32_t uid, const SlurmCommand& run,
                          double self_end_s = kCompanionSelfEndS, double drain_grace_s = kCompanionDrainGraceS,
                          double poll_s = 0.25);

}  // namespace goldminer

#endif  // GOLDMINER_LAUNCH_COMPANION_JOB_H_
