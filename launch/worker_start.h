// How a trainer's data workers start: the one decision every starter
// carries out. Slurm-free: the callers pass what they know (the job's
// --goldminer settings and components, or a command's --workers and
// --transport) and do what the plan says:
//
//   plan.start        who carries it out                    with
//   kCompanionJob     spank_goldminer.so, batch step        launch/companion_job.h
//   kHetStep          spank_goldminer.so, batch step or     launch/het_step.h
//                     node 0 of a salloc/srun step
//   kLocalThreads     the trainer's Session itself          SessionOptions::local_workers
//   kLocalProcesses   goldminer-consume, goldminer-run,     tw_lib/session/worker_processes.h
//                     goldminer.Session(workers=N)
//   kNone             nobody (plan.why says why)
//
// plan.elastic: the session may start more workers later, each a
// one-worker companion job (sched/elastic.h), up to the job's dw_max; the
// plugin hands the trainer the sbatch arguments for that
// (GOLDMINER_DW_SBATCH), the session reads them back.
#ifndef GOLDMINER_LAUNCH_WORKER_START_H_
#define GOLDMINER_LAUNCH_WORKER_START_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "launch/het_step.h"
#include "launch/job_options.h"
#include "gmcore/status.h"

namespace goldminer {

// Where the decision is asked.
enum class StartSite {
  kBatchStep,    // the SPANK plugin in a batch job's batch step (user_init)
  kJobStep,      // the SPANK plugin on node 0 of another step (salloc, srun)
  kThisMachine,  // a command or goldminer.Session starting workers on its own machine
};

enum class WorkerStart { kNone, kCompanionJob, kHetStep, kLocalThreads, kLocalProcesses };

struct WorkerStartRequest {
  StartSite site = StartSite::kThisMachine;
  // The job's --goldminer settings (dw, dw_max, cpus_per_dw, transport,
  // mode); on this machine the command's --workers (dw), --threads
  // (cpus_per_dw) and --transport ucx or mpi.
  JobOptions options;
  // On this machine: --transport local (workers in the trainer's process).
  bool in_process = false;
  uint32_t job_id = 0;  // the Slurm sites: the step's job
  // The Slurm sites: the job's components as squeue lists them (an error
  // when squeue failed). Asked at most once, and only when the settings
  // want workers: a job with dw=0 costs slurmctld no squeue.
  std::function<Expected<std::vector<JobComponent>>()> components;
};

struct WorkerStartPlan {
  WorkerStart start = WorkerStart::kNone;
  int workers = 0;  // started at once
  int threads = 1;  // each worker's threads (its CPUs)
  // kHetStep: the job's CPU-only component they run in, one per task.
  JobComponent component;
  // The trainer's component as squeue lists it (kCompanionJob, kHetStep):
  // its working directory and time left, for the workers' (BatchJob).
  std::string work_dir, time_left;
  bool elastic = false;  // the session may start more (BatchJob::elastic), up to dw_max
  // Words for the log, "" when there is nothing to say: why no workers
  // start here, or why a batch step's are a companion job and not a step.
  std::string why;
};

WorkerStartPlan plan_worker_start(const WorkerStartRequest& request);

// The request of a command or goldminer.Session on this machine:
// `workers` goldminer-dw of `threads` threads each over `transport`
// ("ucx", "mpi", or "local": in the trainer's process).
WorkerStartRequest request_on_this_machine(const std::string& transport, int workers, int threads);

}  // namespace goldminer

#endif  // GOLDMINER_LAUNCH_WORKER_START_H_
