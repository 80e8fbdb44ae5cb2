// goldminer-consume: a trainer with no model, the data plane's check and
// benchmark tool (see goldminer-consume(1)). Starts N local data workers
// (or accepts external ones), consumes E epochs and prints one JSON object
// per epoch. Exit status 0 only if no epoch lost or duplicated a sample.
#include <signal.h>
#include <unistd.h>

#include <sys/resource.h>
#include <sys/wait.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "dw_daemon/program.h"
#include "gmcore/log.h"
#include "goldminer/session.h"
#include "tools/goldminer_consume_options.h"
#include "tw_lib/session/receive_memory.h"
#include "tw_lib/session/trainer_launch.h"

using namespace goldminer;

namespace {

int fail(const std::string& message, int code) {
  std::fprintf(stderr, "goldminer-consume: %s\n", message.c_str());
  return code;
}

Expected<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::error(path + ": cannot open");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The consumer's own state file: the session's position plus the samples
// already consumed this epoch, so a resumed run can check the rest.
void write_state(const std::string& path, const LeasePosition& p, const std::vector<std::vector<bool>>& seen) {
  std::ofstream out(path);
  out << "epoch " << p.epoch << "\nseed " << p.seed << "\nplan " << p.plan << "\nbad_records " << p.bad_records
      << "\ndone";
  for (uint64_t d : p.done) out << ' ' << d;
  out << "\npartial";
  for (auto [id, n] : p.partial) out << ' ' << id << ':' << n;
  out << "\nseen";
  for (size_t f = 0; f < seen.size(); ++f)
    for (size_t r = 0; r < seen[f].size(); ++r)
      if (seen[f][r]) out << ' ' << f << ':' << r;
  out << "\n";
}

Status read_state(const std::string& path, LeasePosition* p, std::vector<std::pair<uint64_t, uint64_t>>* seen) {
  std::ifstream in(path);
  if (!in) return Status::error(path + ": cannot open");
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    std::istringstream ls(line);
    std::string key;
    ls >> key;
    std::string item;
    auto pair_of = [&](const std::string& t, uint64_t* a, uint64_t* b) {
      const size_t c = t.find(':');
      if (c == std::string::npos) return false;
      try {
        *a = std::stoull(t.substr(0, c));
        *b = std::stoull(t.substr(c + 1));
      } catch (...) {
        return false;
      }
      return true;
    };
    if (key == "epoch") {
      ls >> p->epoch;
    } else if (key == "seed") {
      ls >> p->seed;
    } else if (key == "plan") {
      ls >> p->plan;
    } else if (key == "bad_records") {
      ls >> p->bad_records;
    } else if (key == "done") {
      uint64_t d;
      while (ls >> d) p->done.push_back(d);
    } else if (key == "partial" || key == "seen") {
      while (ls >> item) {
        uint64_t a, b;
        if (!pair_of(item, &a, &b)) return Status::error(path + ":" + std::to_string(n) + ": bad entry '" + item + "'");
        (key == "partial" ? p->partial : *seen).emplace_back(a, b);
      }
    } else {
      return Status::error(path + ":" + std::to_string(n) + ": unknown line '" + key + "'");
    }
    if (ls.fail() && !ls.eof()) return Status::error(path + ":" + std::to_string(n) + ": bad number");
  }
  return Status();
}

// CPU seconds (user + system) of this process and of the workers it
// started, since each started: its own, those of reaped workers, and those
// of workers still running (or exited, not reaped yet), from /proc. A
// worker reaped between the two reads is missed once.
double cpu_seconds(const std::vector<pid_t>& workers) {
  auto seconds = [](const rusage& r) {
    return r.ru_utime.tv_sec + r.ru_stime.tv_sec + (r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6;
  };
  rusage self{}, children{};
  getrusage(RUSAGE_SELF, &self);
  getrusage(RUSAGE_CHILDREN, &children);
  double total = seconds(self) + seconds(children);
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  for (pid_t pid : workers) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(f, line)) continue;
    const size_t close = line.rfind(')');  // the command name may hold spaces
    if (close == std::string::npos) continue;
    std::istringstream fields(line.substr(close + 2));
    std::string field;
    std::vector<std::string> v;
    while (fields >> field && v.size() < 13) v.push_back(field);
    // After the name: state, ppid, ... utime and stime are the 12th and 13th.
    if (v.size() < 13 || std::stol(v[1]) != getpid()) continue;
    total += (std::stod(v[11]) + std::stod(v[12])) / tick;
  }
  return total;
}

