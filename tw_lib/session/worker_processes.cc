#include "tw_lib/session/worker_processes.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "launch/admin_config.h"
#include "gmcore/auth.h"
#include "launch/subprocess.h"

namespace goldminer {

std::string find_dw_binary(const std::string& configured) {
  if (!configured.empty()) return configured;
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    std::string dir(self, static_cast<size_t>(n));
    dir = dir.substr(0, dir.rfind('/'));
    // libtool puts uninstalled binaries in .libs/ (with an lt- prefix).
    for (const std::string& candidate : {dir + "/goldminer-dw", dir + "/../goldminer-dw"})
      if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  // Where `make install` put it (admin_config's dw_command default: for a
  // trainer in a venv or container whose PATH lacks the suite's bindir),
  // else whatever PATH finds.
  for (const OptionSpec& o : admin_option_table())
    if (o.key == "dw_command" && access(o.default_value.c_str(), X_OK) == 0) return o.default_value;
  return "goldminer-dw";
}

Expected<std::string> resolve_dw_path(const std::string& dw) {
  const char* path = std::getenv("PATH");
  return find_executable(dw, path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin");
}

Expected<pid_t> spawn_worker(const WorkerProcessOptions& o) {
  // Everything the child needs is made here: it only execs (fork_for_exec).
  std::vector<std::string> env;
  for (std::string& e : process_environment())
    if (e.rfind("GOLDMINER_TRAINER=", 0) != 0 && e.rfind("GOLDMINER_SECRET=", 0) != 0) env.push_back(std::move(e));
  env.push_back("GOLDMINER_TRAINER=" + o.trainer);
  env.push_back("GOLDMINER_SECRET=" + o.secret);
  auto program = resolve_dw_path(o.dw_path);
  if (!program.ok()) return program.status();
  const std::string threads = std::to_string(o.threads);
  const std::vector<std::string> args = {*program, "--threads", threads, "--intra-op-threads", "1"};
  std::vector<char*> argv = c_strings(args), envp = c_strings(env);
  static const char kFailed[] = "goldminer: cannot run the data worker (goldminer-dw): execve failed\n";
  pid_t pid = fork_for_exec();
  if (pid < 0) return Status::error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    execve(argv[0], argv.data(), envp.data());
    ssize_t ignored = write(2, kFailed, sizeof kFailed - 1);
    (void)ignored;
    _exit(127);
  }
  return pid;
}

void reap_ended(std::vector<pid_t>* pids) {
  for (size_t i = 0; i < pids->size();) {
    const pid_t r = waitpid((*pids)[i], nullptr, WNOHANG);
    if (r == (*pids)[i] || (r < 0 && errno == ECHILD)) {
      pids->erase(pids->begin() + static_cast<long>(i));
    } else {
      ++i;
    }
  }
}

void stop_workers(const std::vector<pid_t>& pids, int sig, double timeout_s) {
  for (pid_t p : pids) kill(p, sig);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  std::vector<pid_t> left = pids;
  while (!left.empty()) {
    reap_ended(&left);
    if (left.empty()) break;
    if (std::chrono::steady_clock::now() > deadline) {
      for (pid_t p : left) {
        kill(p, SIGKILL);
        waitpid(p, nullptr, 0);
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

WorkerProcesses::WorkerProcesses(WorkerProcesses&& other) noexcept
    : started_(std::move(other.started_)), running_(std::move(other.running_)) {
  other.started_.clear();
  other.running_.clear();
}

WorkerProcesses& WorkerProcesses::operator=(WorkerProcesses&& other) noexcept {
  if (this != &other) {
    stop();
    started_ = std::move(other.started_);
    running_ = std::move(other.running_);
    other.started_.clear();
    other.running_.clear();
  }
  return *this;
}

WorkerProcesses::~WorkerProcesses() { stop(); }

Status WorkerProcesses::start(const WorkerProcessOptions& options, int count) {
  std::vector<pid_t> now;
  for (int i = 0; i < count; ++i) {
    auto pid = spawn_worker(options);
    if (!pid.ok()) {
      stop_workers(now, SIGTERM, 5);
      for (pid_t p : now) {
        running_.erase(std::find(running_.begin(), running_.end(), p));
        started_.erase(std::find(started_.begin(), started_.end(), p));
      }
      return pid.status();
    }
    now.push_back(*pid);
    started_.push_back(*pid);
    running_.push_back(*pid);
  }
  return Status();
}

std::vector<WorkerProcesses::Exit> WorkerProcesses::reap() {
  std::vector<Exit> exits;
  for (size_t i = 0; i < running_.size();) {
    int status = 0;
    const pid_t r = waitpid(running_[i], &status, WNOHANG);
    if (r == running_[i] || (r < 0 && errno == ECHILD)) {
      if (r == running_[i]) exits.push_back({r, status});
      running_.erase(running_.begin() + static_cast<long>(i));
    } else {
      ++i;
    }
  }
  return exits;
}

void WorkerProcesses::signal(int sig) const {
  for (pid_t p : running_) kill(p, sig);
}

void WorkerProcesses::stop(double timeout_s) {
  if (running_.empty()) return;
  stop_workers(running_, SIGTERM, timeout_s);
  running_.clear();
}

}  // namespace goldminer
