#include "launch/slurm_cli.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <utility>

#include "launch/slurm_command.h"

namespace goldminer {
namespace {

std::string trim_end(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

std::string trim(std::string s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.erase(0, 1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.pop_back();
  return s;
}

bool whole_number(const std::string& s, size_t max_digits) {
  return !s.empty() && s.size() <= max_digits && s.find_first_not_of("0123456789") == std::string::npos;
}

// A job state as squeue prints it: upper-case words joined by '_'.
bool is_state_name(const std::string& s) {
  return !s.empty() && s.size() <= 32 && s.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ_") == std::string::npos;
}

// Runs `name` and returns its output when it exited 0; otherwise an error
// "LABEL: " and its exit and last line, or the runner's own error (which
// names the program) when it could not run, after "LABEL: " unless LABEL
// is the program's name.
Expected<std::string> output_of(const SlurmCommand& run, const std::string& label, const std::string& name,
                                const std::vector<std::string>& args) {
  auto r = run(name, args);
  if (!r.ok()) return label == name ? r.status() : Status::error(label + ": " + r.status().message());
  if (r->exit_code != 0 || r->timed_out) return Status::error(label + ": " + describe(*r));
  return r->output;
}

std::string quoted(const std::string& text) { return "'" + trim_end(text).substr(0, 80) + "'"; }

}  // namespace

SlurmCommand slurm_command_on_path(std::vector<std::string> env, double timeout_s) {
  return [env = std::move(env), timeout_s](const std::string& name,
                                           const std::vector<std::string>& args) -> Expected<CommandResult> {
    auto spec = command_on_path(name, args, env);
    if (!spec.ok()) return spec.status();
    spec->timeout_s = timeout_s;
    return run_command(*spec);
  };
}

SlurmCommand user_slurm_command(double timeout_s) {
  return slurm_command_on_path(slurm_command_env(process_environment()), timeout_s);
}

Expected<uint32_t> parse_submitted_job_id(const std::string& output) {
  std::string text = trim_end(output);
  size_t nl = text.rfind('\n');
  std::string last = nl == std::string::npos ? text : text.substr(nl + 1);
  std::string digits = last.substr(0, last.find(';'));
  if (whole_number(digits, 10)) {
    unsigned long long v = std::strtoull(digits.c_str(), nullptr, 10);
    if (v > 0 && v <= 0xffffffffULL) return static_cast<uint32_t>(v);
  }
  return Status::error("sbatch printed no job id: '" + text + "'");
}

Expected<uint32_t> submit(const SlurmCommand& run, const std::vector<std::string>& sbatch_args) {
  auto r = run("sbatch", sbatch_args);
  if (!r.ok()) return r.status();
  auto id = parse_submitted_job_id(r->output);
  if (r->exit_code != 0 || r->timed_out || !id.ok()) return Status::error("sbatch: " + describe(*r));
  return *id;
}

JobState parse_job_state(int squeue_exit_code, const std::string& squeue_output) {
  std::string state = trim_end(squeue_output);
  // squeue fails ("Invalid job id specified") once the job left the queue.
  if (squeue_exit_code != 0 || state.empty()) return JobState::kGone;
  if (state == "RUNNING" || state == "CONFIGURING") return JobState::kRunning;
  for (const char* ended : {"COMPLETING", "COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED",
                            "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "SPECIAL_EXIT"})
    if (state == ended) return JobState::kGone;
  return JobState::kWaiting;  // PENDING, SUSPENDED, REQUEUED, ...: cancelled
}

std::map<uint32_t, JobState> parse_job_states(const std::string& squeue_output) {
  std::map<uint32_t, JobState> jobs;
  std::istringstream lines(squeue_output);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string id, state;
    if (!(words >> id >> state) || !whole_number(id, 10)) continue;
    const unsigned long long v = std::strtoull(id.c_str(), nullptr, 10);
    if (v <= 0xffffffffULL) jobs[static_cast<uint32_t>(v)] = parse_job_state(0, state);
  }
  return jobs;
}

bool squeue_knows_none(const std::string& squeue_output) {
  return squeue_output.find("Invalid job id") != std::string::npos;
}

std::string job_list(const std::vector<uint32_t>& ids) {
  std::string out;
  for (uint32_t id : ids) out += (out.empty() ? "" : ",") + std::to_string(id);
  return out;
}

Expected<JobStatus> job_status(const SlurmCommand& run, uint32_t job) {
  auto r = run("squeue", {"--noheader", "--jobs=" + std::to_string(job), "--format=%T %r"});
  if (!r.ok()) return r.status();
  JobStatus status;
  if (r->exit_code != 0 || r->timed_out) {
    if (!r->timed_out && squeue_knows_none(r->output)) return status;
    return Status::error("squeue: " + describe(*r));
  }
  const std::string out = trim_end(r->output);
  if (out.empty()) return status;
  // "PENDING Resources"; "RUNNING None".
  const size_t space = out.find(' ');
  status.state_name = out.substr(0, space);
  status.reason = space == std::string::npos ? "" : out.substr(space + 1);
  if (!is_state_name(status.state_name) || status.reason.find('\n') != std::string::npos)
    return Status::error("squeue: cannot read job " + std::to_string(job) + "'s state from " + quoted(out));
  if (status.reason == "None") status.reason.clear();
  status.listed = true;
  status.state = parse_job_state(0, status.state_name);
  return status;
}

Expected<std::map<uint32_t, JobState>> job_states(const SlurmCommand& run, const std::vector<uint32_t>& ids) {
  std::map<uint32_t, JobState> out;
  if (ids.empty()) return out;
  auto r = run("squeue", {"--noheader", "--format=%i %T", "--jobs=" + job_list(ids)});
  if (!r.ok()) return r.status();
  // squeue fails when it knows none of them: all gone.
  const bool knows_none = !r->timed_out && r->exit_code != 0 && squeue_knows_none(r->output);
  if ((r->exit_code != 0 || r->timed_out) && !knows_none) return Status::error("squeue: " + describe(*r));
  for (uint32_t id : ids) out[id] = JobState::kGone;
  if (knows_none) return out;
  for (const auto& [id, state] : parse_job_states(r->output))
    if (out.count(id) != 0) out[id] = state;
  return out;
}

Expected<std::map<uint32_t, JobState>> named_job_states(const SlurmCommand& run, const std::string& name, uid_t uid) {
  auto out = output_of(run, "squeue", "squeue",
                       {"--noheader", "--format=%i %T", "--name=" + name, "--user=" + std::to_string(uid)});
  if (!out.ok()) return out.status();
  return parse_job_states(*out);
}

std::string trainer_job_ended(uint32_t job, int squeue_exit_code, const std::string& squeue_output) {
  const std::string name = "job " + std::to_string(job);
  if (squeue_exit_code != 0)
    return squeue_knows_none(squeue_output) ? name + " is no longer known to Slurm" : "";
  std::string state = squeue_output.substr(0, squeue_output.find_first_of(" \n"));
  if (state.empty()) return name + " is no longer listed by squeue";
  static const char* const kEnded[] = {"COMPLETED", "COMPLETING", "CANCELLED", "FAILED",      "TIMEOUT",
                                       "NODE_FAIL", "PREEMPTED",  "BOOT_FAIL", "DEADLINE",    "OUT_OF_MEMORY",
                                       "REVOKED",   "SPECIAL_EXIT", "STAGE_OUT"};
  for (const char* s : kEnded)
    if (state == s) return name + " is " + state;
  return "";
}

std::string trainer_job_ended(const SlurmCommand& run, uint32_t job) {
  auto r = run("squeue", {"--noheader", "--states=all", "--jobs=" + std::to_string(job), "--format=%T"});
  if (!r.ok() || r->timed_out) return "";  // no answer: the connect timeout decides
  return trainer_job_ended(job, r->exit_code, r->output);
}

const char kNotKnownToSlurm[] = "not known to Slurm";

Expected<JobOwner> job_owner(const SlurmCommand& run, uint32_t job) {
  auto r = run("squeue", {"--noheader", "--jobs=" + std::to_string(job), "--format=%U %T %P"});
  if (!r.ok()) return r.status();
  if (r->exit_code != 0 || r->timed_out) {
    if (!r->timed_out && squeue_knows_none(r->output)) return Status::error(kNotKnownToSlurm);
    return Status::error("squeue: " + describe(*r));
  }
  const std::string out = trim_end(r->output);
  if (out.empty()) return Status::error(kNotKnownToSlurm);
  std::istringstream in(out);
  std::string uid, rest;
  JobOwner owner;
  if (!(in >> uid >> owner.state >> owner.partition) || (in >> rest) || !whole_number(uid, 10) ||
      !is_state_name(owner.state))
    return Status::error("squeue: cannot read job " + std::to_string(job) + "'s owner from " + quoted(out) +
                         " (expected UID STATE PARTITION)");
  owner.uid = static_cast<uid_t>(std::strtoul(uid.c_str(), nullptr, 10));
  return owner;
}

Expected<std::vector<QueuedJob>> parse_queued_jobs(const std::string& squeue_output) {
  std::vector<QueuedJob> jobs;
  std::istringstream lines(squeue_output);
  for (std::string line; std::getline(lines, line);) {
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    std::istringstream fields(line);
    long long uid = -1;
    QueuedJob job;
    job.cpus = -1;
    if (!(fields >> uid >> job.cpus >> job.state) || uid < 0 || uid > 4294967295ll ||
        !(job.cpus >= 0 && job.cpus <= 1e9))
      return Status::error("squeue: cannot read the line '" + line.substr(0, 80) + "' (expected UID CPUS STATE NAME)");
    job.uid = static_cast<uid_t>(uid);
    std::getline(fields >> std::ws, job.name);
    jobs.push_back(std::move(job));
  }
  return jobs;
}

Expected<std::vector<QueuedJob>> pending_and_running_jobs(const SlurmCommand& run) {
  auto out = output_of(run, "squeue", "squeue", {"--noheader", "--states=PENDING,RUNNING", "--format=%U %C %T %j"});
  if (!out.ok()) return out.status();
  return parse_queued_jobs(*out);
}

namespace {

constexpr int kComponentFields = 12;  // up to WorkDir, which comes last

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

// One line of kJobComponentsFormat output; an error quotes it.
Expected<JobComponent> parse_job_component(const std::string& line) {
  const Status unreadable = Status::error("squeue: cannot read a job component from '" + line + "'");
  std::vector<std::string> f;
  size_t start = 0;
  for (int i = 0; i < kComponentFields - 1; ++i) {
    size_t bar = line.find('|', start);
    if (bar == std::string::npos) break;
    f.push_back(line.substr(start, bar - start));
    start = bar + 1;
  }
  // WorkDir is the rest, without its closing '|' (a directory may hold '|').
  std::string rest = line.substr(std::min(start, line.size()));
  if (f.size() != kComponentFields - 1 || rest.empty() || rest.back() != '|') return unreadable;
  rest.pop_back();
  JobComponent c;
  long id = 0, het = 0, offset = -1, tasks = 1, cpus = 1;
  bool is_het = f[1] != "N/A" && f[1] != "0";
  if (!parse_count(f[0], 1, 0xfffffff0L, &id) || (is_het && !parse_count(f[1], 1, 0xfffffff0L, &het)) ||
      (is_het && !parse_count(f[2], 0, 1 << 20, &offset)) || !parse_count(f[3], 1, 1 << 24, &tasks) ||
      (f[4] != "N/A" && !parse_count(f[4], 1, 1 << 16, &cpus)))
    return unreadable;
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
    return Status::error(unreadable.message() + " (time left '" + f[10] + "')");
  c.work_dir = rest == "N/A" || rest == "(null)" ? "" : rest;
  return c;
}

}  // namespace

const char kJobComponentsFormat[] =
    "JobID:|,HetJobId:|,HetJobOffset:|,NumTasks:|,cpus-per-task:|,"
    "tres-per-job:|,tres-per-node:|,tres-per-socket:|,tres-per-task:|,BatchFlag:|,TimeLeft:|,WorkDir:|";

Expected<std::vector<JobComponent>> parse_job_components(const std::string& squeue_output) {
  std::vector<JobComponent> out;
  std::istringstream lines(squeue_output);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) continue;
    auto c = parse_job_component(line);
    if (!c.ok()) return c.status();
    out.push_back(std::move(*c));
  }
  return out;
}

Expected<std::vector<JobComponent>> job_components(const SlurmCommand& run, uint32_t job) {
  auto out = output_of(run, "squeue", "squeue",
                       {"--noheader", "--jobs=" + std::to_string(job), std::string("--Format=") + kJobComponentsFormat});
  if (!out.ok()) return out.status();
  return parse_job_components(*out);
}

Expected<std::string> job_comment(const SlurmCommand& run, uint32_t job) {
  const std::string id = std::to_string(job);
  auto out = output_of(run, "squeue (reading job " + id + "'s Comment)", "squeue",
                       {"--noheader", "--states=all", "--jobs=" + id, "--format=%k"});
  if (!out.ok()) return out.status();
  return trim_end(*out);
}

Status set_job_comment(const SlurmCommand& run, uint32_t job, const std::string& comment) {
  const std::string id = std::to_string(job);
  auto out = output_of(run, "scontrol update JobId=" + id + " Comment=...", "scontrol",
                       {"update", "JobId=" + id, "Comment=" + comment});
  return out.ok() ? Status() : out.status();
}

Status cancel_jobs(const SlurmCommand& run, const std::vector<uint32_t>& ids, CancelScope scope) {
  if (ids.empty()) return Status();
  std::vector<std::string> args = {"--quiet"};
  if (scope == CancelScope::kPending) args.push_back("--state=PENDING");
  if (scope == CancelScope::kTerminate) args.push_back("--signal=TERM");
  args.push_back(job_list(ids));
  auto out = output_of(run, "scancel", "scancel", args);
  return out.ok() ? Status() : out.status();
}

Status cancel_named(const SlurmCommand& run, const std::string& name, uid_t uid) {
  auto out = output_of(run, "scancel", "scancel", {"--quiet", "--name=" + name, "--user=" + std::to_string(uid)});
  return out.ok() ? Status() : out.status();
}

namespace {

// GPUs in a GRES list as `scontrol -d show node` prints Gres= and
// GresUsed= ("gpu:4", "gpu:a100:2(IDX:0-1),nic:1", "(null)"); 0 when none.
Expected<int64_t> gpus_in(const std::string& gres) {
  std::string plain;  // without the "(...)" parts, whose commas are not separators
  int depth = 0;
  for (char c : gres) {
    if (c == '(') ++depth;
    else if (c == ')') depth = std::max(0, depth - 1);
    else if (depth == 0) plain += c;
  }
  int64_t n = 0;
  std::istringstream items(plain);
  std::string item;
  while (std::getline(items, item, ',')) {
    if (item.compare(0, 4, "gpu:") != 0) continue;
    std::string count = item.substr(item.rfind(':') + 1);
    if (!whole_number(count, 12)) return Status::error("bad GPU count '" + item + "'");
    n += std::stoll(count);
  }
  return n;
}

}  // namespace

bool node_takes_jobs(const SlurmNode& node) {
  for (const char* bad : {"DOWN", "DRAIN", "FAIL", "NOT_RESPONDING", "POWER", "*"})
    if (node.state.find(bad) != std::string::npos) return false;
  return true;
}

Expected<std::vector<SlurmNode>> parse_node_lines(const std::string& text) {
  std::vector<SlurmNode> nodes;
  std::istringstream lines(text);
  std::string line;
  int number = 0;
  while (std::getline(lines, line)) {
    ++number;
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    std::map<std::string, std::string> f;
    std::istringstream words(line);
    for (std::string w; words >> w;) {
      size_t eq = w.find('=');
      if (eq != std::string::npos) f[w.substr(0, eq)] = w.substr(eq + 1);
    }
    const std::string where = "node list line " + std::to_string(number);
    for (const char* key : {"NodeName", "CPUTot", "CPUAlloc"})
      if (f.count(key) == 0) return Status::error(where + ": no " + key);
    if (!whole_number(f["CPUTot"], 12) || !whole_number(f["CPUAlloc"], 12))
      return Status::error(where + ": bad CPUTot or CPUAlloc '" + f["CPUTot"] + "', '" + f["CPUAlloc"] + "'");
    auto gpus = gpus_in(f["Gres"]);
    auto used = gpus_in(f["GresUsed"]);
    if (!gpus.ok() || !used.ok()) return Status::error(where + ": " + (gpus.ok() ? used : gpus).status().message());
    SlurmNode n;
    n.name = f["NodeName"];
    n.state = f["State"];
    std::istringstream parts(f["Partitions"]);
    for (std::string p; std::getline(parts, p, ',');)
      if (!p.empty()) n.partitions.push_back(p);
    n.cpus_total = std::stoll(f["CPUTot"]);
    n.cpus_allocated = std::stoll(f["CPUAlloc"]);
    n.gpus = *gpus;
    n.gpus_used = *used;
    nodes.push_back(std::move(n));
  }
  return nodes;
}

Expected<std::vector<SlurmNode>> node_lines(const SlurmCommand& run) {
  auto out = output_of(run, "scontrol show node", "scontrol", {"--details", "--oneliner", "show", "node"});
  if (!out.ok()) return out.status();
  auto nodes = parse_node_lines(*out);
  if (!nodes.ok()) return Status::error("scontrol show node: " + nodes.status().message());
  return nodes;
}

Expected<std::vector<std::string>> parse_host_names(const std::string& text) {
  std::vector<std::string> hosts;
  std::istringstream in(text);
  for (std::string h; in >> h;) hosts.push_back(h);
  if (hosts.empty()) return Status::error("no host names");
  return hosts;
}

Expected<std::vector<std::string>> host_names(const SlurmCommand& run, const std::string& nodelist) {
  const std::string label = "scontrol show hostnames " + nodelist;
  auto out = output_of(run, label, "scontrol", {"show", "hostnames", nodelist});
  if (!out.ok()) return out.status();
  auto hosts = parse_host_names(*out);
  if (!hosts.ok()) return Status::error(label + ": " + hosts.status().message());
  return hosts;
}

Expected<SlurmConfig> parse_slurm_config(const std::string& show_config) {
  SlurmConfig config;
  bool user = false, private_data = false;
  std::istringstream in(show_config);
  for (std::string line; std::getline(in, line);) {
    size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = trim(line.substr(0, eq)), value = trim(line.substr(eq + 1));
    if (key == "SlurmUser") {
      // "slurm(64030)"
      size_t open = value.rfind('('), close = value.rfind(')');
      std::string uid = open != std::string::npos && close > open ? value.substr(open + 1, close - open - 1) : "";
      if (!whole_number(uid, 10))
        return Status::error("scontrol show config: SlurmUser: invalid value '" + value.substr(0, 80) +
                             "': expected NAME(UID)");
      config.slurm_user = static_cast<uid_t>(std::stoul(uid));
      user = true;
    } else if (key == "PrivateData") {
      // "none", or a list: "jobs,usage,users"
      config.private_jobs = false;
      std::istringstream items(value);
      for (std::string item; std::getline(items, item, ',');)
        if (trim(item) == "jobs") config.private_jobs = true;
      private_data = true;
    }
  }
  if (!user) return Status::error("scontrol show config: no SlurmUser line");
  if (!private_data) return Status::error("scontrol show config: no PrivateData line");
  return config;
}

Expected<SlurmConfig> slurm_config(const SlurmCommand& run) {
  auto out = output_of(run, "scontrol show config", "scontrol", {"show", "config"});
  if (!out.ok()) return out.status();
  return parse_slurm_config(*out);
}

}  // namespace goldminer