// A usage or run error: what goldminer-consume prints and its exit code.
struct Failure {
  std::string message;
  int code = 2;
};
using MaybeFailure = std::optional<Failure>;

// A launch's error as goldminer-consume says it: its request's or the
// environment's fault exits 2, a failure 1.
Failure failure_of(const LaunchError& e) {
  return Failure{e.message, e.kind == LaunchError::Kind::kFailed ? 1 : 2};
}

// What the option table's checks cannot: --numa-node's forms and
// combinations. Sets what follows from them in a.session.
MaybeFailure check_options(ConsumeArgs& a) {
  SessionOptions& o = a.session;
  if (a.numa_node == "auto") {
    o.numa_node = ReceiveMemoryOptions::kNumaAuto;
  } else if (a.numa_node == "none") {
    o.numa_node = ReceiveMemoryOptions::kNumaNone;
  } else {
    char* end = nullptr;
    const long n = std::strtol(a.numa_node.c_str(), &end, 10);
    if (a.numa_node.empty() || *end != '\0' || n < 0 || n > 4095)
      return Failure{"--numa-node: invalid value '" + a.numa_node + "': expected auto, none or a node's number"};
    o.numa_node = static_cast<int>(n);
  }
  if (a.stop_after > 0 && a.state_out.empty()) return Failure{"--stop-after-batches needs --state-out"};
  o.receive_budget_bytes = a.receive_budget_mb << 20;
  return std::nullopt;
}

// MPI: every process is part of one MPI job (mpirun sets
// OMPI_COMM_WORLD_SIZE, `srun --mpi=pmix` PMIX_RANK). Without one, this
// program runs again under mpirun as rank 0, the workers as ranks 1..N;
// returns only when that cannot start.
Failure run_under_mpirun(const ConsumeArgs& a, const TrainerRequest& request, int argc, char** argv) {
  auto launch = prepare_command(request);
  if (!launch.ok()) return failure_of(launch.error());
  launch->export_environment();
  std::vector<std::string> args =
      mpirun_command(*launch, std::vector<std::string>(argv, argv + argc), a.workers, a.threads);
  std::vector<char*> cargs;
  for (auto& arg : args) cargs.push_back(arg.data());
  cargs.push_back(nullptr);
  execvp("mpirun", cargs.data());
  return Failure{std::string("cannot run mpirun: ") + std::strerror(errno), 1};
}

// The trainer goldminer-consume asks for: its options over the job's
// environment (GOLDMINER_SECRET or GOLDMINER_SECRET_FILE as for
// goldminer-dw, the rank, GOLDMINER_LISTEN), its --workers alone (not
// GOLDMINER_LOCAL_WORKERS). The samples a resumed epoch had seen go to
// `seen_before`.
MaybeFailure trainer_request(ConsumeArgs& a, const CommandLine& command_line, TrainerRequest* r,
                             std::vector<std::pair<uint64_t, uint64_t>>* seen_before) {
  SessionOptions& o = a.session;
  o.input = a.input;
  if (!a.program_path.empty()) {
    auto p = read_file(a.program_path);
    if (!p.ok()) return Failure{"--program: " + p.status().message()};
    o.program = std::move(p).value();
  }
  if (!a.resume.empty()) {
    LeasePosition p;
    Status s = read_state(a.resume, &p, seen_before);
    if (!s.ok()) return Failure{"--resume: " + s.message()};
    o.resume = p;
  }
  r->names = ArgumentNames::kOptions;
  r->transport = a.transport;
  r->workers = a.workers;
  r->threads = a.threads;
  r->local_workers_from_environment = false;
  r->find_data_worker = false;  // a worker that cannot start: the watchdog says so
  if (a.transport == "local") {
    r->listen = "local://consume-" + std::to_string(getpid());  // --listen is for ucx
    o.program_loader = [](const std::string& bytes) { return dw::load_torchscript(bytes, 1); };
  } else if (a.transport == "ucx" && command_line.given("listen")) {
    r->listen = a.listen;
  }
  r->rank0 = a.rank0;
  if (a.rank != -1) r->rank = a.rank;
  if (a.world_size != -1) r->world_size = a.world_size;
  r->session = o;
  return std::nullopt;
}

