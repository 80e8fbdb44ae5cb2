// goldminer._session: Python binding of the trainer session (pybind11 over
// include/goldminer/session.h), see the module docstring below.
//
// Batches reach Python without a copy and without libtorch: every tensor of
// a batch (and its sample ids) leaves as a DLPack capsule ("dltensor", a
// DLManagedTensor viewing the received buffer) whose deleter drops a share
// of SessionBatch::keepalive, so the buffer lives exactly as long as the
// last tensor that views it. python/goldminer/session.py makes the capsules
// torch tensors (torch.utils.dlpack.from_dlpack) with whatever torch the
// trainer runs; the wire dtypes map onto DLPack's here.
#include <dlfcn.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gm_config.h"
#include "dw_daemon/program.h"
#include "dw_daemon/python_program.h"
#include "gmcore/auth.h"
#include "launch/job_environment.h"
#include "launch/worker_start.h"
#include "goldminer/session.h"
#include "tw_lib/python/dlpack_export.h"
#include "tw_lib/python/python_session_doc.h"
#include "tw_lib/session/session_option_docs.h"
#include "tw_lib/session/worker_processes.h"

namespace py = pybind11;
using namespace pybind11::literals;  // "name"_a = value: a keyword of a py::dict

namespace goldminer {
namespace {

using python_session_doc::kModuleDoc;
using python_session_doc::kModuleDocRest;

[[noreturn]] void raise_runtime(const std::string& message) { throw std::runtime_error("goldminer.Session: " + message); }

// Runs call(interrupted) with the GIL released, where `interrupted` lets a
// Python signal handler that raises (Ctrl-C: KeyboardInterrupt) end the
// wait; that exception is then raised here. A failed Expected raises
// RuntimeError with its message; else its value is returned.
template <typename Call>
auto wait_without_gil(Call call) {
  bool signalled = false;
  auto result = [&] {
    py::gil_scoped_release release;
    return call([&signalled] {
      py::gil_scoped_acquire acquire;
      signalled = PyErr_CheckSignals() != 0;
      return signalled;
    });
  }();
  if (signalled) throw py::error_already_set();
  if (!result.ok()) raise_runtime(result.status().message());
  return std::move(result).value();
}

struct SampleIds {  // of the last batch, handed out again on every look
  std::shared_ptr<const void> keepalive;
  const int64_t* ids = nullptr;
  uint32_t samples = 0;
};

// The goldminer-dw to start: $GOLDMINER_DW_PROGRAM, else the one beside this
// package (installed: PREFIX/lib/pythonX/dist-packages/goldminer/ -> PREFIX/bin;
// build tree: BUILDDIR/python/goldminer/ -> BUILDDIR), else find_dw_binary().
std::string dw_binary(const std::string& configured) {
  if (!configured.empty()) return configured;
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&dw_binary), &info) != 0 && info.dli_fname != nullptr) {
    char resolved[PATH_MAX];
    std::string self = realpath(info.dli_fname, resolved) != nullptr ? resolved : info.dli_fname;
    std::string dir = self.substr(0, self.rfind('/'));
    for (const std::string& c : {dir + "/../../goldminer-dw", dir + "/../../../../bin/goldminer-dw"})
      if (access(c.c_str(), X_OK) == 0) return c;
  }
  return find_dw_binary("");
}

bool executable_found(const std::string& path) {
  if (path.find('/') != std::string::npos) return access(path.c_str(), X_OK) == 0;
  const char* env = std::getenv("PATH");
  std::string dirs = env != nullptr ? env : "/usr/bin:/bin";
  size_t start = 0;
  for (;;) {
    const size_t end = dirs.find(':', start);
    std::string d = dirs.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (d.empty()) d = ".";
    if (access((d + "/" + path).c_str(), X_OK) == 0) return true;
    if (end == std::string::npos) return false;
    start = end + 1;
  }
}

std::string describe_exit(int status) {
  if (WIFEXITED(status)) return "exit status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("killed by signal ") + std::to_string(WTERMSIG(status));
  return "status " + std::to_string(status);
}

