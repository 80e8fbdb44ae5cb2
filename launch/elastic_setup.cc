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
  ElasticSetup setup;
  const std::string args_text = env_value(env, "GOLDMINER_DW_SBATCH");
  const std::string mode = env_value(env, "GOLDMINER_MODE");
  if (args_text.empty() || mode == "static") return setup;
  if (mode != "elastic") return Status::error("GOLDMINER_MODE: invalid value '" + mode + "': expected elastic or static");
  auto args = split_words(args_text);
  if (!args.ok()) return Status::error("GOLDMINER_DW_SBATCH: " + args.status().message());
  if (args->empty()) return Status::error("GOLDMINER_DW_SBATCH: no sbatch arguments");
  auto dw = integer_variable("GOLDMINER_DW", env_value(env, "GOLDMINER_DW"), 0, 1 << 20);
  if (!dw.ok()) return dw.status();
  auto dw_max = integer_variable("GOLDMINER_DW_MAX", env_value(env, "GOLDMINER_DW_MAX"), 1, 1 << 20);
  if (!dw_max.ok()) return dw_max.status();
  const std::string trainer = env_value(env, "GOLDMINER_TRAINER");
  if (trainer.empty() || env_value(env, "GOLDMINER_AUTH_JOB").empty())
    return Status::error("GOLDMINER_DW_SBATCH is set but GOLDMINER_TRAINER or GOLDMINER_AUTH_JOB is not");
  auto auth_job = integer_variable("GOLDMINER_AUTH_JOB", env_value(env, "GOLDMINER_AUTH_JOB"), 1, 4294967295L);
  if (!auth_job.ok()) return auth_job.status();
  setup.interval_s = kDefaultAutoscaleIntervalS;
  if (std::string v = env_value(env, "GOLDMINER_AUTOSCALE_INTERVAL"); !v.empty()) {
    char* end = nullptr;
    const double s = std::strtod(v.c_str(), &end);
    if (*end != '\0' || !(s >= 0.01 && s <= 3600))
      return Status::error("GOLDMINER_AUTOSCALE_INTERVAL: invalid value '" + v +
                           "': expected seconds from 0.01 to 3600");
    setup.interval_s = s;
  }
  if (std::string job = env_value(env, "SLURM_JOB_ID"); !job.empty()) {
    auto id = integer_variable("SLURM_JOB_ID", job, 1, 4294967295L);
    if (!id.ok()) return id.status();
    setup.job_id = static_cast<uint32_t>(*id);
  }
  // The CPUs of one worker, as the job's option (cpus-per-dw) says them;
  // unset outside spank_goldminer.so: 1.
  if (std::string v = env_value(env, "GOLDMINER_CPUS_PER_DW"); !v.empty()) {
    auto cpus = integer_variable("GOLDMINER_CPUS_PER_DW", v, 1, 1 << 16);
    if (!cpus.ok()) return cpus.status();
    setup.cpus_per_dw = static_cast<double>(*cpus);
  }
  setup.ctld = env_value(env, "GOLDMINER_CTLD");
  setup.munge_socket = env_value(env, "GOLDMINER_MUNGE_SOCKET");
  setup.ctld_user = env_value(env, "GOLDMINER_CTLD_USER");
  if (!setup.ctld.empty() && setup.job_id == 0)
    return Status::error("GOLDMINER_CTLD is set but SLURM_JOB_ID is not: goldminer-ctld steers Slurm jobs only");
  setup.config.initial_workers = static_cast<int>(*dw);
  setup.config.autosizer.max_workers = static_cast<int>(*dw_max);
  setup.config.autosizer.min_workers = std::min<int>(1, static_cast<int>(*dw));

  // sbatch gets the workers' environment (the job's without Slurm's input
  // variables, as the first companion job's); squeue and scancel PATH and
  // SLURM_CONF only.
  const std::vector<std::string> worker_env =
      companion_job_env(env, trainer, static_cast<uint32_t>(*auth_job), setup.munge_socket);
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
