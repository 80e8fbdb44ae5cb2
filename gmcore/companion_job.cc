#include "gmcore/companion_job.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <cerrno>
#include <chrono>
#include <map>
#include <optional>
#include <sstream>
#include <cstdlib>
#include <thread>

#include "gmcore/host_port.h"

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


Expected<std::string> node_address(const std::string& interface) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0)
    return interface.empty() ? Expected<std::string>(std::string("127.0.0.1"))
                             : Status::error("dw_network: cannot list this node's network interfaces");
  std::string v4, v6;
  bool seen = false;
  for (ifaddrs* a = list; a != nullptr && v4.empty(); a = a->ifa_next) {
    if (!interface.empty() ? interface != a->ifa_name
                           : (a->ifa_flags & IFF_UP) == 0 || (a->ifa_flags & IFF_LOOPBACK) != 0)
      continue;
    seen = true;
    if (a->ifa_addr == nullptr) continue;
    char text[INET6_ADDRSTRLEN] = {};
    if (a->ifa_addr->sa_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
      if (inet_ntop(AF_INET, &in->sin_addr, text, sizeof text) != nullptr) v4 = text;
    } else if (a->ifa_addr->sa_family == AF_INET6 && !interface.empty() && v6.empty()) {
      // Link-local addresses only mean something with their interface
      // (fe80::1%eth1), which another node names differently: skipped.
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(a->ifa_addr);
      if (!IN6_IS_ADDR_LINKLOCAL(&in6->sin6_addr) && inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text) != nullptr)
        v6 = text;
    }
  }
  freeifaddrs(list);
  if (!v4.empty()) return v4;
  if (!v6.empty()) return v6;
  if (interface.empty()) return std::string("127.0.0.1");
  if (!seen) return Status::error("dw_network: this node has no interface '" + interface + "'");
  return Status::error("dw_network: interface '" + interface +
                       "' has no IPv4 address and no IPv6 address other than link-local on this node");
}

std::string why_no_companion_job(const JobOptions& options) {
  if (options.dw == 0) return "dw=0: no data workers at start";
  if (options.transport == Transport::kMpi)
    return "transport=mpi: the workers share the trainer's MPI_COMM_WORLD, so the job script starts them "
           "with it (srun ... : ...)";
  return "";
}

std::string env_value(const std::vector<std::string>& env, const std::string& name) {
  const std::string prefix = name + "=";
  for (const std::string& e : env)
    if (starts_with(e, prefix.c_str())) return e.substr(prefix.size());
  return "";
}

CompanionJob plan_companion_job(const JobOptions& options, const AdminConfig& admin, const BatchJob& job) {
  CompanionJob c;
  c.trainer = "ucx://" + host_port_text(job.node_address, job.trainer_port);
  c.trainer_env = {{"GOLDMINER_LISTEN", c.trainer},
                   {"GOLDMINER_TRAINER", c.trainer},
                   {"GOLDMINER_AUTH", "munge"},
                   {"GOLDMINER_AUTH_JOB", std::to_string(job.job_id)}};

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
  if (options.mode == ScalingMode::kElastic) c.trainer_env.emplace_back("GOLDMINER_DW_SBATCH", quote_words(c.worker_sbatch_args));
  // The port is the job's: a second session of the job (a script's second
  // run, a salloc's next srun) must bind it while the first one's
  // connections are in TIME_WAIT. The job's own setting wins.
  if (env_value(job.env, "UCX_TCP_CM_REUSEADDR").empty()) c.trainer_env.emplace_back("UCX_TCP_CM_REUSEADDR", "y");

  c.sbatch_env = companion_job_env(job.env, c.trainer, job.job_id, admin.munge_socket);
  return c;
}