// The workers this run started as processes: when all of them have exited
// and no other worker is connected for 3 s, nothing will ever come: says
// why and exits 1. Watches until stop() (or its end).
class WorkerWatchdog {
 public:
  WorkerWatchdog(WorkerProcesses& workers, bool active, Session& session)
      : workers_(workers), watching_(active), thread_([this, &session] { watch(session); }) {}
  ~WorkerWatchdog() { stop(); }
  void stop() {
    watching_ = false;
    if (thread_.joinable()) thread_.join();
  }

 private:
  void watch(Session& session) {
    std::map<pid_t, int> exits;  // exit status, or 128 + signal
    auto since = std::chrono::steady_clock::now();
    while (watching_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      for (const WorkerProcesses::Exit& e : workers_.reap())
        exits[e.pid] = WIFEXITED(e.status) ? WEXITSTATUS(e.status) : 128 + WTERMSIG(e.status);
      if (!workers_.running().empty() || session.metrics().workers > 0) {
        since = std::chrono::steady_clock::now();
      } else if (std::chrono::steady_clock::now() - since > std::chrono::seconds(3)) {
        std::string list;
        for (pid_t pid : workers_.started())
          list += (list.empty() ? "" : ", ") + std::to_string(pid) + " exited " +
                  std::to_string(exits.count(pid) ? exits[pid] : -1);
        std::fprintf(stderr, "goldminer-consume: every worker exited and none is connected (%s); "
                     "see their messages above\n", list.c_str());
        std::fflush(stdout);
        std::_Exit(1);
      }
    }
  }

  WorkerProcesses& workers_;
  std::atomic<bool> watching_;
  std::thread thread_;
};

// One epoch as the consumer counted it.
struct EpochTally {
  uint64_t samples = 0, unique = 0, duplicates = 0, batches = 0, bytes = 0, expected = 0;
  uint64_t id_sum = 0;
  // FNV-1a over the sample ids in the order they came: equal across runs
  // exactly when the order is (--deterministic).
  uint64_t order = 0xcbf29ce484222325ULL;
  double seconds = 0;
};

// What one epoch checks every sample against: the input's records per
// file, where each file's records start in the input, and the batches the
// run has taken (for --stop-after-batches).
struct Consumer {
  Session& session;
  const ConsumeArgs& args;
  uint32_t rank, world_size;
  std::vector<uint64_t> per_file, file_start;
  uint64_t batches_total = 0;
};