// (goldminer/session.py reads paths and saves ScriptModules, with the trainer's torch.)
std::string program_bytes(const py::object& program) {
  if (program.is_none()) return std::string();
  if (py::isinstance<py::bytes>(program)) return program.cast<std::string>();
  throw py::type_error("goldminer._session.Session: program must be None or bytes (goldminer.Session also takes "
                       "a torch.jit.ScriptModule or a path), not " +
                       py::str(py::type::of(program)).cast<std::string>());
}

LeasePosition position_from(const py::object& obj) {
  if (!py::isinstance<py::dict>(obj))
    throw py::type_error("goldminer.Session: resume must be a dict from Session.state()");
  py::dict d = obj.cast<py::dict>();
  for (const char* key : {"epoch", "seed", "done", "partial"})
    if (!d.contains(key)) throw py::value_error(std::string("goldminer.Session: resume: no '") + key + "' entry");
  LeasePosition p;
  try {
    p.epoch = d["epoch"].cast<uint32_t>();
    p.seed = d["seed"].cast<uint64_t>();
    if (d.contains("plan")) p.plan = d["plan"].cast<uint64_t>();
    if (d.contains("bad_records")) p.bad_records = d["bad_records"].cast<uint64_t>();
    for (py::handle id : d["done"]) p.done.push_back(id.cast<uint64_t>());
    for (py::handle entry : d["partial"]) {
      py::sequence pair = entry.cast<py::sequence>();
      if (pair.size() != 2) throw py::value_error("goldminer.Session: resume: a partial entry is not [split id, batches]");
      p.partial.emplace_back(pair[0].cast<uint64_t>(), pair[1].cast<uint64_t>());
    }
  } catch (const py::cast_error&) {
    throw py::value_error("goldminer.Session: resume: expected {'epoch': int, 'seed': int, 'done': [int], "
                          "'partial': [[int, int]]}");
  }
  return p;
}

std::atomic<uint64_t> local_names{0};

