#include "launch/elastic_setup.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <utility>

#include "launch/companion_job.h"
#include "launch/shell_quote.h"
#include "launch/slurm_command.h"

namespace goldminer {
namespace {

// A whole number in [lo, hi] from variable NAME's value.
Expected<long> integer_variable(const std::string& name, const std::string& value, long lo, long hi) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || errno != 0 || v < lo || v > hi)
    return Status::error(name + ": invalid value '" + value + "': expected an integer from " + std::to_string(lo) +
                         " to " + std::to_string(hi));
  return v;
}

}  // namespace

SlurmWorkerLauncher::SlurmWorkerLauncher(std::vector<std::string> sbatch_args, SlurmCommand run)
    : sbatch_args_(std::move(sbatch_args)), run_(std::move(run)) {}

SlurmWorkerLauncher::~SlurmWorkerLauncher() { end(); }

void SlurmWorkerLauncher::avoid_trainer_node() {
  if (avoiding_ || trainer_node_.empty()) return;
  avoiding_ = true;
  // Before the script: an --exclude of the job's own dw options, later,
  // still has the last word.
  sbatch_args_.insert(sbatch_args_.begin(), "--exclude=" + trainer_node_);
}

int SlurmWorkerLauncher::start(int n, std::string* error) {
  int started = 0;
  for (; started < n && !ended_; ++started) {
    auto id = submit(run_, sbatch_args_);
    if (!id.ok()) {
      if (error != nullptr) *error = id.status().message();
      break;
    }
    jobs_.push_back(*id);
  }
  return started;
}

std::map<uint32_t, JobState> SlurmWorkerLauncher::states() {
  std::vector<uint32_t> live;
  for (uint32_t id : jobs_)
    if (std::find(gone_.begin(), gone_.end(), id) == gone_.end()) live.push_back(id);
  std::map<uint32_t, JobState> out;
  if (live.empty()) return out;
  auto listed = job_states(run_, live);
  if (!listed.ok()) {
    // Not knowing: as if they wait (growth holds, cancels are --state=PENDING).
    for (uint32_t id : live) out[id] = JobState::kWaiting;
    return out;
  }
  out = std::move(listed).value();
  for (const auto& [id, state] : out)
    if (state == JobState::kGone) gone_.push_back(id);
  return out;
}

int SlurmWorkerLauncher::waiting() {
  int n = 0;
  for (const auto& [id, state] : states()) n += state == JobState::kWaiting;
  return n;
}

int SlurmWorkerLauncher::live() {
  int n = 0;
  for (const auto& [id, state] : states()) n += state != JobState::kGone;
  return n;
}

int SlurmWorkerLauncher::cancel_waiting(int n) {
  std::vector<uint32_t> cancel;
  const auto now = states();
  for (auto it = jobs_.rbegin(); it != jobs_.rend() && static_cast<int>(cancel.size()) < n; ++it) {
    auto s = now.find(*it);
    if (s != now.end() && s->second == JobState::kWaiting) cancel.push_back(*it);
  }
  if (cancel.empty()) return 0;
  // --state=PENDING: one that started meanwhile is left to run (and join).
  if (!cancel_jobs(run_, cancel, CancelScope::kPending).ok()) return 0;
  gone_.insert(gone_.end(), cancel.begin(), cancel.end());
  return static_cast<int>(cancel.size());
}

void SlurmWorkerLauncher::end() {
  if (ended_) return;
  ended_ = true;
  std::vector<uint32_t> waiting, running;
  for (const auto& [id, state] : states()) {
    if (state == JobState::kWaiting) waiting.push_back(id);
    if (state == JobState::kRunning) running.push_back(id);
  }
  (void)cancel_jobs(run_, waiting, CancelScope::kPending);
  // goldminer-dw drains on SIGTERM (also one still trying to reach the
  // session) and exits 0: its job ends COMPLETED.
  (void)cancel_jobs(run_, running, CancelScope::kTerminate);
}

Expected<ElasticSetup> elastic_from_environment(const std::vector<std::string>& env, const CommandRunner& runner) {
  auto job = read_job_environment(env, kReadBySession);
  if (!job.ok()) return job.status();
  return elastic_from_environment(*job, env, runner);
}

Expected<ElasticSetup> elastic_from_environment(const JobEnvironment& job, const std::vector<std::string>& env,
                                                const CommandRunner& runner) {
  ElasticSetup setup;
  if (job.dw_sbatch.empty() || job.mode == "static") return setup;
  if (job.mode != "elastic")  // unset: the plugin always sets it with GOLDMINER_DW_SBATCH
    return Status::error("GOLDMINER_DW_SBATCH is set but GOLDMINER_MODE is not");
  auto args = split_words(job.dw_sbatch);
  if (!args.ok()) return Status::error("GOLDMINER_DW_SBATCH: " + args.status().message());
  if (args->empty()) return Status::error("GOLDMINER_DW_SBATCH: no sbatch arguments");
  if (!job.dw || !job.dw_max) return Status::error("GOLDMINER_DW_SBATCH is set but GOLDMINER_DW or GOLDMINER_DW_MAX is not");
  if (job.trainer.empty() || job.auth_job == 0)
    return Status::error("GOLDMINER_DW_SBATCH is set but GOLDMINER_TRAINER or GOLDMINER_AUTH_JOB is not");
  setup.interval_s = job.autoscale_interval_s.value_or(kDefaultAutoscaleIntervalS);
  if (std::string id = env_value(env, "SLURM_JOB_ID"); !id.empty()) {
    auto parsed = integer_variable("SLURM_JOB_ID", id, 1, 4294967295L);
    if (!parsed.ok()) return parsed.status();
    setup.job_id = static_cast<uint32_t>(*parsed);
  }
  // The CPUs of one worker, as the job's option (cpus-per-dw) says them;
  // unset outside spank_goldminer.so: 1.
  setup.cpus_per_dw = static_cast<double>(job.cpus_per_dw.value_or(1));
  setup.ctld = job.ctld;
  setup.munge_socket = job.munge_socket;
  setup.ctld_user = job.ctld_user;
  if (!setup.ctld.empty() && setup.job_id == 0)
    return Status::error("GOLDMINER_CTLD is set but SLURM_JOB_ID is not: goldminer-ctld steers Slurm jobs only");
  const int dw = *job.dw, dw_max = *job.dw_max;
  const uint32_t auth_job = job.auth_job;
  const std::string& trainer = job.trainer;
  setup.config.initial_workers = dw;
  setup.config.autosizer.max_workers = dw_max;
  setup.config.autosizer.min_workers = std::min(1, dw);

  // sbatch gets the workers' environment (the job's without Slurm's input
  // variables, as the first companion job's); squeue and scancel PATH and
  // SLURM_CONF only.
  const std::vector<std::string> worker_env =
      companion_job_env(env, trainer, auth_job, setup.munge_socket);
  const std::vector<std::string> slurm_env = slurm_command_env(env);
  CommandRunner run = runner ? runner : CommandRunner(run_command);
  SlurmCommand slurm = [=](const std::string& name, const std::vector<std::string>& cmd_args) -> Expected<CommandResult> {
    auto spec = command_on_path(name, cmd_args, name == "sbatch" ? worker_env : slurm_env);
    if (!spec.ok()) return spec.status();
    spec->timeout_s = 60;
    return run(*spec);
  };
  auto launcher = std::make_shared<SlurmWorkerLauncher>(std::move(args).value(), std::move(slurm));
  launcher->set_trainer_node(env_value(env, "SLURMD_NODENAME"));
  setup.launcher = std::move(launcher);
  return setup;
}

}  // namespace goldminer