// Takes one epoch's batches (for the first, `seen_before` are the
// samples a resumed epoch had). 0: the epoch ended; 3: stopped after
// --stop-after-batches (the state written); 1: the session failed (said).
int consume_epoch(Consumer& c, uint32_t e, const std::vector<std::pair<uint64_t, uint64_t>>& seen_before,
                  EpochTally* t) {
  Session& s = c.session;
  std::vector<std::vector<bool>> seen(c.per_file.size());
  for (size_t f = 0; f < c.per_file.size(); ++f) seen[f].assign(c.per_file[f], false);
  t->expected = s.records_per_epoch();
  if (e == 0)
    for (auto [f, r] : seen_before) {
      if (f < seen.size() && r < seen[f].size() && !seen[f][r]) {
        seen[f][r] = true;
        --t->expected;
      }
    }
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    auto b = s.next();
    if (!b.ok()) return fail(b.status().message(), 1);
    if (!b->has_value()) break;
    const SessionBatch& batch = **b;
    ++t->batches;
    t->samples += batch.samples;
    for (const auto& tensor : batch.tensors) t->bytes += tensor.nbytes;
    for (uint32_t i = 0; i < batch.samples; ++i) {
      const uint64_t f = static_cast<uint64_t>(batch.sample_ids[2 * i]);
      const uint64_t r = static_cast<uint64_t>(batch.sample_ids[2 * i + 1]);
      for (uint64_t v : {f, r})
        for (int k = 0; k < 8; ++k) t->order = (t->order ^ ((v >> (8 * k)) & 0xff)) * 0x100000001b3ULL;
      if (f >= seen.size() || r >= seen[f].size()) {
        ++t->duplicates;  // not a sample of this input: counted as wrong
        continue;
      }
      t->id_sum += c.file_start[f] + r;
      if (seen[f][r]) {
        ++t->duplicates;
      } else {
        seen[f][r] = true;
        ++t->unique;
      }
    }
    ++c.batches_total;
    if (c.args.stop_after > 0 && c.batches_total >= c.args.stop_after) {
      write_state(c.args.state_out, s.state(), seen);
      return 3;
    }
  }
  t->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return 0;
}

// The epoch's line: JSON (--json) or text. `lost` and `failed`: workers
// lost and splits failed in this epoch; `missing`: samples that never came.
void print_epoch(const Consumer& c, const EpochTally& t, const SessionMetrics& m, uint64_t missing, uint64_t lost,
                 uint64_t failed, const std::vector<pid_t>& pids) {
  const double seconds = std::max(t.seconds, 1e-9);
  if (c.args.json) {
    std::printf("{\"epoch\": %u, \"samples\": %llu, \"unique_samples\": %llu, \"duplicates\": %llu, "
                "\"missing\": %llu, \"batches\": %llu, \"seconds\": %.6f, \"samples_per_s\": %.1f, "
                "\"bytes_per_s\": %.1f, \"trainer_wait_fraction\": %.4f, \"workers_lost\": %llu, "
                "\"splits_failed\": %llu, \"bad_records\": %llu, \"cpu_seconds\": %.3f, \"order_digest\": \"%016llx\", "
                "\"max_queued\": %zu, \"rank\": %u, \"world_size\": %u, \"id_sum\": %llu, "
                "\"receive_memory\": \"%s\"}\n",
                m.epoch, static_cast<unsigned long long>(t.samples), static_cast<unsigned long long>(t.unique),
                static_cast<unsigned long long>(t.duplicates), static_cast<unsigned long long>(missing),
                static_cast<unsigned long long>(t.batches), t.seconds, t.samples / seconds, t.bytes / seconds,
                m.trainer_wait_fraction, static_cast<unsigned long long>(lost),
                static_cast<unsigned long long>(failed), static_cast<unsigned long long>(m.bad_records),
                cpu_seconds(pids), static_cast<unsigned long long>(t.order), m.max_queued_batches, c.rank,
                c.world_size, static_cast<unsigned long long>(t.id_sum), c.session.receive_memory().c_str());
  } else {
    std::printf("epoch %u: %llu samples (%llu unique, %llu duplicates, %llu missing) in %llu batches, "
                "%.3f s, %.0f samples/s, %.1f MB/s, trainer waited %.0f%%, %llu workers lost, %llu bad records, "
                "order %016llx\n",
                m.epoch, static_cast<unsigned long long>(t.samples), static_cast<unsigned long long>(t.unique),
                static_cast<unsigned long long>(t.duplicates), static_cast<unsigned long long>(missing),
                static_cast<unsigned long long>(t.batches), t.seconds, t.samples / seconds, t.bytes / seconds / 1e6,
                100 * m.trainer_wait_fraction, static_cast<unsigned long long>(lost),
                static_cast<unsigned long long>(m.bad_records), static_cast<unsigned long long>(t.order));
  }
  std::fflush(stdout);
}

