// A trainer's setup on this machine, the one sequence behind
// goldminer-consume, goldminer-run and goldminer.Session:
//
//   the job's environment -> SessionOptions (from_environment)
//   -> the rank and world size asked for (checked; the port reserved for
//      the task's own rank dropped when the rank differs)
//   -> the secret (given, the environment's, or a fresh one)
//   -> who starts the workers (launch/worker_start.h)
//   -> where the session listens (local://NAME, ucx://HOST:PORT, mpi://)
//   -> Session::create -> goldminer-dw processes for it
//   -> at the end: the workers stopped.
//
// A front door parses its own arguments into a TrainerRequest, calls
// launch_trainer (or prepare_trainer, then start_trainer, when it adjusts
// the options in between), and maps a LaunchError to its own form: exit
// status 2 or 1, ValueError or RuntimeError. goldminer-run, which runs a
// command rather than a Session, calls prepare_command (the command's
// address, secret and environment, and the worker plan) and then starts
// the workers itself for that address (CommandLaunch::start_workers).
#ifndef GOLDMINER_TW_LIB_SESSION_TRAINER_LAUNCH_H_
#define GOLDMINER_TW_LIB_SESSION_TRAINER_LAUNCH_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "goldminer/session.h"
#include "launch/worker_start.h"
#include "tw_lib/session/worker_processes.h"

namespace goldminer {

// How the front door's arguments are named in its errors.
enum class ArgumentNames {
  kKeywords,  // goldminer.Session's: rank, world_size, transport
  kOptions,   // a command's: --rank, --world-size, --transport
};

// Why a launch did not happen, and whose the fault is.
struct LaunchError {
  enum class Kind {
    kBadArgument,     // the request (goldminer-consume: exit 2; Python: ValueError)
    kBadEnvironment,  // a GOLDMINER_*, RANK or SLURM_* variable (exit 2; RuntimeError)
    kFailed,          // could not be carried out (exit 1; RuntimeError)
  };
  Kind kind = Kind::kFailed;
  std::string message;  // without the front door's prefix
};

// A value, or the LaunchError that says why there is none.
template <typename T>
class LaunchResult {
 public:
  LaunchResult(T value) : v_(std::move(value)) {}          // NOLINT: implicit by design
  LaunchResult(LaunchError error) : v_(std::move(error)) {}  // NOLINT
  bool ok() const { return v_.index() == 0; }
  const LaunchError& error() const { return std::get<1>(v_); }
  T& value() { return std::get<0>(v_); }
  T* operator->() { return &std::get<0>(v_); }
  T& operator*() { return std::get<0>(v_); }

 private:
  std::variant<T, LaunchError> v_;
};

struct TrainerRequest {
  // ucx, local (workers as threads of the session) or mpi (the trainer is
  // rank 0 of an MPI job whose other ranks are the workers); the ones the
  // front door offers, the first its default.
  std::string transport = "ucx";
  std::vector<std::string> transports = {"ucx", "local", "mpi"};
  uint32_t workers = 0;  // data workers to start on this machine
  uint32_t threads = 1;  // each one's threads, at least 1
  // Where the session listens, as the caller gave it: ucx://HOST:PORT,
  // HOST:PORT (ucx), local://NAME or mpi://. Not given: the environment's
  // GOLDMINER_LISTEN, else ucx://127.0.0.1:0 or a fresh local://NAME
  // (mpi: always mpi://); with world_size > 1 and rank0 over ucx, the
  // session's choice (Session::create: rank 0 at rank0, the others on the
  // interface toward it).
  std::optional<std::string> listen;
  // ucx: where rank 0 listens (HOST:PORT or ucx://HOST:PORT); "": the
  // environment's GOLDMINER_LISTEN, if any.
  std::string rank0;
  // Override the environment's (RANK/WORLD_SIZE, SLURM_PROCID/...):
  // world_size 1..65536, rank below it; world_size alone means rank 0.
  std::optional<int64_t> rank, world_size;
  std::optional<std::string> secret;  // given; empty or none: the environment's, else fresh
  // Whether GOLDMINER_LOCAL_WORKERS adds worker threads when `workers`
  // starts none (goldminer-consume's are its --workers alone).
  bool local_workers_from_environment = true;
  // The goldminer-dw to start when GOLDMINER_DW_PROGRAM is unset; "": the
  // one find_dw_binary() finds.
  std::string dw_program;
  // Whether a goldminer-dw that cannot be found is an error before
  // anything starts (goldminer.Session); else each worker that cannot
  // start exits, as its front door then reports.
  bool find_data_worker = true;
  ArgumentNames names = ArgumentNames::kKeywords;
  // The session's data options (input, program, batch size, ...); the
  // launch sets its listen, rank0, rank, world_size, secret and workers.
  SessionOptions session;
};

// The request carried out up to Session::create: what the session and
// its worker processes are made with.
struct TrainerSetup {
  SessionOptions session;
  WorkerStartPlan start;
  // kLocalProcesses: the goldminer-dw (found), the secret, its threads;
  // the trainer's address is the session's, filled in at start.
  WorkerProcessOptions worker;
  // Whether workers that this launch does not start are expected (the
  // caller or the environment named the listen address).
  bool expects_external_workers = false;
};

// A running trainer: the session and the goldminer-dw processes started
// for it, stopped with it. Thread-compatible; session() is as thread-safe
// as Session.
class Trainer {
 public:
  Trainer(std::unique_ptr<Session> session, WorkerProcesses workers, const TrainerSetup& setup);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  Session& session() { return *session_; }
  bool closed() const { return session_ == nullptr; }
  WorkerProcesses& workers() { return workers_; }
  uint32_t rank() const { return rank_; }
  uint32_t world_size() const { return world_size_; }
  uint32_t local_workers() const { return local_workers_; }  // threads of the session
  bool expects_external_workers() const { return expects_external_; }
  // Ends the session and the workers: SIGTERM first, while the session
  // still answers (a goldminer-dw still starting or in its handshake
  // finishes that and leaves; with the listener gone it would wait out
  // its send timeout), up to 3 s until each is gone or connected; then
  // the session drains the connected ones as it ends; then those left are
  // stopped (SIGKILL after 10 s). Idempotent.
  void close();

