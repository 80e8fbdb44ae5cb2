// goldminer-run: runs a training command with N data workers on this
// machine, without Slurm (see goldminer-run(1)). The trainer's
// goldminer.Session / goldminer::Session finds its address and the job
// secret in the environment (SessionOptions::from_environment()):
//   ucx:   GOLDMINER_LISTEN=ucx://127.0.0.1:PORT for the command, the same
//          address as GOLDMINER_TRAINER for N goldminer-dw processes;
//   local: GOLDMINER_LISTEN=local://run and GOLDMINER_LOCAL_WORKERS=N: the
//          workers are threads of the trainer process.
// Exits with the command's status.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "tools/goldminer_run_options.h"
#include "tw_lib/session/trainer_launch.h"

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

}  // namespace

int main(int argc, char** argv) {
  RunArgs a;
  CommandLine command_line;
  if (int rc = parse_main_command_line(run_command(&a), argc, argv, &command_line); rc >= 0) return rc;
  if (a.command.empty()) return fail("no command: goldminer-run --workers N -- COMMAND [ARG...]", 2);
  // The command's address, secret and environment, and who starts its
  // workers: its session (local: GOLDMINER_LOCAL_WORKERS) or this program.
  TrainerRequest request;
  request.names = ArgumentNames::kOptions;
  request.transport = a.transport;
  request.transports = {"ucx", "local"};
  request.workers = a.workers;
  request.threads = a.threads;
  request.find_data_worker = false;  // a worker that cannot start says so itself
  auto launch = prepare_command(request);
  if (!launch.ok()) return fail(launch.error().message, launch.error().kind == LaunchError::Kind::kFailed ? 1 : 2);
  launch->export_environment();
  std::vector<std::string>& command = a.command;

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
  WorkerProcesses workers;
  if (Status started = launch->start_workers(&workers); !started.ok()) {
    stop_workers({trainer}, SIGTERM, 5);
    return fail(started.message(), 1);
  }
  for (pid_t pid : workers.started()) std::fprintf(stderr, "worker pid %d\n", static_cast<int>(pid));
  g_trainer = trainer;
  sigprocmask(SIG_SETMASK, &old, nullptr);
  int status = 0;
  while (waitpid(trainer, &status, 0) < 0 && errno == EINTR) {
  }
  workers.stop(10);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return fail(std::string("the trainer died of signal ") + strsignal(WTERMSIG(status)), 128 + WTERMSIG(status));
  return 1;
}
