// Starting goldminer-dw processes on this machine (goldminer-consume,
// goldminer-run, Python goldminer.Session(workers=N)). The secret reaches
// each child through its environment (GOLDMINER_SECRET), never its
// command line.
#ifndef GOLDMINER_TW_LIB_WORKER_PROCESSES_H_
#define GOLDMINER_TW_LIB_WORKER_PROCESSES_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "gmcore/status.h"

namespace goldminer {

// $GOLDMINER_DW_PROGRAM, else goldminer-dw next to this executable, else the one
// on PATH.
std::string find_dw_binary();

struct WorkerProcessOptions {
  std::string dw_path;
  std::string trainer;  // GOLDMINER_TRAINER of the child
  std::string secret;   // GOLDMINER_SECRET of the child
  unsigned threads = 1;
  // How many goldminer-dw the caller starts on this machine: each gets
  // --intra-op-threads = this process's cores / (workers * threads), at
  // least 1, so that together they do not oversubscribe the cores (alone,
  // goldminer-dw would take all of them for each program call).
  unsigned workers_here = 1;
};

Expected<pid_t> spawn_worker(const WorkerProcessOptions& options);

// Sends `sig` to each pid, then waits up to `timeout_s` for them (SIGKILL
// after that). Only these pids are touched.
void stop_workers(const std::vector<pid_t>& pids, int sig, double timeout_s);

}  // namespace goldminer

#endif  // GOLDMINER_TW_LIB_WORKER_PROCESSES_H_