class PySession {
 public:
  PySession(const std::string& input, uint32_t batch_size, const py::object& program, uint32_t workers,
            uint32_t threads, const std::string& transport, const py::object& listen, const py::object& seed,
            uint32_t shuffle_buffer, bool deterministic, bool shuffle_splits, uint64_t records_per_split,
            uint64_t max_bad_records, const std::string& jpeg_decode,
            uint32_t queue_batches, double timeout, const py::object& resume, const py::object& secret,
            double first_worker_timeout, const py::object& rank, const py::object& world_size, bool drop_last,
            bool pad, bool pin_memory, const py::object& numa_node, int cuda_device, uint32_t split_retries) {
    if (transport != "ucx" && transport != "local")
      throw py::value_error("goldminer.Session: transport: invalid value '" + transport + "': expected ucx or local");
    if (batch_size == 0) throw py::value_error("goldminer.Session: batch_size must be at least 1");
    if (threads == 0) throw py::value_error("goldminer.Session: threads must be at least 1");
    if (queue_batches == 0) throw py::value_error("goldminer.Session: queue_batches must be at least 1");
    if (!(timeout >= 0)) throw py::value_error("goldminer.Session: timeout must be >= 0 seconds");
    if (!(first_worker_timeout >= 0))
      throw py::value_error("goldminer.Session: first_worker_timeout must be >= 0 seconds");

    SessionOptions o;
    const std::string default_listen = o.listen;
    Status env = o.from_environment();
    if (!env.ok()) raise_runtime(env.message());
    bool listen_given = o.listen != default_listen;  // by the environment
    o.input = input;
    o.batch_size = batch_size;
    o.program = program_bytes(program);
    o.shuffle_buffer = shuffle_buffer;
    o.deterministic = deterministic;
    o.shuffle_splits = shuffle_splits;
    o.records_per_split = records_per_split;
    o.max_bad_records = max_bad_records;
    o.jpeg_decode = jpeg_decode;
    o.queue_batches = queue_batches;
    o.timeout_s = timeout;
    o.first_worker_timeout_s = first_worker_timeout;
    o.split_retries = split_retries;
    if (!resume.is_none()) o.resume = position_from(resume);
    const uint32_t task_rank = o.rank;  // as the environment says
    if (!world_size.is_none()) {
      o.world_size = world_size.cast<uint32_t>();
      if (o.world_size == 0) throw py::value_error("goldminer.Session: world_size must be at least 1");
      if (rank.is_none()) o.rank = 0;
    }
    if (!rank.is_none()) {
      o.rank = rank.cast<uint32_t>();
      if (o.rank >= o.world_size)
        throw py::value_error("goldminer.Session: rank " + std::to_string(o.rank) + " is not a rank of world_size " +
                              std::to_string(o.world_size));
    }
    if (o.rank != task_rank) o.rank_listen.clear();  // the port reserved for another rank
    o.drop_last = drop_last;
    o.pad = pad;
    o.pin_memory = pin_memory;
    if (!numa_node.is_none()) {
      o.numa_node = numa_node.cast<int>();
      if (o.numa_node < 0) throw py::value_error("goldminer.Session: numa_node must be a node's number (or None)");
    }
    o.cuda_device = cuda_device;
    if (drop_last && pad) throw py::value_error("goldminer.Session: drop_last and pad: one at most");
    o.seed = !seed.is_none() ? seed.cast<uint64_t>() : (o.resume ? o.resume->seed : 0);
    if (!listen.is_none()) {
      std::string l = listen.cast<std::string>();
      if (l.find("://") == std::string::npos) l = "ucx://" + l;
      o.listen = l;
      listen_given = true;
    } else if (transport == "local" && !listen_given) {
      o.listen = "local://goldminer-py-" + std::to_string(getpid()) + "-" + std::to_string(local_names++);
    }
    if (!secret.is_none()) o.secret = secret.cast<std::string>();
    if (o.secret.empty()) {
      auto s = auth::make_secret();
      if (!s.ok()) raise_runtime(s.status().message());
      o.secret = *s;
    }
    // Who starts the workers (launch/worker_start.h): the session itself
    // (local) or this object (ucx: goldminer-dw processes).
    const WorkerStartPlan start =
        plan_worker_start(request_on_this_machine(transport, static_cast<int>(workers), static_cast<int>(threads)));
    if (start.start == WorkerStart::kLocalThreads) o.local_workers = static_cast<uint32_t>(start.workers);
    o.local_worker_threads = threads;
    // No libtorch here: local threads run a TorchScript program wrapped by
    // goldminer/session.py (run by the trainer's torch), which sends it so to
    // transport "local"; beside ucx workers (GOLDMINER_LOCAL_WORKERS) it is wrapped here.
    std::string wrapped;
    if (o.local_workers > 0 && !o.program.empty() && !dw::is_python_program(o.program))
      wrapped = py::module_::import("goldminer.session").attr("_worker_program")(py::bytes(o.program), "local")
                    .cast<std::string>();
    o.program_loader = [wrapped](const std::string& bytes) {
      const std::string& p = dw::is_python_program(bytes) || wrapped.empty() ? bytes : wrapped;
      return dw::is_python_program(p) ? dw::load_python_program(p) : dw::load_torchscript(p, 1);
    };
    expect_external_ = listen_given;
    rank_ = o.rank;
    world_size_ = o.world_size;
    local_workers_ = o.local_workers;

    WorkerProcessOptions wp;
    if (start.start == WorkerStart::kLocalProcesses) {
      if (o.listen.rfind("ucx://", 0) != 0)
        throw py::value_error("goldminer.Session: workers=" + std::to_string(workers) +
                              " with transport 'ucx' needs a ucx:// address to listen on, not '" + o.listen + "'");
      wp.dw_path = dw_binary(o.dw_program);
      if (!executable_found(wp.dw_path))
        raise_runtime("cannot find the data worker '" + wp.dw_path +
                      "' (set GOLDMINER_DW_PROGRAM to the goldminer-dw to run)");
      wp.secret = o.secret;
      wp.threads = static_cast<unsigned>(start.threads);
    }

    Expected<std::unique_ptr<Session>> created = Status::error("not created");
    {
      py::gil_scoped_release release;
      created = Session::create(std::move(o));
    }
    if (!created.ok()) raise_runtime(created.status().message());
    session_ = std::move(created).value();
    if (!wp.dw_path.empty()) {
      wp.trainer = session_->address();
      for (int i = 0; i < start.workers; ++i) {
        auto pid = spawn_worker(wp);
        if (!pid.ok()) {
          close();
          raise_runtime(pid.status().message());
        }
        pids_.push_back(*pid);
        spawned_.push_back(*pid);
      }
    }
  }

  ~PySession() {
    try {
      close();
    } catch (...) {
    }
  }

