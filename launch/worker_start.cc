#include "launch/worker_start.h"

#include <optional>

#include "launch/companion_job.h"

namespace goldminer {
namespace {

WorkerStartPlan on_this_machine(const WorkerStartRequest& r) {
  WorkerStartPlan p;
  p.threads = r.options.cpus_per_dw;
  if (r.options.dw <= 0) {
    p.why = "no local data workers (--workers 0): only those that connect by themselves";
    return p;
  }
  if (r.in_process) {
    p.start = WorkerStart::kLocalThreads;
    p.workers = r.options.dw;
    return p;
  }
  if (r.options.transport == Transport::kMpi) {
    p.why = "transport=mpi: the workers are ranks of the trainer's MPI job, which mpirun starts";
    return p;
  }
  p.start = WorkerStart::kLocalProcesses;
  p.workers = r.options.dw;
  return p;
}

}  // namespace

WorkerStartPlan plan_worker_start(const WorkerStartRequest& r) {
  if (r.site == StartSite::kThisMachine) return on_this_machine(r);
  const bool batch_step = r.site == StartSite::kBatchStep;
  WorkerStartPlan p;
  p.threads = r.options.cpus_per_dw;
  if (std::string why = why_no_companion_job(r.options); !why.empty()) {
    // Only the batch step says so: every other step of the job would too.
    if (batch_step) p.why = "no data workers started: " + why;
    return p;
  }
  std::optional<JobComponent> workers;
  auto components = r.components ? r.components() : Expected<std::vector<JobComponent>>(Status::error("no squeue"));
  if (components.ok()) {
    bool batch_job = false;
    for (const JobComponent& c : *components)
      if (c.job_id == r.job_id) {
        p.work_dir = c.work_dir;
        p.time_left = c.time_left;
        batch_job = c.batch;
      }
    workers = worker_component(*components, r.job_id);
    // Steps of a batch job use what its batch step started; those of a
    // salloc or srun job start workers only in a CPU-only component.
    if (!batch_step && (batch_job || !workers)) return p;
    if (!workers) p.why = "workers as a companion job: " + why_no_worker_component(*components, r.job_id);
  } else {
    p.why = (batch_step ? "workers as a companion job: " : "no data workers for this step: ") +
            components.status().message();
    if (!batch_step) return p;
  }
  p.elastic = r.options.mode == ScalingMode::kElastic;
  if (workers) {
    p.start = WorkerStart::kHetStep;
    p.component = *workers;
    p.workers = workers->ntasks;
    p.threads = workers->cpus_per_task;
  } else {
    p.start = WorkerStart::kCompanionJob;
    p.workers = r.options.dw;
  }
  return p;
}

WorkerStartRequest request_on_this_machine(const std::string& transport, int workers, int threads) {
  WorkerStartRequest r;
  r.site = StartSite::kThisMachine;
  r.options.dw = workers;
  r.options.cpus_per_dw = threads;
  r.options.transport = transport == "mpi" ? Transport::kMpi : Transport::kUcx;
  r.in_process = transport == "local";
  return r;
}

}  // namespace goldminer
