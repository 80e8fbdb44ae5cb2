// Starting goldminer-dw processes on this machine (goldminer-consume,
// goldminer-run, Python goldminer.Session(workers=N)), when
// launch/worker_start.h plans kLocalProcesses. The secret reaches
// each child through its environment (GOLDMINER_SECRET), never its
// command line. Each runs its program calls on one intra-op thread, as
// torch's DataLoader workers do: throughput per core comes from more
// workers and threads (goldminer-dw alone would give each call all the
// cores it sees, and several on one machine then oversubscribe them: two
// cut the JPEG benchmark to 0.17x of the DataLoader).
#ifndef GOLDMINER_TW_LIB_WORKER_PROCESSES_H_
#define GOLDMINER_TW_LIB_WORKER_PROCESSES_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "gmcore/status.h"

namespace goldminer {

// `configured` (GOLDMINER_DW_PROGRAM, as the job environment gave it) when
// not empty, else goldminer-dw next to this executable, else the installed
// one (configure's bindir), else the one on PATH.
std::string find_dw_binary(const std::string& configured);

// `dw` as spawn_worker runs it: itself when it holds a '/', else the first
// on this process's PATH (/usr/local/bin:/usr/bin:/bin when PATH is unset).
Expected<std::string> resolve_dw_path(const std::string& dw);

struct WorkerProcessOptions {
  std::string dw_path;
  std::string trainer;  // GOLDMINER_TRAINER of the child
  std::string secret;   // GOLDMINER_SECRET of the child
  unsigned threads = 1;
};

Expected<pid_t> spawn_worker(const WorkerProcessOptions& options);

// Sends `sig` to each pid, then waits up to `timeout_s` for them (SIGKILL
// after that). Only these pids are touched.
void stop_workers(const std::vector<pid_t>& pids, int sig, double timeout_s);

// Reaps those of `*pids` that have ended, without waiting for the others,
// and takes them off the list.
void reap_ended(std::vector<pid_t>* pids);

// The goldminer-dw processes one trainer started (tw_lib/session/
// trainer_launch.h): those still running are stopped (stop()) when it is
// destroyed, so no front door leaves a worker behind. Movable, not
// copyable; thread-compatible, not thread-safe.
class WorkerProcesses {
 public:
  // How one ended: its pid and waitpid's status.
  struct Exit {
    pid_t pid = 0;
    int status = 0;
  };

  WorkerProcesses() = default;
  WorkerProcesses(WorkerProcesses&& other) noexcept;
  WorkerProcesses& operator=(WorkerProcesses&& other) noexcept;
  WorkerProcesses(const WorkerProcesses&) = delete;
  WorkerProcesses& operator=(const WorkerProcesses&) = delete;
  ~WorkerProcesses();

  // Starts `count` more workers; when one cannot start, stops those this
  // call started and says why.
  Status start(const WorkerProcessOptions& options, int count);
  const std::vector<pid_t>& started() const { return started_; }  // every one, in order
  const std::vector<pid_t>& running() const { return running_; }  // started, not reaped
  // Reaps those that have ended, without waiting for the others.
  std::vector<Exit> reap();
  // Sends `sig` to those not reaped.
  void signal(int sig) const;
  // SIGTERM to those not reaped, waits up to `timeout_s`, then SIGKILL.
  void stop(double timeout_s = 10);

 private:
  std::vector<pid_t> started_, running_;
};

}  // namespace goldminer

#endif  // GOLDMINER_TW_LIB_WORKER_PROCESSES_H_