// Every epoch: consumed, checked, printed. 0 when every sample came once;
// 4 when one was lost or duplicated; 3 or 1 as consume_epoch says.
int consume(Consumer& c, const std::vector<std::pair<uint64_t, uint64_t>>& seen_before, const std::vector<pid_t>& pids) {
  bool clean = true;
  uint64_t lost_before = 0, failed_before = 0;
  for (uint32_t e = 0; e < c.args.epochs; ++e) {
    EpochTally t;
    if (int rc = consume_epoch(c, e, seen_before, &t); rc != 0) return rc;
    const SessionMetrics m = c.session.metrics();
    // Records skipped under --max-bad-records were reported, not lost.
    const uint64_t expected = t.expected > m.bad_records ? t.expected - m.bad_records : 0;
    const uint64_t missing = expected > t.unique ? expected - t.unique : 0;
    if (t.duplicates != 0 || missing != 0) clean = false;
    print_epoch(c, t, m, missing, m.workers_lost - lost_before, m.splits_failed - failed_before, pids);
    lost_before = m.workers_lost;
    failed_before = m.splits_failed;
  }
  return clean ? 0 : 4;
}

}  // namespace

int main(int argc, char** argv) {
  ConsumeArgs a;
  CommandLine command_line;
  if (int rc = parse_main_command_line(consume_command(&a), argc, argv, &command_line); rc >= 0) return rc;
  if (MaybeFailure f = check_options(a)) return fail(f->message, f->code);
  if (!a.verbose)
    log::set_sink([](log::Level level, const std::string& line) {
      if (level == log::Level::kError) std::fprintf(stderr, "%s\n", line.c_str());
    });
  TrainerRequest request;
  std::vector<std::pair<uint64_t, uint64_t>> seen_before;
  if (MaybeFailure f = trainer_request(a, command_line, &request, &seen_before)) return fail(f->message, f->code);
  if (a.transport == "mpi" && std::getenv("OMPI_COMM_WORLD_SIZE") == nullptr && std::getenv("PMIX_RANK") == nullptr) {
    const Failure f = run_under_mpirun(a, request, argc, argv);
    return fail(f.message, f.code);
  }
  auto trainer = launch_trainer(std::move(request));
  if (!trainer.ok()) {
    const Failure f = failure_of(trainer.error());
    return fail(f.message, f.code);
  }
  Trainer& t = **trainer;
  Session& s = t.session();
  std::fprintf(stderr, "goldminer-consume: listening on %s\n", s.address().c_str());
  for (pid_t pid : t.workers().started()) std::fprintf(stderr, "worker pid %d\n", static_cast<int>(pid));
  std::fflush(stderr);
  const std::vector<pid_t> pids = t.workers().started();
  WorkerWatchdog watchdog(t.workers(), !pids.empty() && !t.expects_external_workers(), s);
  // Stops the watchdog, drains the workers, ends those this run started.
  auto shut_down = [&] {
    watchdog.stop();
    t.close();
  };
  // --min-workers: the first batch is taken (and the first epoch timed)
  // once that many workers are connected.
  if (auto joined = s.wait_for_workers(a.min_workers, a.join_timeout); !joined.ok()) {
    shut_down();
    return fail("--min-workers: " + joined.status().message() + " (--join-timeout)", 1);
  }
  // id_sum counts a sample as its place in the input (records of the files
  // before its own, plus its record index): the ranks' sums add up to
  // N(N-1)/2 mod 2^64 exactly when they read every sample once between them.
  Consumer c{s, a, t.rank(), t.world_size(), s.records_per_file(), {}};
  c.file_start.assign(c.per_file.size(), 0);
  for (size_t f = 1; f < c.per_file.size(); ++f) c.file_start[f] = c.file_start[f - 1] + c.per_file[f - 1];
  const int rc = consume(c, seen_before, pids);
  shut_down();
  return rc;
}
