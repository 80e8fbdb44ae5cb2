// The data worker's loop (goldminer-dw), Slurm- and torch-free: connect to a
// trainer session, prove the job secret, receive the worker program and the
// reader configuration, then lease split -> read -> decode -> batch -> run
// the program -> send, until the trainer drains it or `stop` is set
// (SIGTERM: finish the batch in hand, return the leases, return 0).
//
// Threads: `threads` producers each work on one leased split; the calling
// thread owns the connection (credits, leases, heartbeats, sending).
#ifndef GOLDMINER_DW_DAEMON_WORKER_H_
#define GOLDMINER_DW_DAEMON_WORKER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "dw_daemon/program.h"
#include "gmcore/peer_auth.h"
#include "gmcore/status.h"

namespace goldminer::dw {

struct WorkerOptions {
  std::string trainer;          // the session's address
  std::string secret;           // the job secret (unused with munge)
  auth::MungeAuth munge;        // set: prove job and uid with munge (gmcore/peer_auth.h)
  std::string id;               // how this worker introduces itself (host:pid)
  uint32_t threads = 1;         // producer threads (splits in progress)
  double heartbeat_s = 1.0;
  double connect_timeout_s = 30;  // retried until then (the trainer may start later)
  double drain_timeout_s = 30;  // waiting for credits to send finished batches
  // Silence from a connected trainer this long ends the worker: the
  // session sends a heartbeat every kSessionHeartbeatS, so silence means
  // its process is stopped or its node is gone (no FIN ever comes).
  double trainer_timeout_s = 60;
  // While the trainer is out of reach, asked every trainer_check_s: why it
  // will never come ("" while it may), e.g. its Slurm job ended
  // (goldminer-dw --trainer-job). Unset: only connect_timeout_s ends the wait.
  std::function<std::string()> trainer_gone;
  double trainer_check_s = 30;
  // Where the trainer published that it listens instead
  // (launch/trainer_rendezvous.h), "" for nowhere: asked when the process
  // at `trainer` does not prove the job, or while it is out of reach, at
  // most every rediscover_interval_s. After such a failed proof the worker
  // looks for rediscover_timeout_s, then fails naming both. Unset: a
  // failed proof ends the worker.
  std::function<std::string()> published_trainer;
  double rediscover_interval_s = 1;
  double rediscover_timeout_s = 120;
  uint32_t shm_mb = 256;        // shared-memory arena for a trainer on this node (0: none)
  ProgramLoader load_program;   // how to load the trainer's program
  // Runs first on each producer thread (0 .. threads-1): goldminer-dw binds
  // it to a core there (dw_daemon/cpu_binding.h). Unset: nothing.
  std::function<void(uint32_t index)> on_producer_start;
};

struct WorkerReport {
  uint64_t batches_sent = 0;
  uint64_t splits_done = 0;
  uint64_t splits_returned = 0;  // given back while draining
  // Given back failed: its environment's fault (its Python process killed,
  // a read error of the OS). The worker goes on; the trainer re-leases them.
  uint64_t splits_failed = 0;
  bool drained = false;  // left because asked to (trainer's drain or stop)
  uint64_t batches_shared_memory = 0;  // frames (batches) through the shared-memory arena
  uint64_t batches_built_in_place = 0;  // of those, built there (no copy by the transport)
  std::string shared_memory;           // the transport's shared-memory status ("" if it has none)
};

// "NODE:PID", how a worker introduces itself by default: NODE is the Slurm
// node name ($SLURMD_NODENAME) in a Slurm task, else the host name.
std::string default_worker_id();

// The error run_worker returns when `stop` was set before the trainer
// answered (nothing to drain).
extern const char* const kStopped;
// The start of the error run_worker returns when trainer_gone said the
// trainer will never come (nothing to serve, nothing to drain).
extern const char* const kTrainerGone;

// Runs until drained (OK), or an error (trainer unreachable, refused, gone
// without a drain, corrupt input, failing program). A split that fails
// through the worker's environment (Status::environment_error: its Python
// process killed, say by the OOM killer; a read error of the OS) is given
// back failed (wire::LeaseReturn::failed) for the trainer to re-lease, and
// the worker goes on: a Python program starts a new process in place of
// the one that died. Its own end (SIGKILL of goldminer-dw) is a lost
// worker, whose splits the trainer re-leases as well.
Expected<WorkerReport> run_worker(const WorkerOptions& options, const std::atomic<bool>& stop);

}  // namespace goldminer::dw

#endif  // GOLDMINER_DW_DAEMON_WORKER_H_
