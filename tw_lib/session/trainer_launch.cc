#include "tw_lib/session/trainer_launch.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "gmcore/auth.h"
#include "launch/job_environment.h"

namespace goldminer {
namespace {

constexpr int64_t kMaxWorldSize = 65536;

LaunchError bad_argument(std::string message) { return {LaunchError::Kind::kBadArgument, std::move(message)}; }
LaunchError failed(std::string message) { return {LaunchError::Kind::kFailed, std::move(message)}; }

// An argument as the front door names it: "world_size" or "--world-size".
std::string name(const TrainerRequest& r, std::string keyword) {
  if (r.names == ArgumentNames::kKeywords) return keyword;
  for (char& c : keyword)
    if (c == '_') c = '-';
  return "--" + keyword;
}

// An argument with its value: "workers=2" or "--workers 2".
std::string with_value(const TrainerRequest& r, const std::string& keyword, const std::string& value) {
  return name(r, keyword) + (r.names == ArgumentNames::kKeywords ? "=" : " ") + value;
}

std::optional<LaunchError> check_request(const TrainerRequest& r) {
  bool offered = false;
  std::string expected;
  for (size_t i = 0; i < r.transports.size(); ++i) {
    offered = offered || r.transport == r.transports[i];
    expected += (i == 0 ? "" : i + 1 == r.transports.size() ? " or " : ", ") + r.transports[i];
  }
  if (!offered)
    return bad_argument(name(r, "transport") + ": invalid value '" + r.transport + "': expected " + expected);
  if (r.threads == 0) return bad_argument(name(r, "threads") + " must be at least 1");
  return std::nullopt;
}

// The rank and world size asked for, over the environment's. A rank other
// than the task's loses the port the plugin reserved for the task's.
std::optional<LaunchError> apply_ranks(const TrainerRequest& r, SessionOptions* o) {
  const uint32_t task_rank = o->rank;
  if (r.world_size) {
    if (*r.world_size < 1 || *r.world_size > kMaxWorldSize)
      return bad_argument(name(r, "world_size") + (r.names == ArgumentNames::kOptions ? ": must be" : " must be") +
                          " 1.." + std::to_string(kMaxWorldSize));
    o->world_size = static_cast<uint32_t>(*r.world_size);
    if (!r.rank) o->rank = 0;
  }
  if (r.rank) {
    const int64_t rank = *r.rank;
    const std::string w = std::to_string(o->world_size);
    if (rank < 0 || rank >= static_cast<int64_t>(o->world_size))
      return bad_argument(r.names == ArgumentNames::kOptions
                              ? "--rank: " + std::to_string(rank) + " is not a rank of world size " + w +
                                    " (ranks are 0.." + std::to_string(o->world_size - 1) + ")"
                              : "rank " + std::to_string(rank) + " is not a rank of world_size " + w);
    o->rank = static_cast<uint32_t>(rank);
  }
  if (o->rank != task_rank) o->rank_listen.clear();
  return std::nullopt;
}

// Where the session listens (see TrainerRequest::listen); `from_environment`:
// GOLDMINER_LISTEN's address, "" when unset.
std::optional<LaunchError> resolve_listen(const TrainerRequest& r, const std::string& from_environment,
                                          SessionOptions* o) {
  const bool ucx = r.transport == "ucx";
  if (ucx && !r.rank0.empty()) o->rank0 = r.rank0.rfind("ucx://", 0) == 0 ? r.rank0 : "ucx://" + r.rank0;
  if (r.transport == "mpi") {
    o->listen = "mpi://";
  } else if (r.listen) {
    std::string l = *r.listen;
    if (l.find("://") == std::string::npos) l = "ucx://" + l;
    if (l.rfind("ucx://", 0) != 0 && l.rfind("local://", 0) != 0 && l != "mpi://")
      return bad_argument(name(r, "listen") + ": invalid value '" + *r.listen +
                          "': expected ucx://HOST:PORT, HOST:PORT, local://NAME or mpi://");
    o->listen = l;
  } else if (ucx && o->world_size > 1 && !o->rank0.empty()) {
    o->listen.clear();  // Session::create: rank 0 at rank0, the others on the interface toward it
  } else if (!from_environment.empty()) {
    o->listen = from_environment;
  } else {
    o->listen = r.transport == "local" ? fresh_local_address() : "ucx://127.0.0.1:0";
  }
  return std::nullopt;
}

// The goldminer-dw processes' options: the program (`find`: found now,
// else when each starts), the secret.
std::optional<LaunchError> worker_processes(const std::string& dw, bool find, const std::string& secret, int threads,
                                            WorkerProcessOptions* w) {
  w->dw_path = dw;
  if (find) {
    auto found = resolve_dw_path(dw);
    if (!found.ok() || access(found->c_str(), X_OK) != 0)
      return failed("cannot find the data worker '" + dw + "' (set GOLDMINER_DW_PROGRAM to the goldminer-dw to run)");
    w->dw_path = *found;
  }
  w->secret = secret;
  w->threads = static_cast<unsigned>(threads);
  return std::nullopt;
}

// Whether every one of `pids` is an authenticated worker of `s` (a
// goldminer-dw introduces itself as HOST:PID).
bool all_connected(const Session& s, const std::vector<pid_t>& pids) {
  const SessionMetrics m = s.metrics();
  for (pid_t p : pids) {
    const std::string suffix = ":" + std::to_string(p);
    bool found = false;
    for (const auto& w : m.per_worker)
      if (w.id.size() > suffix.size() && w.id.compare(w.id.size() - suffix.size(), suffix.size(), suffix) == 0)
        found = true;
    if (!found) return false;
  }
  return true;
}

// A TCP port free on 127.0.0.1 now (the trainer binds it moments later).
Expected<int> free_loopback_port() {
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

std::string fresh_local_address() {
  static std::atomic<uint64_t> made{0};
  return "local://goldminer-" + std::to_string(getpid()) + "-" + std::to_string(made++);
}

std::string data_worker_program(const std::string& configured, const std::string& fallback) {
  return find_dw_binary(!configured.empty() ? configured : fallback);
}

LaunchResult<TrainerSetup> prepare_trainer(TrainerRequest r) {
  if (auto e = check_request(r)) return *e;
  TrainerSetup setup;
  SessionOptions& o = setup.session;
  o = std::move(r.session);
  o.listen.clear();
  o.rank0.clear();
  if (Status env = o.from_environment(); !env.ok()) return LaunchError{LaunchError::Kind::kBadEnvironment, env.message()};
  const std::string environment_listen = o.rank0;  // from_environment: GOLDMINER_LISTEN
  if (auto e = apply_ranks(r, &o)) return *e;
  if (r.secret && !r.secret->empty()) o.secret = *r.secret;
  if (o.secret.empty()) {
    auto secret = auth::make_secret();
    if (!secret.ok()) return failed(secret.status().message());
    o.secret = *secret;
  }
  setup.start = plan_worker_start(
      request_on_this_machine(r.transport, static_cast<int>(r.workers), static_cast<int>(r.threads)));
  if (setup.start.start == WorkerStart::kLocalThreads) {
    o.local_workers = static_cast<uint32_t>(setup.start.workers);
  } else if (!r.local_workers_from_environment) {
    o.local_workers = 0;
  }
  o.local_worker_threads = r.threads;
  if (auto e = resolve_listen(r, environment_listen, &o)) return *e;
  setup.expects_external_workers = r.listen.has_value() || !environment_listen.empty();
  if (setup.start.start == WorkerStart::kLocalProcesses) {
    if (!o.listen.empty() && o.listen.rfind("ucx://", 0) != 0)
      return bad_argument(with_value(r, "workers", std::to_string(r.workers)) + " with " + name(r, "transport") +
                          (r.names == ArgumentNames::kKeywords ? " 'ucx'" : " ucx") +
                          " needs a ucx:// address to listen on, not '" + o.listen + "'");
    if (auto e = worker_processes(data_worker_program(o.dw_program, r.dw_program), r.find_data_worker, o.secret,
                                  setup.start.threads, &setup.worker))
      return *e;
  }
  return setup;
}

LaunchResult<std::unique_ptr<Trainer>> start_trainer(TrainerSetup setup) {
  auto created = Session::create(setup.session);
  if (!created.ok()) return failed(created.status().message());
  std::unique_ptr<Session> session = std::move(created).value();
  WorkerProcesses workers;
  if (setup.start.start == WorkerStart::kLocalProcesses) {
    setup.worker.trainer = session->address();
    Status started = workers.start(setup.worker, setup.start.workers);
    if (!started.ok()) return failed(started.message());
  }
  return std::make_unique<Trainer>(std::move(session), std::move(workers), setup);
}

LaunchResult<std::unique_ptr<Trainer>> launch_trainer(TrainerRequest request) {
  auto setup = prepare_trainer(std::move(request));
  if (!setup.ok()) return setup.error();
  return start_trainer(std::move(*setup));
}

Trainer::Trainer(std::unique_ptr<Session> session, WorkerProcesses workers, const TrainerSetup& setup)
    : session_(std::move(session)),
      workers_(std::move(workers)),
      rank_(setup.session.rank),
      world_size_(setup.session.world_size),
      local_workers_(setup.session.local_workers),
      expects_external_(setup.expects_external_workers) {}

Trainer::~Trainer() { close(); }

void Trainer::close() {
  if (!session_ && workers_.running().empty()) return;
  std::unique_ptr<Session> s = std::move(session_);
  workers_.signal(SIGTERM);
  if (s && !workers_.running().empty()) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    while (std::chrono::steady_clock::now() < deadline) {
      workers_.reap();
      if (workers_.running().empty() || all_connected(*s, workers_.running())) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  s.reset();  // drains the connected workers
  workers_.stop(10);
}

LaunchResult<CommandLaunch> prepare_command(const TrainerRequest& r) {
  if (auto e = check_request(r)) return *e;
  const bool mpi = r.transport == "mpi";
  if (mpi && r.workers == 0)
    return bad_argument(with_value(r, "transport", "mpi") + " starts its workers itself: " + name(r, "workers") +
                        " must be at least 1");
  // Read before the variables set for the command: the goldminer-dw to start.
  auto job = process_job_environment(kReadBySession);
  if (!job.ok()) return LaunchError{LaunchError::Kind::kBadEnvironment, job.status().message()};
  CommandLaunch c;
  auto secret = auth::make_secret();
  if (!secret.ok()) return failed(secret.status().message());
  c.secret = *secret;
  c.start = plan_worker_start(
      request_on_this_machine(r.transport, static_cast<int>(r.workers), static_cast<int>(r.threads)));
  c.set.emplace_back("GOLDMINER_SECRET", c.secret);
  c.unset.push_back("GOLDMINER_SECRET_FILE");
  if (r.transport == "local") {
    c.address = "local://run";
    const int local = c.start.start == WorkerStart::kLocalThreads ? c.start.workers : 0;
    c.set.emplace_back("GOLDMINER_LOCAL_WORKERS", std::to_string(local));
  } else if (mpi) {
    c.address = "mpi://";
  } else {
    auto port = free_loopback_port();
    if (!port.ok()) return failed(port.status().message());
    c.address = "ucx://127.0.0.1:" + std::to_string(*port);
    c.set.emplace_back("GOLDMINER_LOCAL_WORKERS", "0");
  }
  if (!mpi) c.set.emplace_back("GOLDMINER_LISTEN", c.address);
  if (r.transport != "local" && std::getenv("UCX_NET_DEVICES") == nullptr) c.set.emplace_back("UCX_NET_DEVICES", "lo");
  const int threads = c.start.start == WorkerStart::kLocalProcesses ? c.start.threads : static_cast<int>(r.threads);
  if (auto e = worker_processes(data_worker_program(job->dw_program, r.dw_program), r.find_data_worker, c.secret,
                                threads, &c.worker))
    return *e;
  c.worker.trainer = c.address;
  return c;
}

void CommandLaunch::export_environment() const {
  for (const auto& [k, v] : set) setenv(k.c_str(), v.c_str(), 1);
  for (const std::string& k : unset) unsetenv(k.c_str());
}

Status CommandLaunch::start_workers(WorkerProcesses* workers) const {
  if (start.start != WorkerStart::kLocalProcesses) return Status();
  return workers->start(worker, start.workers);
}

std::vector<std::string> mpirun_command(const CommandLaunch& launch, const std::vector<std::string>& trainer,
                                        uint32_t workers, uint32_t threads) {
  std::vector<std::string> args = {"mpirun", "--allow-run-as-root", "--oversubscribe", "-x", "GOLDMINER_SECRET",
                                   "-x",     "UCX_NET_DEVICES",     "-np",             "1"};
  // This program, by its path (mpirun starts it anew).
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  args.push_back(n > 0 ? std::string(self, static_cast<size_t>(n)) : std::string("/proc/self/exe"));
  args.insert(args.end(), trainer.begin() + (trainer.empty() ? 0 : 1), trainer.end());
  for (const std::string& w : {std::string(":"), std::string("-np"), std::to_string(workers), launch.worker.dw_path,
                               std::string("--trainer"), launch.address, std::string("--threads"),
                               std::to_string(threads)})
    args.push_back(w);
  return args;
}

}  // namespace goldminer
