// goldminer-run: runs a training command with N data workers on this
// machine, without Slurm (see goldminer-run(1)). The trainer's
// goldminer.Session / goldminer::Session finds its address and the job
// secret in the environment (SessionOptions::from_environment()):
//   ucx:   GOLDMINER_LISTEN=ucx://127.0.0.1:PORT for the command, the same
//          address as GOLDMINER_TRAINER for N goldminer-dw processes;
//   local: GOLDMINER_LISTEN=local://run and GOLDMINER_LOCAL_WORKERS=N: the
//          workers are threads of the trainer process.
// Exits with the command's status.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "gmcore/auth.h"
#include "launch/job_environment.h"
#include "launch/worker_start.h"
#include "tools/goldminer_run_options.h"
#include "tw_lib/session/worker_processes.h"

using namespace goldminer;

namespace {

volatile sig_atomic_t g_trainer = 0;

// SIGINT/SIGTERM to goldminer-run go on to the trainer; the workers are
// drained once it exits.
void forward(int sig) {
  if (g_trainer > 0) kill(g_trainer, sig);
}

int fail(const std::string& message, int code) {
  std::fprintf(stderr, "goldminer-run: %s\n", message.c_str());
  return code;
}

// A TCP port free on 127.0.0.1 now (the trainer binds it moments later).
Expected<int> free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return Status::error(std::string("socket: ") + std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    const int e = errno;
    close(fd);
    return Status::error(std::string("finding a free port: ") + std::strerror(e));
  }
  close(fd);
  return ntohs(a.sin_port);
}

}  // namespace

int main(int argc, char** argv) {
  RunArgs a;
  CommandLine command_line;
  if (int rc = parse_main_command_line(run_command(&a), argc, argv, &command_line); rc >= 0) return rc;
  const unsigned workers = a.workers, threads = a.threads;
  const std::string& transport = a.transport;
  std::vector<std::string>& command = a.command;
  if (command.empty()) return fail("no command: goldminer-run --workers N -- COMMAND [ARG...]", 2);

  // The goldminer-dw to start (GOLDMINER_DW_PROGRAM), read before the
  // variables set for the command below.
  auto job = process_job_environment(kReadBySession);
  if (!job.ok()) return fail(job.status().message(), 2);
  auto secret = auth::make_secret();
  if (!secret.ok()) return fail(secret.status().message(), 1);
  setenv("GOLDMINER_SECRET", secret->c_str(), 1);
  unsetenv("GOLDMINER_SECRET_FILE");
  // Who starts the trainer's workers (launch/worker_start.h): its session
  // (local, told through GOLDMINER_LOCAL_WORKERS) or this program (ucx).
  const WorkerStartPlan start = plan_worker_start(
      request_on_this_machine(transport, static_cast<int>(workers), static_cast<int>(threads)));
  std::string address;
  if (transport == "local") {
    address = "local://run";
    setenv("GOLDMINER_LOCAL_WORKERS",
           std::to_string(start.start == WorkerStart::kLocalThreads ? start.workers : 0).c_str(), 1);
  } else {
    auto port = free_port();
    if (!port.ok()) return fail(port.status().message(), 1);
    address = "ucx://127.0.0.1:" + std::to_string(*port);
    setenv("GOLDMINER_LOCAL_WORKERS", "0", 1);
    if (std::getenv("UCX_NET_DEVICES") == nullptr) setenv("UCX_NET_DEVICES", "lo", 1);
  }
  setenv("GOLDMINER_LISTEN", address.c_str(), 1);

  // Until the trainer runs, a signal is held, then forwarded.
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  sigaddset(&block, SIGTERM);
  sigprocmask(SIG_BLOCK, &block, &old);
  struct sigaction sa {};
  sa.sa_handler = forward;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  pid_t trainer = fork();
  if (trainer < 0) return fail(std::string("fork: ") + std::strerror(errno), 1);
  if (trainer == 0) {
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    sigprocmask(SIG_SETMASK, &old, nullptr);
    std::vector<char*> args;
    for (auto& a : command) args.push_back(a.data());
    args.push_back(nullptr);
    execvp(args[0], args.data());
    std::fprintf(stderr, "goldminer-run: cannot run %s: %s\n", args[0], std::strerror(errno));
    _exit(127);
  }
  std::vector<pid_t> pids;
  if (start.start == WorkerStart::kLocalProcesses) {
    WorkerProcessOptions wp;
    wp.dw_path = find_dw_binary(job->dw_program);
    wp.trainer = address;
    wp.secret = *secret;
    wp.threads = static_cast<unsigned>(start.threads);
    for (int i = 0; i < start.workers; ++i) {
      auto pid = spawn_worker(wp);
      if (!pid.ok()) {
        stop_workers(pids, SIGTERM, 5);
        stop_workers({trainer}, SIGTERM, 5);
        return fail(pid.status().message(), 1);
      }
      pids.push_back(*pid);
      std::fprintf(stderr, "worker pid %d\n", static_cast<int>(*pid));
    }
  }
  g_trainer = trainer;
  sigprocmask(SIG_SETMASK, &old, nullptr);
  int status = 0;
  while (waitpid(trainer, &status, 0) < 0 && errno == EINTR) {
  }
  stop_workers(pids, SIGTERM, 10);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return fail(std::string("the trainer died of signal ") + strsignal(WTERMSIG(status)), 128 + WTERMSIG(status));
  return 1;
}
