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
#include <iostream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "dw_daemon/program.h"
#include "gmcore/auth.h"
#include "gmcore/log.h"
#include "launch/worker_start.h"
#include "goldminer/session.h"
#include "tools/goldminer_consume_options.h"
#include "tw_lib/session/receive_memory.h"
#include "tw_lib/session/worker_processes.h"

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

}  // namespace

int main(int argc, char** argv) {
  ConsumeArgs a;
  CommandLine command_line;
  if (int rc = parse_main_command_line(consume_command(&a), argc, argv, &command_line); rc >= 0) return rc;
  SessionOptions& o = a.session;
  const std::string &input = a.input, &program_path = a.program_path, &transport = a.transport,
                    &state_out = a.state_out, &resume = a.resume, &rank0 = a.rank0, &numa_node = a.numa_node;
  std::string& listen = a.listen;
  const uint32_t epochs = a.epochs, workers = a.workers, threads = a.threads, min_workers = a.min_workers,
                 join_timeout = a.join_timeout;
  const uint64_t stop_after = a.stop_after, receive_budget_mb = a.receive_budget_mb;
  const bool json = a.json, verbose = a.verbose;
  const int64_t rank = a.rank, world_size = a.world_size;
  if (numa_node == "auto") {
    o.numa_node = ReceiveMemoryOptions::kNumaAuto;
  } else if (numa_node == "none") {
    o.numa_node = ReceiveMemoryOptions::kNumaNone;
  } else {
    char* end = nullptr;
    const long n = std::strtol(numa_node.c_str(), &end, 10);
    if (numa_node.empty() || *end != '\0' || n < 0 || n > 4095)
      return fail("--numa-node: invalid value '" + numa_node + "': expected auto, none or a node's number", 2);
    o.numa_node = static_cast<int>(n);
  }
  if (transport != "ucx" && transport != "mpi" && transport != "local")
    return fail("--transport: invalid value '" + transport + "': expected ucx, mpi or local", 2);
  if (stop_after > 0 && state_out.empty()) return fail("--stop-after-batches needs --state-out", 2);
  // Unsigned options take "-1" as a huge number: bound every count.
  if (epochs == 0 || epochs > 1000000) return fail("--epochs: must be 1..1000000", 2);
  if (workers > 1024) return fail("--workers: must be 0..1024", 2);
  if (threads == 0 || threads > 1024) return fail("--threads: must be 1..1024", 2);
  if (min_workers > 4096) return fail("--min-workers: must be 0..4096", 2);
  if (join_timeout == 0 || join_timeout > 86400) return fail("--join-timeout: must be 1..86400", 2);
  if (!(o.first_worker_timeout_s >= 0)) return fail("--first-worker-timeout: must be >= 0 seconds", 2);
  if (o.batch_size == 0 || o.batch_size > (1u << 24)) return fail("--batch-size: must be 1..16777216", 2);
  if (o.queue_batches == 0 || o.queue_batches > 1000000) return fail("--queue-batches: must be 1..1000000", 2);
  if (receive_budget_mb == 0 || receive_budget_mb > (uint64_t{1} << 30))
    return fail("--receive-budget-mb: must be 1..1073741824", 2);
  o.receive_budget_bytes = receive_budget_mb << 20;
  if (o.shuffle_buffer > (1u << 26)) return fail("--shuffle-buffer: must be at most 67108864", 2);
  if (!verbose)
    log::set_sink([](log::Level level, const std::string& line) {
      if (level == log::Level::kError) std::fprintf(stderr, "%s\n", line.c_str());
    });

  // MPI: every process is part of one MPI job (mpirun sets
  // OMPI_COMM_WORLD_SIZE, `srun --mpi=pmix` PMIX_RANK); without one, start
  // it: this program as rank 0 and the workers as ranks 1..N.
  if (transport == "mpi" && std::getenv("OMPI_COMM_WORLD_SIZE") == nullptr && std::getenv("PMIX_RANK") == nullptr) {
    if (workers == 0) return fail("--transport mpi starts its workers itself: --workers must be at least 1", 2);
    auto secret = auth::make_secret();
    if (!secret.ok()) return fail(secret.status().message(), 1);
    setenv("GOLDMINER_SECRET", secret->c_str(), 1);
    std::vector<std::string> args = {"mpirun", "--allow-run-as-root", "--oversubscribe", "-x", "GOLDMINER_SECRET",
                                     "-x", "UCX_NET_DEVICES", "-np", "1"};
    for (int i = 0; i < argc; ++i) args.push_back(i == 0 ? "/proc/self/exe" : argv[i]);
    char self[4096];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) args[9] = std::string(self, static_cast<size_t>(n));
    for (const std::string& a : {std::string(":"), std::string("-np"), std::to_string(workers), find_dw_binary(),
                                 std::string("--trainer"), std::string("mpi://"), std::string("--threads"),
                                 std::to_string(threads)})
      args.push_back(a);
    if (std::getenv("UCX_NET_DEVICES") == nullptr) setenv("UCX_NET_DEVICES", "lo", 1);
    std::vector<char*> cargs;
    for (auto& a : args) cargs.push_back(a.data());
    cargs.push_back(nullptr);
    execvp("mpirun", cargs.data());
    return fail(std::string("cannot run mpirun: ") + std::strerror(errno), 1);
  }

  o.input = input;
  if (!program_path.empty()) {
    auto p = read_file(program_path);
    if (!p.ok()) return fail("--program: " + p.status().message(), 2);
    o.program = std::move(p).value();
  }
  {
    // GOLDMINER_SECRET / GOLDMINER_SECRET_FILE as for goldminer-dw; else a
    // fresh secret for the workers this run starts.
    Status env = o.from_environment();
    if (!env.ok()) return fail(env.message(), 2);
    const uint32_t task_rank = o.rank;  // as the environment says
    if (world_size != -1) {
      if (world_size < 1 || world_size > 65536) return fail("--world-size: must be 1..65536", 2);
      o.world_size = static_cast<uint32_t>(world_size);
      if (rank == -1) o.rank = 0;
    }
    if (rank != -1) {
      if (rank < 0 || rank >= static_cast<int64_t>(o.world_size))
        return fail("--rank: " + std::to_string(rank) + " is not a rank of world size " + std::to_string(o.world_size) +
                        " (ranks are 0.." + std::to_string(o.world_size - 1) + ")",
                    2);
      o.rank = static_cast<uint32_t>(rank);
    }
    if (o.rank != task_rank) o.rank_listen.clear();  // the port reserved for another rank
    // --listen's default: GOLDMINER_LISTEN (a --goldminer batch job's).
    if (const char* v = std::getenv("GOLDMINER_LISTEN"); listen.empty() && v != nullptr && *v != '\0') listen = v;
    o.listen.clear();
    o.local_workers = 0;
    if (o.secret.empty()) {
      auto secret = auth::make_secret();
      if (!secret.ok()) return fail(secret.status().message(), 1);
      o.secret = *secret;
    }
  }
  std::vector<std::pair<uint64_t, uint64_t>> seen_before;
  if (!resume.empty()) {
    LeasePosition p;
    Status s = read_state(resume, &p, &seen_before);
    if (!s.ok()) return fail("--resume: " + s.message(), 2);
    o.resume = p;
  }
  // Who starts this run's workers (launch/worker_start.h): the session
  // itself (local), this program (ucx) or mpirun (mpi).
  const WorkerStartPlan start = plan_worker_start(
      request_on_this_machine(transport, static_cast<int>(workers), static_cast<int>(threads)));
  if (transport == "local") {
    o.listen = "local://consume-" + std::to_string(getpid());
    o.local_workers = start.start == WorkerStart::kLocalThreads ? static_cast<uint32_t>(start.workers) : 0;
    o.local_worker_threads = threads;
    o.program_loader = [](const std::string& bytes) { return dw::load_torchscript(bytes, 1); };
  } else if (transport == "mpi") {
    o.listen = "mpi://";
  } else {
    o.listen = listen.empty() ? "ucx://127.0.0.1:0" : (listen.rfind("ucx://", 0) == 0 ? listen : "ucx://" + listen);
    if (!rank0.empty()) o.rank0 = rank0.rfind("ucx://", 0) == 0 ? rank0 : "ucx://" + rank0;
    // Sharing workers through rank 0: rank 0 listens at rank0, the others
    // where the session picks (Session::create), unless --listen says.
    if (o.world_size > 1 && !o.rank0.empty() && !command_line.given("listen")) o.listen.clear();
  }
  auto session = Session::create(o);
  if (!session.ok()) return fail(session.status().message(), 1);
  Session& s = **session;
  std::fprintf(stderr, "goldminer-consume: listening on %s\n", s.address().c_str());

  std::vector<pid_t> pids;
  if (start.start == WorkerStart::kLocalProcesses) {
    WorkerProcessOptions wp;
    wp.dw_path = find_dw_binary();
    wp.trainer = s.address();
    wp.secret = o.secret;
    wp.threads = static_cast<unsigned>(start.threads);
    for (int i = 0; i < start.workers; ++i) {
      auto pid = spawn_worker(wp);
      if (!pid.ok()) return fail(pid.status().message(), 1);
      pids.push_back(*pid);
      std::fprintf(stderr, "worker pid %d\n", static_cast<int>(*pid));
    }
  }
  std::fflush(stderr);

  // The workers this run started: if all of them have exited and no other
  // worker is connected for a while, nothing will ever come; say why.
  std::atomic<bool> watching{!pids.empty() && listen.empty()};
  std::thread watchdog([&] {
    std::vector<int> status(pids.size(), -1);
    auto since = std::chrono::steady_clock::now();
    while (watching) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      size_t exited = 0;
      for (size_t i = 0; i < pids.size(); ++i) {
        int st = 0;
        if (status[i] == -1 && waitpid(pids[i], &st, WNOHANG) == pids[i])
          status[i] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        if (status[i] != -1) ++exited;
      }
      if (exited < pids.size() || s.metrics().workers > 0) {
        since = std::chrono::steady_clock::now();
      } else if (std::chrono::steady_clock::now() - since > std::chrono::seconds(3)) {
        std::string list;
        for (size_t i = 0; i < pids.size(); ++i)
          list += (i ? ", " : "") + std::to_string(pids[i]) + " exited " + std::to_string(status[i]);
        std::fprintf(stderr, "goldminer-consume: every worker exited and none is connected (%s); "
                     "see their messages above\n", list.c_str());
        std::fflush(stdout);
        std::_Exit(1);
      }
    }
  });

  // Stops the watchdog, drains the workers, ends those this run started.
  auto shut_down = [&] {
    watching = false;
    watchdog.join();
    session->reset();
    stop_workers(pids, SIGTERM, 10);
  };
  // --min-workers: the first batch is taken (and the first epoch timed)
  // once that many workers are connected.
  if (auto joined = s.wait_for_workers(min_workers, join_timeout); !joined.ok()) {
    shut_down();
    return fail("--min-workers: " + joined.status().message() + " (--join-timeout)", 1);
  }

  const auto& per_file = s.records_per_file();
  // id_sum counts a sample as its place in the input (records of the files
  // before its own, plus its record index): the ranks' sums add up to
  // N(N-1)/2 mod 2^64 exactly when they read every sample once between them.
  std::vector<uint64_t> file_start(per_file.size(), 0);
  for (size_t f = 1; f < per_file.size(); ++f) file_start[f] = file_start[f - 1] + per_file[f - 1];
  bool clean = true;
  uint64_t lost_before = 0, failed_before = 0;
  uint64_t batches_total = 0;
  int rc = 0;
  for (uint32_t e = 0; e < epochs; ++e) {
    std::vector<std::vector<bool>> seen(per_file.size());
    for (size_t f = 0; f < per_file.size(); ++f) seen[f].assign(per_file[f], false);
    uint64_t samples = 0, unique = 0, duplicates = 0, batches = 0, bytes = 0, expected = s.records_per_epoch();
    uint64_t id_sum = 0;
    // FNV-1a over the sample ids in the order they came: equal across runs
    // exactly when the order is (--deterministic).
    uint64_t order = 0xcbf29ce484222325ULL;
    if (e == 0)
      for (auto [f, r] : seen_before) {
        if (f < seen.size() && r < seen[f].size() && !seen[f][r]) {
          seen[f][r] = true;
          --expected;
        }
      }
    const auto t0 = std::chrono::steady_clock::now();
    bool stopped = false;
    for (;;) {
      auto b = s.next();
      if (!b.ok()) {
        rc = fail(b.status().message(), 1);
        break;
      }
      if (!b->has_value()) break;
      const SessionBatch& batch = **b;
      ++batches;
      samples += batch.samples;
      for (const auto& t : batch.tensors) bytes += t.nbytes;
      for (uint32_t i = 0; i < batch.samples; ++i) {
        const uint64_t f = static_cast<uint64_t>(batch.sample_ids[2 * i]);
        const uint64_t r = static_cast<uint64_t>(batch.sample_ids[2 * i + 1]);
        for (uint64_t v : {f, r})
          for (int k = 0; k < 8; ++k) order = (order ^ ((v >> (8 * k)) & 0xff)) * 0x100000001b3ULL;
        if (f >= seen.size() || r >= seen[f].size()) {
          ++duplicates;  // not a sample of this input: counted as wrong
          continue;
        }
        id_sum += file_start[f] + r;
        if (seen[f][r]) {
          ++duplicates;
        } else {
          seen[f][r] = true;
          ++unique;
        }
      }
      ++batches_total;
      if (stop_after > 0 && batches_total >= stop_after) {
        write_state(state_out, s.state(), seen);
        stopped = true;
        break;
      }
    }
    if (rc != 0) break;
    if (stopped) {
      rc = 3;
      break;
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const SessionMetrics m = s.metrics();
    const uint32_t epoch_no = m.epoch;
    // Records skipped under --max-bad-records were reported, not lost.
    expected = expected > m.bad_records ? expected - m.bad_records : 0;
    const uint64_t missing = expected > unique ? expected - unique : 0;
    if (duplicates != 0 || missing != 0) clean = false;
    const uint64_t lost = m.workers_lost - lost_before;
    lost_before = m.workers_lost;
    const uint64_t failed = m.splits_failed - failed_before;
    failed_before = m.splits_failed;
    if (json) {
      std::printf("{\"epoch\": %u, \"samples\": %llu, \"unique_samples\": %llu, \"duplicates\": %llu, "
                  "\"missing\": %llu, \"batches\": %llu, \"seconds\": %.6f, \"samples_per_s\": %.1f, "
                  "\"bytes_per_s\": %.1f, \"trainer_wait_fraction\": %.4f, \"workers_lost\": %llu, "
                  "\"splits_failed\": %llu, \"bad_records\": %llu, \"cpu_seconds\": %.3f, \"order_digest\": \"%016llx\", "
                  "\"max_queued\": %zu, \"rank\": %u, \"world_size\": %u, \"id_sum\": %llu, "
                  "\"receive_memory\": \"%s\"}\n",
                  epoch_no, static_cast<unsigned long long>(samples), static_cast<unsigned long long>(unique),
                  static_cast<unsigned long long>(duplicates), static_cast<unsigned long long>(missing),
                  static_cast<unsigned long long>(batches), seconds, samples / std::max(seconds, 1e-9),
                  bytes / std::max(seconds, 1e-9), m.trainer_wait_fraction, static_cast<unsigned long long>(lost),
                  static_cast<unsigned long long>(failed), static_cast<unsigned long long>(m.bad_records),
                  cpu_seconds(pids),
                  static_cast<unsigned long long>(order), m.max_queued_batches, o.rank, o.world_size,
                  static_cast<unsigned long long>(id_sum), (*session)->receive_memory().c_str());
    } else {
      std::printf("epoch %u: %llu samples (%llu unique, %llu duplicates, %llu missing) in %llu batches, "
                  "%.3f s, %.0f samples/s, %.1f MB/s, trainer waited %.0f%%, %llu workers lost, %llu bad records, "
                  "order %016llx\n",
                  epoch_no, static_cast<unsigned long long>(samples), static_cast<unsigned long long>(unique),
                  static_cast<unsigned long long>(duplicates), static_cast<unsigned long long>(missing),
                  static_cast<unsigned long long>(batches), seconds, samples / std::max(seconds, 1e-9),
                  bytes / std::max(seconds, 1e-9) / 1e6, 100 * m.trainer_wait_fraction,
                  static_cast<unsigned long long>(lost), static_cast<unsigned long long>(m.bad_records),
                  static_cast<unsigned long long>(order));
    }
    std::fflush(stdout);
  }
  shut_down();
  if (rc != 0) return rc;
  return clean ? 0 : 4;
}
