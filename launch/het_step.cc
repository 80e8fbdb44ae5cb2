#include "launch/het_step.h"

#include <cstdlib>
#include <sstream>

namespace goldminer {
namespace {

constexpr int kFields = 12;  // up to WorkDir, which comes last

bool parse_count(const std::string& text, long low, long high, long* out) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos || text.size() > 9) return false;
  long v = std::strtol(text.c_str(), nullptr, 10);
  if (v < low || v > high) return false;
  *out = v;
  return true;
}

// A TRES request as squeue prints it ("gres:gpu:2", "gres/gpu=1",
// "gpu:a100:1", "N/A") asks for a GPU.
bool names_gpu(const std::string& tres) { return tres.find("gpu") != std::string::npos; }

}  // namespace

const char kJobComponentsFormat[] =
    "JobID:|,HetJobId:|,HetJobOffset:|,NumTasks:|,cpus-per-task:|,"
    "tres-per-job:|,tres-per-node:|,tres-per-socket:|,tres-per-task:|,BatchFlag:|,TimeLeft:|,WorkDir:|";

Expected<std::vector<JobComponent>> parse_job_components(int squeue_exit_code, const std::string& squeue_output) {
  if (squeue_exit_code != 0) {
    CommandResult r;
    r.exit_code = squeue_exit_code;
    r.output = squeue_output;
    return Status::error("squeue: " + describe(r));
  }
  std::vector<JobComponent> out;
  std::istringstream lines(squeue_output);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    std::vector<std::string> f;
    size_t start = 0;
    for (int i = 0; i < kFields - 1; ++i) {
      size_t bar = line.find('|', start);
      if (bar == std::string::npos) break;
      f.push_back(line.substr(start, bar - start));
      start = bar + 1;
    }
    // WorkDir is the rest, without its closing '|' (a directory may hold '|').
    std::string rest = line.substr(std::min(start, line.size()));
    if (f.size() != kFields - 1 || rest.empty() || rest.back() != '|')
      return Status::error("squeue: cannot read a job component from '" + line + "'");
    rest.pop_back();
    JobComponent c;
    long id = 0, het = 0, offset = -1, tasks = 1, cpus = 1;
    bool is_het = f[1] != "N/A" && f[1] != "0";
    if (!parse_count(f[0], 1, 0xfffffff0L, &id) || (is_het && !parse_count(f[1], 1, 0xfffffff0L, &het)) ||
        (is_het && !parse_count(f[2], 0, 1 << 20, &offset)) || !parse_count(f[3], 1, 1 << 24, &tasks) ||
        (f[4] != "N/A" && !parse_count(f[4], 1, 1 << 16, &cpus)))
      return Status::error("squeue: cannot read a job component from '" + line + "'");
    c.job_id = static_cast<uint32_t>(id);
    c.het_job_id = static_cast<uint32_t>(het);
    c.offset = is_het ? static_cast<int>(offset) : -1;
    c.ntasks = static_cast<int>(tasks);
    c.cpus_per_task = static_cast<int>(cpus);
    c.asks_gpus = names_gpu(f[5]) || names_gpu(f[6]) || names_gpu(f[7]) || names_gpu(f[8]);
    c.batch = f[9] == "1";
    // "MM:SS", "HH:MM:SS" or "D-HH:MM:SS" (what sbatch --time reads the
    // same way); UNLIMITED, NOT_SET, INVALID: none.
    if (!f[10].empty() && f[10].find_first_not_of("0123456789:-") == std::string::npos &&
        f[10].find(':') != std::string::npos)
      c.time_left = f[10];
    else if (f[10] != "UNLIMITED" && f[10] != "NOT_SET" && f[10] != "INVALID" && f[10] != "N/A")
      return Status::error("squeue: cannot read a job component from '" + line + "' (time left '" + f[10] + "')");
    c.work_dir = rest == "N/A" || rest == "(null)" ? "" : rest;
    out.push_back(std::move(c));
  }
  return out;
}

Expected<std::vector<JobComponent>> job_components(const SlurmCommand& run, uint32_t job) {
  auto r = run("squeue", {"--noheader", "--jobs=" + std::to_string(job), std::string("--Format=") + kJobComponentsFormat});
  if (!r.ok()) return r.status();
  return parse_job_components(r->exit_code, r->output);
}

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