std::string trainer_job_ended(uint32_t job, int squeue_exit_code, const std::string& squeue_output) {
  const std::string name = "job " + std::to_string(job);
  if (squeue_exit_code != 0)
    return squeue_output.find("Invalid job id") != std::string::npos ? name + " is no longer known to Slurm" : "";
  std::string state = squeue_output.substr(0, squeue_output.find_first_of(" \n"));
  if (state.empty()) return name + " is no longer listed by squeue";
  static const char* const kEnded[] = {"COMPLETED", "COMPLETING", "CANCELLED", "FAILED",      "TIMEOUT",
                                       "NODE_FAIL", "PREEMPTED",  "BOOT_FAIL", "DEADLINE",    "OUT_OF_MEMORY",
                                       "REVOKED",   "SPECIAL_EXIT", "STAGE_OUT"};
  for (const char* s : kEnded)
    if (state == s) return name + " is " + state;
  return "";
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

CompanionState parse_companion_state(int squeue_exit_code, const std::string& squeue_output) {
  std::string state = squeue_output;
  while (!state.empty() && (state.back() == '\n' || state.back() == ' ')) state.pop_back();
  // squeue fails ("Invalid job id specified") once the job left the queue.
  if (squeue_exit_code != 0 || state.empty()) return CompanionState::kGone;
  if (state == "RUNNING" || state == "CONFIGURING") return CompanionState::kRunning;
  for (const char* ended : {"COMPLETING", "COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED",
                            "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "SPECIAL_EXIT"})
    if (state == ended) return CompanionState::kGone;
  return CompanionState::kWaiting;  // PENDING, SUSPENDED, REQUEUED, ...: cancelled
}

Status end_companion_jobs(uint32_t job_id, uint32_t uid, const SlurmCommand& run, double self_end_s,
                          double drain_grace_s, double poll_s) {
  const std::string name = companion_job_name(job_id);
  // Set once a command could not run or overran its time (a slow
  // slurmctld): no more waiting and polling, only the final scancel, so
  // that the step's end is held at most about 2 more command timeouts.
  bool give_up_waiting = false;
  // Job id -> state, of the user's jobs of that name; nothing when squeue
  // could not tell.
  auto list = [&]() -> std::optional<std::map<uint32_t, CompanionState>> {
    auto r = run("squeue", {"--noheader", "--format=%i %T", "--name=" + name, "--user=" + std::to_string(uid)});
    if (!r.ok()) give_up_waiting = true;
    if (!r.ok() || r->exit_code != 0) return std::nullopt;
    std::map<uint32_t, CompanionState> jobs = parse_job_states(r->output);
    for (auto it = jobs.begin(); it != jobs.end();)
      it = it->second == CompanionState::kGone ? jobs.erase(it) : std::next(it);
    return jobs;
  };
  auto now = list();
  if (!now) {
    auto r = run("scancel", {"--quiet", "--name=" + name, "--user=" + std::to_string(uid)});
    if (!r.ok()) return Status::error("cannot cancel jobs " + name + ": " + r.status().message());
    if (r->exit_code != 0) return Status::error("cannot cancel jobs " + name + ": scancel: " + describe(*r));
    return Status();
  }
  auto ids = [&](CompanionState want) {
    std::vector<uint32_t> out;
    for (const auto& [id, state] : *now)
      if (state == want) out.push_back(id);
    return job_list(out);
  };
  auto wait_while_running = [&](double seconds) {
    using Clock = std::chrono::steady_clock;
    const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    while (!give_up_waiting && !ids(CompanionState::kRunning).empty() && Clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::duration<double>(poll_s));
      auto next = list();
      if (next) now = std::move(next);
    }
  };
  // A session that ended drains its workers: their jobs end by themselves.
  wait_while_running(self_end_s);
  if (std::string running = ids(CompanionState::kRunning); !running.empty() && !give_up_waiting) {
    if (!run("scancel", {"--quiet", "--signal=TERM", running}).ok()) give_up_waiting = true;
    wait_while_running(drain_grace_s);
  }
  // What still waits (at once when nothing ran) or still runs.
  std::vector<uint32_t> still;
  for (const auto& [id, state] : *now) still.push_back(id);
  const std::string left = job_list(still);
  if (left.empty()) return Status();
  auto r = run("scancel", {"--quiet", left});
  if (!r.ok()) return Status::error("cannot cancel jobs " + left + ": " + r.status().message());
  if (r->exit_code != 0) return Status::error("cannot cancel jobs " + left + ": scancel: " + describe(*r));
  return Status();
}

std::map<uint32_t, CompanionState> parse_job_states(const std::string& squeue_output) {
  std::map<uint32_t, CompanionState> jobs;
  std::istringstream lines(squeue_output);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string id, state;
    if (!(words >> id >> state) || id.empty() || id.size() > 10 ||
        id.find_first_not_of("0123456789") != std::string::npos)
      continue;
    const unsigned long long v = std::strtoull(id.c_str(), nullptr, 10);
    if (v <= 0xffffffffULL) jobs[static_cast<uint32_t>(v)] = parse_companion_state(0, state);
  }
  return jobs;
}

std::string job_list(const std::vector<uint32_t>& ids) {
  std::string out;
  for (uint32_t id : ids) out += (out.empty() ? "" : ",") + std::to_string(id);
  return out;
}

std::vector<std::string> slurm_command_env(const std::vector<std::string>& job_env) {
  std::vector<std::string> env;
  for (const char* name : {"PATH", "SLURM_CONF"}) {
    std::string value = env_value(job_env, name);
    if (!value.empty()) env.push_back(std::string(name) + "=" + value);
  }
  return env;
}

std::vector<SoftLimit> job_soft_limits(const std::vector<std::string>& job_env) {
  static const std::pair<const char*, int> kNames[] = {
      {"CPU", RLIMIT_CPU},         {"FSIZE", RLIMIT_FSIZE}, {"DATA", RLIMIT_DATA},    {"STACK", RLIMIT_STACK},
      {"CORE", RLIMIT_CORE},       {"RSS", RLIMIT_RSS},     {"NPROC", RLIMIT_NPROC},  {"NOFILE", RLIMIT_NOFILE},
      {"MEMLOCK", RLIMIT_MEMLOCK}, {"AS", RLIMIT_AS}};
  std::vector<SoftLimit> limits;
  for (const auto& [name, resource] : kNames) {
    std::string value = env_value(job_env, std::string("SLURM_RLIMIT_") + name);
    if (!value.empty() && value[0] == 'U') value.erase(0, 1);
    if (value.empty() || value.size() > 20 || value.find_first_not_of("0123456789") != std::string::npos) continue;
    errno = 0;
    const unsigned long long v = std::strtoull(value.c_str(), nullptr, 10);
    if (errno == 0) limits.push_back({resource, static_cast<rlim_t>(v)});
  }
  return limits;
}

Expected<uint32_t> parse_submitted_job_id(const std::string& output) {
  std::string text = output;
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\r')) text.pop_back();
  size_t nl = text.rfind('\n');
  std::string last = nl == std::string::npos ? text : text.substr(nl + 1);
  std::string digits = last.substr(0, last.find(';'));
  bool ok = !digits.empty() && digits.size() <= 10 && digits.find_first_not_of("0123456789") == std::string::npos;
  if (ok) {
    unsigned long long v = std::strtoull(digits.c_str(), nullptr, 10);
    if (v > 0 && v <= 0xffffffffULL) return static_cast<uint32_t>(v);
  }
  return Status::error("sbatch printed no job id: '" + text + "'");
}

std::string quote_words(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) {
    if (!out.empty()) out += ' ';
    const bool plain = !w.empty() && w.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                                         "0123456789-_=./,:%+@") == std::string::npos;
    if (plain) {
      out += w;
      continue;
    }
    out += '\'';
    for (char c : w) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out += '\'';
  }
  return out;
}

Expected<std::vector<std::string>> split_words(const std::string& text) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
      continue;
    }
    in_word = true;
    if (c == '\'') {
      const size_t close = text.find('\'', i + 1);
      if (close == std::string::npos)
        return Status::error("unterminated ' at offset " + std::to_string(i));
      word.append(text, i + 1, close - i - 1);
      i = close;
    } else if (c == '"') {
      size_t j = i + 1;
      for (; j < text.size() && text[j] != '"'; ++j) {
        if (text[j] == '\\' && j + 1 < text.size() && std::string("\"\\$`").find(text[j + 1]) != std::string::npos)
          ++j;
        word += text[j];
      }
      if (j >= text.size()) return Status::error("unterminated \" at offset " + std::to_string(i));
      i = j;
    } else if (c == '\\') {
      if (i + 1 >= text.size()) return Status::error("a lone \\ at the end");
      word += text[++i];
    } else {
      word += c;
    }
  }
  if (in_word) words.push_back(std::move(word));
  return words;
}

}  // namespace goldminer