 private:
  std::unique_ptr<Session> session_;
  WorkerProcesses workers_;
  uint32_t rank_ = 0, world_size_ = 1, local_workers_ = 0;
  bool expects_external_ = false;
};

// The environment, the checks and the decisions; nothing started yet.
LaunchResult<TrainerSetup> prepare_trainer(TrainerRequest request);
// Session::create, then the worker processes the setup plans.
LaunchResult<std::unique_ptr<Trainer>> start_trainer(TrainerSetup setup);
// prepare_trainer, then start_trainer.
LaunchResult<std::unique_ptr<Trainer>> launch_trainer(TrainerRequest request);

// A command's trainer (goldminer-run's COMMAND; goldminer-consume run again
// under mpirun): what it is given and who starts its workers.
struct CommandLaunch {
  std::string address;  // GOLDMINER_LISTEN of the command ("mpi://": none)
  std::string secret;   // GOLDMINER_SECRET of the command and its workers
  // The command's variables to set (GOLDMINER_SECRET, GOLDMINER_LISTEN,
  // GOLDMINER_LOCAL_WORKERS, UCX_NET_DEVICES=lo when unset) and to unset
  // (GOLDMINER_SECRET_FILE).
  std::vector<std::pair<std::string, std::string>> set;
  std::vector<std::string> unset;
  WorkerStartPlan start;
  WorkerProcessOptions worker;  // the goldminer-dw, the secret, its threads

  // Sets and unsets `set` and `unset` in this process, for the command.
  void export_environment() const;
  // kLocalProcesses: the workers for `address`; else none.
  Status start_workers(WorkerProcesses* workers) const;
};

// The command's address (ucx: a free port on 127.0.0.1; local://run;
// mpi://), a fresh secret (the workers are this run's), its environment
// and the worker plan; request.listen, rank, world_size and secret are not
// used. With transport mpi outside an MPI job the request must ask for at
// least one worker (mpirun starts them: mpirun_command).
LaunchResult<CommandLaunch> prepare_command(const TrainerRequest& request);

// mpirun's arguments that run `trainer` (this program's arguments; the
// program itself by its path) as rank 0 and `workers` goldminer-dw of
// `threads` threads as ranks 1..N, with the command's secret and
// UCX_NET_DEVICES passed on.
std::vector<std::string> mpirun_command(const CommandLaunch& launch, const std::vector<std::string>& trainer,
                                        uint32_t workers, uint32_t threads);

// A fresh in-process address, local://goldminer-PID-N.
std::string fresh_local_address();

// The goldminer-dw to start: `configured` (GOLDMINER_DW_PROGRAM) when set,
// else `fallback` when set, else find_dw_binary()'s.
std::string data_worker_program(const std::string& configured, const std::string& fallback);

}  // namespace goldminer

#endif  // GOLDMINER_TW_LIB_SESSION_TRAINER_LAUNCH_H_
