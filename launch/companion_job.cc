#include "launch/companion_job.h"

#include <chrono>
#include <map>
#include <optional>
#include <thread>

#include "gmcore/host_port.h"
#include "launch/shell_quote.h"

namespace goldminer {
namespace {

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// Variables that describe the batch job to Slurm's commands, or that are
// ours: not passed on to the companion job.
bool slurm_input_or_ours(const std::string& entry) {
  if (starts_with(entry, "SLURM_CONF=")) return false;
  // _SLURM_SPANK_OPTION_*: srun would forward the job's --goldminer to the
  // workers' step; SLURM_SPANK_*: sbatch would take it as the companion
  // job's own, and that job would start workers of its own.
  for (const char* prefix : {"SLURM_", "SBATCH_", "SALLOC_", "SRUN_", "GOLDMINER_", "_SLURM_SPANK_OPTION_", "SPANK_"})
    if (starts_with(entry, prefix)) return true;
  return false;
}

}  // namespace

std::string why_no_companion_job(const JobOptions& options) {
  if (options.dw == 0) return "dw=0: no data workers at start";
  if (options.transport == Transport::kMpi)
    return "transport=mpi: the workers share the trainer's MPI_COMM_WORLD, so the job script starts them "
           "with it (srun ... : ...)";
  return "";
}

CompanionJob plan_companion_job(const JobOptions& options, const AdminConfig& admin, const BatchJob& job) {
  CompanionJob c;
  c.trainer = "ucx://" + host_port_text(job.node_address, job.trainer_port);
  c.trainer_env = {{"GOLDMINER_LISTEN", c.trainer},
                   {"GOLDMINER_TRAINER", c.trainer},
                   {"GOLDMINER_AUTH", "munge"},
                   {"GOLDMINER_AUTH_JOB", std::to_string(job.job_id)}};
  if (job.ucx_port != 0) c.trainer_env.emplace_back("GOLDMINER_UCX_PORT", std::to_string(job.ucx_port));

  for (const std::string& dir : {job.work_dir, env_value(job.env, "PWD"), env_value(job.env, "SLURM_SUBMIT_DIR")}) {
    if (!dir.empty() && dir[0] == '/') {
      c.work_dir = dir;
      break;
    }
  }
  if (c.work_dir.empty()) c.work_dir = "/";

  const std::string id = std::to_string(job.job_id);
  std::string partition = admin.dw_partition.empty() ? env_value(job.env, "SLURM_JOB_PARTITION") : admin.dw_partition;
  std::string qos = admin.dw_qos.empty() ? env_value(job.env, "SLURM_JOB_QOS") : admin.dw_qos;
  std::string account = env_value(job.env, "SLURM_JOB_ACCOUNT");
  c.sbatch_args = {"--parsable",
                   "--job-name=" + companion_job_name(job.job_id),
                   "--comment=goldminer data workers of job " + id,
                   "--ntasks=" + std::to_string(options.dw),
                   "--cpus-per-task=" + std::to_string(options.cpus_per_dw),
                   "--chdir=" + c.work_dir,
                   "--output=goldminer-dw-%j.out",
                   "--export=ALL"};
  if (!partition.empty()) c.sbatch_args.push_back("--partition=" + partition);
  if (!qos.empty()) c.sbatch_args.push_back("--qos=" + qos);
  if (!account.empty()) c.sbatch_args.push_back("--account=" + account);
  // At most the batch job's time left when it is submitted: the companion
  // job then ends by itself at the latest that long after it starts, even
  // when the batch node is lost and no slurmstepd is left to cancel it.
  if (!job.time_left.empty()) c.sbatch_args.push_back("--time=" + job.time_left);
  // dw_command is an absolute path of [A-Za-z0-9/_.+-] (admin_config), so
  // it needs no quoting in the script --wrap writes. -v: the workers' output
  // file says how each connected and what it sent.
  c.sbatch_args.push_back("--wrap=exec srun --mpi=none " + admin.dw_command + " --threads " +
                          std::to_string(options.cpus_per_dw) + " --connect-timeout " +
                          std::to_string(kCompanionConnectTimeoutS) + " --trainer-job " + id + " -v");
  c.worker_sbatch_args = c.sbatch_args;
  for (std::string& a : c.worker_sbatch_args)
    if (starts_with(a, "--ntasks=")) a = "--ntasks=1";
  if (job.elastic) c.trainer_env.emplace_back("GOLDMINER_DW_SBATCH", quote_words(c.worker_sbatch_args));
  // The port is the job's: a second session of the job (a script's second
  // run, a salloc's next srun) must bind it while the first one's
  // connections are in TIME_WAIT. The job's own setting wins.
  if (env_value(job.env, "UCX_TCP_CM_REUSEADDR").empty()) c.trainer_env.emplace_back("UCX_TCP_CM_REUSEADDR", "y");

  c.sbatch_env = companion_job_env(job.env, c.trainer, job.job_id, admin.munge_socket);
  return c;
}

std::string companion_job_name(uint32_t job_id) { return "goldminer-dw." + std::to_string(job_id); }

std::vector<std::string> companion_job_env(const std::vector<std::string>& env, const std::string& trainer,
                                           uint32_t auth_job, const std::string& munge_socket) {
  std::vector<std::string> out;
  for (const std::string& e : env)
    if (!slurm_input_or_ours(e)) out.push_back(e);
  out.push_back("GOLDMINER_TRAINER=" + trainer);
  out.push_back("GOLDMINER_AUTH=munge");
  out.push_back("GOLDMINER_AUTH_JOB=" + std::to_string(auth_job));
  if (!munge_socket.empty()) out.push_back("GOLDMINER_MUNGE_SOCKET=" + munge_socket);
  return out;
}

Status end_companion_jobs(uint32_t job_id, uint32_t uid, const SlurmCommand& run, double self_end_s,
                          double drain_grace_s, double poll_s) {
  const std::string name = companion_job_name(job_id);
  // Set once a command could not run or overran its time (a slow
  // slurmctld): no more waiting and polling, only the final scancel, so
  // that the step's end is held at most about 2 more command timeouts.
  bool give_up_waiting = false;
  const SlurmCommand watched = [&](const std::string& command, const std::vector<std::string>& args) {
    auto r = run(command, args);
    if (!r.ok()) give_up_waiting = true;
    return r;
  };
  // Job id -> state, of the user's jobs of that name; nothing when squeue
  // could not tell.
  auto list = [&]() -> std::optional<std::map<uint32_t, JobState>> {
    auto jobs = named_job_states(watched, name, uid);
    if (!jobs.ok()) return std::nullopt;
    for (auto it = jobs->begin(); it != jobs->end();)
      it = it->second == JobState::kGone ? jobs->erase(it) : std::next(it);
    return std::move(jobs).value();
  };
  auto now = list();
  if (!now) {
    Status st = cancel_named(run, name, uid);
    if (!st.ok()) return Status::error("cannot cancel jobs " + name + ": " + st.message());
    return Status();
  }
  auto ids = [&](JobState want) {
    std::vector<uint32_t> out;
    for (const auto& [id, state] : *now)
      if (state == want) out.push_back(id);
    return out;
  };
  auto wait_while_running = [&](double seconds) {
    using Clock = std::chrono::steady_clock;
    const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    while (!give_up_waiting && !ids(JobState::kRunning).empty() && Clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::duration<double>(poll_s));
      auto next = list();
      if (next) now = std::move(next);
    }
  };
  // A session that ended drains its workers: their jobs end by themselves.
  wait_while_running(self_end_s);
  if (std::vector<uint32_t> running = ids(JobState::kRunning); !running.empty() && !give_up_waiting) {
    // Its own failure (scancel exited non-zero) is not a reason to stop
    // waiting; only one that could not run is (watched).
    (void)cancel_jobs(watched, running, CancelScope::kTerminate);
    wait_while_running(drain_grace_s);
  }
  // What still waits (at once when nothing ran) or still runs.
  std::vector<uint32_t> still;
  for (const auto& [id, state] : *now) still.push_back(id);
  if (still.empty()) return Status();
  Status st = cancel_jobs(run, still, CancelScope::kAll);
  if (!st.ok()) return Status::error("cannot cancel jobs " + job_list(still) + ": " + st.message());
  return Status();
}

}  // namespace goldminer
