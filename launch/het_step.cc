#include "launch/het_step.h"

namespace goldminer {

std::string why_no_worker_component(const std::vector<JobComponent>& components, uint32_t trainer) {
  const JobComponent* self = nullptr;
  for (const JobComponent& c : components)
    if (c.job_id == trainer) self = &c;
  if (self == nullptr) return "squeue does not list job " + std::to_string(trainer);
  if (self->offset < 0) return "not a heterogeneous job";
  if (self->offset != 0)
    return "component " + std::to_string(self->offset) + " of job " + std::to_string(self->het_job_id) +
           ": only the leader's (component 0) starts the workers";
  for (const JobComponent& c : components)
    if (c.het_job_id == self->het_job_id && c.offset > 0 && !c.asks_gpus) return "";
  return "every other component of the heterogeneous job asks for GPUs";
}

std::optional<JobComponent> worker_component(const std::vector<JobComponent>& components, uint32_t trainer) {
  if (!why_no_worker_component(components, trainer).empty()) return std::nullopt;
  const JobComponent* best = nullptr;
  for (const JobComponent& c : components)
    if (c.het_job_id == trainer && c.offset > 0 && !c.asks_gpus && (best == nullptr || c.offset < best->offset))
      best = &c;
  return best == nullptr ? std::nullopt : std::optional<JobComponent>(*best);
}

HetStep plan_het_step(const CompanionJob& plan, const AdminConfig& admin, uint32_t leader,
                      const JobComponent& workers) {
  HetStep s;
  const std::string id = std::to_string(leader);
  s.name = companion_job_name(leader);
  s.component = id + "+" + std::to_string(workers.offset);
  s.srun_args = {"--jobid=" + id,
                 "--het-group=" + std::to_string(workers.offset),
                 "--ntasks=" + std::to_string(workers.ntasks),
                 "--cpus-per-task=" + std::to_string(workers.cpus_per_task),
                 "--overlap",
                 "--mpi=none",
                 "--job-name=" + s.name,
                 "--chdir=" + plan.work_dir,
                 admin.dw_command,
                 "--threads",
                 std::to_string(workers.cpus_per_task),
                 "--connect-timeout",
                 std::to_string(kCompanionConnectTimeoutS),
                 "-v"};
  s.srun_env = plan.sbatch_env;
  s.output_path = (plan.work_dir == "/" ? "" : plan.work_dir) + "/goldminer-dw-" + s.component + ".out";
  s.trainer_env = {{"GOLDMINER_DW", std::to_string(workers.ntasks)}, {"GOLDMINER_DW_STEP", s.component}};
  return s;
}

}  // namespace goldminer