  void close() {
    if (!session_ && pids_.empty()) return;
    std::unique_ptr<Session> s = std::move(session_);
    std::vector<pid_t> pids = std::move(pids_);
    pids_.clear();
    last_ids_ = SampleIds();
    py::gil_scoped_release release;
    // SIGTERM first, while the session still answers: a goldminer-dw that
    // is still starting or in its handshake finishes that and leaves (with
    // the listener gone it would wait out its send timeout). Then the
    // session drains the connected ones as it ends.
    for (pid_t p : pids) kill(p, SIGTERM);
    if (s && !pids.empty()) {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
      while (std::chrono::steady_clock::now() < deadline) {
        reap_ended(&pids);
        if (pids.empty() || all_connected(*s, pids)) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
    s.reset();  // drains the connected workers
    stop_workers(pids, SIGTERM, 10);
  }

  Session& session() {
    if (!session_) raise_runtime("the session is closed");
    return *session_;
  }

  py::tuple next() {
    Session& s = session();
    await_first_worker();
    std::optional<SessionBatch> b =
        wait_without_gil([&s](const std::function<bool()>& interrupted) { return s.next(interrupted); });
    if (!b.has_value()) throw py::stop_iteration();
    const SessionBatch& batch = *b;
    py::tuple out(batch.tensors.size());
    for (size_t i = 0; i < batch.tensors.size(); ++i) {
      const auto& t = batch.tensors[i];
      out[i] = dlpack_capsule(batch.keepalive, dlpack_dtype(t.dtype), t.shape, t.data, t.nbytes);
    }
    last_ids_ = SampleIds{batch.keepalive, batch.sample_ids, batch.samples};
    last_batch_ = py::make_tuple(batch.epoch, batch.split_id, batch.sequence);
    return out;
  }

  py::object last_batch() const { return last_batch_; }
  std::string receive_memory() { return session().receive_memory(); }
  std::vector<std::string> receive_memory_warnings() { return session().receive_memory_warnings(); }

  py::object last_sample_ids() const {
    if (!last_ids_.keepalive) return py::none();
    return dlpack_capsule(last_ids_.keepalive, {kDLInt, 64, 1}, {static_cast<int64_t>(last_ids_.samples), 2},
                          last_ids_.ids, uint64_t{last_ids_.samples} * 2 * sizeof(int64_t));
  }

  py::dict state() {
    LeasePosition p = session().state();
    py::list done, partial;
    for (uint64_t id : p.done) done.append(id);
    for (auto [id, n] : p.partial) {
      py::list entry;
      entry.append(id);
      entry.append(n);
      partial.append(entry);
    }
    return py::dict("epoch"_a = p.epoch, "seed"_a = p.seed, "plan"_a = p.plan, "bad_records"_a = p.bad_records,
                    "done"_a = done, "partial"_a = partial);
  }

  py::dict metrics() {
    SessionMetrics m = session().metrics();
    py::list per;
    for (const auto& w : m.per_worker)
      per.append(py::dict("id"_a = w.id, "batches"_a = w.batches, "bytes"_a = w.bytes,
                          "batches_per_s"_a = w.batches_per_s, "asked_for_splits"_a = w.asked_for_splits,
                          "draining"_a = w.draining));
    return py::dict("epoch"_a = m.epoch, "queue_batches"_a = m.queue_batches, "held_batches"_a = m.held_batches,
                    "queue_bytes"_a = m.queue_bytes, "queue_fill"_a = m.queue_fill, "arrival_rate"_a = m.arrival_rate,
                    "consumption_rate"_a = m.consumption_rate, "trainer_wait_fraction"_a = m.trainer_wait_fraction,
                    "workers"_a = m.workers, "workers_lost"_a = m.workers_lost,
                    "workers_rejected"_a = m.workers_rejected, "bad_records"_a = m.bad_records,
                    "duplicates_dropped"_a = m.duplicates_dropped, "splits_failed"_a = m.splits_failed,
                    "scaling_window_s"_a = m.scaling_window_s, "scaling_window_batches"_a = m.scaling_window_batches,
                    "per_worker"_a = per);
  }

  size_t drain_workers(size_t n) { return session().drain_workers(n); }

  size_t wait_for_workers(int64_t n, double timeout) {
    if (n < 0) throw py::value_error("goldminer.Session.wait_for_workers: n must be >= 0");
    if (!(timeout >= 0)) throw py::value_error("goldminer.Session.wait_for_workers: timeout must be >= 0");
    Session& s = session();
    return wait_without_gil([&](const std::function<bool()>& interrupted) {
      return s.wait_for_workers(static_cast<size_t>(n), timeout, interrupted);
    });
  }
  std::string address() { return session().address(); }
  uint64_t total_records() { return session().total_records(); }
  uint64_t batches_per_epoch() { return session().batches_per_epoch(); }
  uint64_t records_per_epoch() { return session().records_per_epoch(); }
  uint32_t rank() const { return rank_; }
  uint32_t world_size() const { return world_size_; }
  std::vector<std::string> files() { return session().files(); }
  std::vector<uint64_t> records_per_file() { return session().records_per_file(); }
  std::vector<int> worker_pids() const { return std::vector<int>(pids_.begin(), pids_.end()); }

 private:
  // Until the first worker has joined, when only the goldminer-dw this
  // session started can deliver: waits for one to join, or raises when all
  // have exited (a worker that cannot start or connect), and lets Ctrl-C in.
  void await_first_worker() {
    if (worker_seen_ || spawned_.empty() || local_workers_ > 0 || expect_external_) return;
    for (;;) {
      check_workers();  // reaps first, so a join seen below came before the exits
      // One joined: it may since have left with an error the session holds
      // (a corrupt record, a program that does not load): next() says.
      const SessionMetrics m = session_->metrics();
      if (m.workers > 0 || m.workers_lost > 0 || !m.per_worker.empty() || m.queue_batches > 0) {
        worker_seen_ = true;
        return;
      }
      // All gone before one was seen to join. Exit status 1 is also how a
      // worker ends that joined and reported its error to the session (it
      // may have come and gone between two looks): then next() says why.
      if (pids_.empty()) {
        if (!all_status_1_) raise_all_exited();
        worker_seen_ = true;
        return;
      }
      {
        py::gil_scoped_release release;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    }
  }

  // Whether every one of `pids` is an authenticated worker of `s` (a
  // goldminer-dw introduces itself as HOST:PID).
  static bool all_connected(const Session& s, const std::vector<pid_t>& pids) {
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

  // Reaps the goldminer-dw this session started that exited.
  void check_workers() {
    for (size_t i = 0; i < pids_.size();) {
      int status = 0;
      const pid_t r = waitpid(pids_[i], &status, WNOHANG);
      if (r == pids_[i]) {
        exits_.push_back("pid " + std::to_string(pids_[i]) + ": " + describe_exit(status));
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 1) all_status_1_ = false;
        pids_.erase(pids_.begin() + static_cast<long>(i));
      } else {
        ++i;
      }
    }
  }

  [[noreturn]] void raise_all_exited() {
    std::string why;
    for (const auto& e : exits_) why += (why.empty() ? "" : ", ") + e;
    raise_runtime("all " + std::to_string(spawned_.size()) + " goldminer-dw workers it started have exited (" + why +
                  "); none is left to deliver the epoch");
  }

  std::unique_ptr<Session> session_;
  std::vector<pid_t> pids_;     // started and not yet reaped
  std::vector<pid_t> spawned_;  // every one started
  std::vector<std::string> exits_;
  uint32_t local_workers_ = 0;
  bool expect_external_ = false;
  uint32_t rank_ = 0, world_size_ = 1;
  bool worker_seen_ = false;
  bool all_status_1_ = true;  // of those reaped
  SampleIds last_ids_;
  py::object last_batch_ = py::none();
};

}  // namespace
}  // namespace goldminer

PYBIND11_MODULE(_session, m) {
  namespace gm = goldminer;
  // Kept for the module's life: pybind11 stores the pointer.
  static const std::string doc = std::string(gm::kModuleDoc) + gm::session_keyword_docs() + gm::kModuleDocRest;
  m.doc() = doc.c_str();
  m.attr("__version__") = PACKAGE_VERSION;
  m.attr("DEFAULT_BATCH_SIZE") = goldminer::kDefaultBatchSize;
  // The libtorch goldminer-dw links ("" when built without): a trainer
  // whose torch differs has its TorchScript programs wrapped (session.py).
  m.attr("LIBTORCH_VERSION") = GOLDMINER_LIBTORCH_VERSION;
  m.def(
      "dw_program",
      [] {
        auto job = gm::process_job_environment(gm::kReadBySession);
        if (!job.ok()) gm::raise_runtime(job.status().message());
        return gm::dw_binary(job->dw_program);
      },
      "The goldminer-dw a Session with workers=N starts (python -m goldminer --version).");
  py::class_<gm::PySession>(m, "Session", "A GoldMiner trainer session; see help(goldminer._session).")
      .def(py::init<const std::string&, uint32_t, const py::object&, uint32_t, uint32_t, const std::string&,
                    const py::object&, const py::object&, uint32_t, bool, bool, uint64_t, uint64_t, const std::string&,
                    uint32_t, double,
                    const py::object&, const py::object&, double, const py::object&, const py::object&, bool, bool, bool,
                    const py::object&, int, uint32_t>(),
           py::arg("input"), py::arg("batch_size") = goldminer::kDefaultBatchSize, py::kw_only(),
           py::arg("program") = py::none(),
           py::arg("workers") = 0, py::arg("threads") = 1, py::arg("transport") = "ucx",
           py::arg("listen") = py::none(), py::arg("seed") = py::none(), py::arg("shuffle_buffer") = 0,
           py::arg("deterministic") = false, py::arg("shuffle_splits") = true, py::arg("records_per_split") = 0,
           py::arg("max_bad_records") = 0, py::arg("jpeg_decode") = "full",
           py::arg("queue_batches") = 64, py::arg("timeout") = 0.0, py::arg("resume") = py::none(),
           py::arg("secret") = py::none(), py::arg("first_worker_timeout") = 1800.0, py::arg("rank") = py::none(),
           py::arg("world_size") = py::none(), py::arg("drop_last") = false, py::arg("pad") = false,
           py::arg("pin_memory") = false, py::arg("numa_node") = py::none(), py::arg("cuda_device") = -1,
           py::arg("split_retries") = 3)
      .def("__iter__", [](py::object self) { return self; })
      .def("__len__", &gm::PySession::batches_per_epoch,
           "Batches in this epoch (this rank's; fewer when corrupt records are skipped).")
      .def("__next__", &gm::PySession::next,
           "The next batch of this epoch as a tuple of DLPack capsules (goldminer.Session: torch tensors); "
           "StopIteration at its end.")
      .def("state", &gm::PySession::state, "The data position: {epoch, seed, done, partial}.")
      .def("metrics", &gm::PySession::metrics, "The session's counters as a dict.")
      .def("drain_workers", &gm::PySession::drain_workers, py::arg("n"),
           "Asks up to n workers to finish their batch and leave; returns how many.")
      .def("wait_for_workers", &gm::PySession::wait_for_workers, py::arg("n"), py::arg("timeout") = 60.0,
           "Waits until n workers are connected (at most timeout s); returns how many are.")
      .def("close", &gm::PySession::close, "Ends the session and stops the workers it started.")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](gm::PySession& s, py::args) { s.close(); return false; })
      .def_property_readonly("address", &gm::PySession::address)
      .def_property_readonly("total_records", &gm::PySession::total_records)
      .def_property_readonly("records_per_epoch", &gm::PySession::records_per_epoch,
                             "Records of this rank's share of the current epoch.")
      .def_property_readonly("rank", &gm::PySession::rank)
      .def_property_readonly("last_batch", &gm::PySession::last_batch,
                             "(epoch, split id, sequence) of the last batch, or None")
      .def_property_readonly("receive_memory", &gm::PySession::receive_memory)
      .def_property_readonly("receive_memory_warnings", &gm::PySession::receive_memory_warnings)
      .def_property_readonly("world_size", &gm::PySession::world_size)
      .def_property_readonly("files", &gm::PySession::files)
      .def_property_readonly("records_per_file", &gm::PySession::records_per_file)
      .def_property_readonly("worker_pids", &gm::PySession::worker_pids)
      .def_property_readonly("last_sample_ids", &gm::PySession::last_sample_ids,
                             "int64 [B, 2] (file index, record index) of the last batch's samples, as a DLPack "
                             "capsule (goldminer.Session: a torch tensor), or None.");
}
