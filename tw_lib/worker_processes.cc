#include "tw_lib/worker_processes.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "gmcore/auth.h"

namespace goldminer {

std::string find_dw_binary() {
  if (const char* v = std::getenv("GOLDMINER_DW_PROGRAM"); v != nullptr && *v != '\0') return v;
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    std::string dir(self, static_cast<size_t>(n));
    dir = dir.substr(0, dir.rfind('/'));
    // libtool puts uninstalled binaries in .libs/ (with an lt- prefix).
    for (const std::string& candidate : {dir + "/goldminer-dw", dir + "/../goldminer-dw"})
      if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "goldminer-dw";
}

Expected<pid_t> spawn_worker(const WorkerProcessOptions& o) {
  const std::string threads = std::to_string(o.threads);
  pid_t pid = fork();
  if (pid < 0) return Status::error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    setenv("GOLDMINER_TRAINER", o.trainer.c_str(), 1);
    setenv("GOLDMINER_SECRET", o.secret.c_str(), 1);
    execlp(o.dw_path.c_str(), o.dw_path.c_str(), "--threads", threads.c_str(), "--intra-op-threads", "1", nullptr);
    std::fprintf(stderr, "goldminer: cannot run %s: %s\n", o.dw_path.c_str(), std::strerror(errno));
    _exit(127);
  }
  return pid;
}

void stop_workers(const std::vector<pid_t>& pids, int sig, double timeout_s) {
  for (pid_t p : pids) kill(p, sig);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  std::vector<pid_t> left = pids;
  while (!left.empty()) {
    for (size_t i = 0; i < left.size();) {
      const pid_t r = waitpid(left[i], nullptr, WNOHANG);
      if (r == left[i] || (r < 0 && errno == ECHILD)) {
        left.erase(left.begin() + static_cast<long>(i));
      } else {
        ++i;
      }
    }
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

}  // namespace goldminer
