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
#include "launch/job_environment.h"
#include "goldminer/session.h"
#include "tw_lib/python/dlpack_export.h"
#include "tw_lib/python/python_session_doc.h"
#include "tw_lib/session/session_option_docs.h"
#include "tw_lib/session/trainer_launch.h"

namespace py = pybind11;
using namespace pybind11::literals;  // "name"_a = value: a keyword of a py::dict

namespace goldminer {
namespace {

using python_session_doc::kModuleDoc;
using python_session_doc::kModuleDocKeywords;
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

// The goldminer-dw beside this package (installed: PREFIX/lib/pythonX/
// dist-packages/goldminer/ -> PREFIX/bin; build tree: BUILDDIR/python/
// goldminer/ -> BUILDDIR), "" when there is none: what a Session with
// workers=N starts when GOLDMINER_DW_PROGRAM is unset
// (data_worker_program, tw_lib/session/trainer_launch.h).
std::string dw_beside_package() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&dw_beside_package), &info) != 0 && info.dli_fname != nullptr) {
    char resolved[PATH_MAX];
    std::string self = realpath(info.dli_fname, resolved) != nullptr ? resolved : info.dli_fname;
    std::string dir = self.substr(0, self.rfind('/'));
    for (const std::string& c : {dir + "/../../goldminer-dw", dir + "/../../../../bin/goldminer-dw"})
      if (access(c.c_str(), X_OK) == 0) return c;
  }
  return "";
}

std::string describe_exit(int status) {
  if (WIFEXITED(status)) return "exit status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("killed by signal ") + std::to_string(WTERMSIG(status));
  return "status " + std::to_string(status);
}

// The docstring's signature of Session, with SessionOptions' defaults:
// "Session(input, batch_size=256, *, ...)", wrapped at 96 characters.
std::string session_signature() {
  const SessionOptions d;
  auto number = [](double v) {
    std::string t = std::to_string(v);
    return v == static_cast<double>(static_cast<int64_t>(v)) ? std::to_string(static_cast<int64_t>(v)) : t;
  };
  auto boolean = [](bool v) { return std::string(v ? "True" : "False"); };
  const std::vector<std::string> parts = {
      "input", "batch_size=" + std::to_string(d.batch_size), "*", "program=None", "workers=0",
      "threads=" + std::to_string(d.local_worker_threads), "transport=\"ucx\"", "listen=None", "seed=None",
      "shuffle_buffer=" + std::to_string(d.shuffle_buffer), "deterministic=" + boolean(d.deterministic),
      "shuffle_splits=" + boolean(d.shuffle_splits), "records_per_split=" + std::to_string(d.records_per_split),
      "max_bad_records=" + std::to_string(d.max_bad_records), "jpeg_decode=\"" + d.jpeg_decode + "\"",
      "queue_batches=" + std::to_string(d.queue_batches), "timeout=" + number(d.timeout_s), "resume=None",
      "secret=None", "first_worker_timeout=" + number(d.first_worker_timeout_s), "rank=None", "world_size=None",
      "drop_last=" + boolean(d.drop_last), "pad=" + boolean(d.pad), "split_retries=" + std::to_string(d.split_retries)};
  std::string out, line = "Session(";
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string part = parts[i] + (i + 1 < parts.size() ? "," : ")");
    if (line.size() + 1 + part.size() > 96) {
      out += line + "\n";
      line = "       ";
    }
    line += (line.back() == '(' ? "" : " ") + part;
  }
  return out + line;
}

// A launch's error as goldminer.Session raises it: a bad argument
// ValueError, anything else RuntimeError.
[[noreturn]] void raise_launch_error(const LaunchError& e) {
  if (e.kind == LaunchError::Kind::kBadArgument) throw py::value_error("goldminer.Session: " + e.message);
  raise_runtime(e.message);
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

// The keywords that only goldminer.Session checks (goldminer-consume's
// option table checks its own); rank, world_size, transport, threads and
// listen are the launch's (tw_lib/session/trainer_launch.h).
void check_keywords(uint32_t batch_size, uint32_t queue_batches, double timeout, double first_worker_timeout,
                    const py::object& numa_node, bool drop_last, bool pad) {
  if (batch_size == 0) throw py::value_error("goldminer.Session: batch_size must be at least 1");
  if (queue_batches == 0) throw py::value_error("goldminer.Session: queue_batches must be at least 1");
  if (!(timeout >= 0)) throw py::value_error("goldminer.Session: timeout must be >= 0 seconds");
  if (!(first_worker_timeout >= 0))
    throw py::value_error("goldminer.Session: first_worker_timeout must be >= 0 seconds");
  if (!numa_node.is_none() && numa_node.cast<int>() < 0)
    throw py::value_error("goldminer.Session: numa_node must be a node's number (or None)");
  if (drop_last && pad) throw py::value_error("goldminer.Session: drop_last and pad: one at most");
}

// No libtorch here: local threads run a TorchScript program wrapped by
// goldminer/session.py (run by the trainer's torch), which sends it so to
// transport "local"; beside ucx workers (GOLDMINER_LOCAL_WORKERS) it is
// wrapped here.
dw::ProgramLoader program_loader(const SessionOptions& o) {
  std::string wrapped;
  if (o.local_workers > 0 && !o.program.empty() && !dw::is_python_program(o.program))
    wrapped = py::module_::import("goldminer.session").attr("_worker_program")(py::bytes(o.program), "local")
                  .cast<std::string>();
  return [wrapped](const std::string& bytes) {
    const std::string& p = dw::is_python_program(bytes) || wrapped.empty() ? bytes : wrapped;
    return dw::is_python_program(p) ? dw::load_python_program(p) : dw::load_torchscript(p, 1);
  };
}

class PySession {
 public:
  PySession(const std::string& input, uint32_t batch_size, const py::object& program, uint32_t workers,
            uint32_t threads, const std::string& transport, const py::object& listen, const py::object& seed,
            uint32_t shuffle_buffer, bool deterministic, bool shuffle_splits, uint64_t records_per_split,
            uint64_t max_bad_records, const std::string& jpeg_decode,
            uint32_t queue_batches, double timeout, const py::object& resume, const py::object& secret,
            double first_worker_timeout, const py::object& rank, const py::object& world_size, bool drop_last,
            bool pad, bool pin_memory, const py::object& numa_node, int cuda_device, uint32_t split_retries) {
    check_keywords(batch_size, queue_batches, timeout, first_worker_timeout, numa_node, drop_last, pad);
    TrainerRequest r;
    r.transport = transport;
    r.transports = {"ucx", "local"};
    r.workers = workers;
    r.threads = threads;
    if (!listen.is_none()) r.listen = listen.cast<std::string>();
    if (!rank.is_none()) r.rank = rank.cast<int64_t>();
    if (!world_size.is_none()) r.world_size = world_size.cast<int64_t>();
    if (!secret.is_none()) r.secret = secret.cast<std::string>();
    r.dw_program = dw_beside_package();
    SessionOptions& o = r.session;
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
    o.seed = !seed.is_none() ? seed.cast<uint64_t>() : (o.resume ? o.resume->seed : 0);
    o.drop_last = drop_last;
    o.pad = pad;
    o.pin_memory = pin_memory;
    if (!numa_node.is_none()) o.numa_node = numa_node.cast<int>();
    o.cuda_device = cuda_device;

    auto setup = prepare_trainer(std::move(r));
    if (!setup.ok()) raise_launch_error(setup.error());
    setup->session.program_loader = program_loader(setup->session);
    LaunchResult<std::unique_ptr<Trainer>> started = LaunchError{};
    {
      py::gil_scoped_release release;
      started = start_trainer(std::move(*setup));
    }
    if (!started.ok()) raise_launch_error(started.error());
    trainer_ = std::move(*started);
    rank_ = trainer_->rank();
    world_size_ = trainer_->world_size();
  }

  ~PySession() {
    try {
      close();
    } catch (...) {
    }
  }

  void close() {
    if (!trainer_) return;
    std::unique_ptr<Trainer> t = std::move(trainer_);
    last_ids_ = SampleIds();
    py::gil_scoped_release release;
    t->close();
  }

  Session& session() {
    if (!trainer_) raise_runtime("the session is closed");
    return trainer_->session();
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
  std::vector<int> worker_pids() const {
    if (!trainer_) return {};
    const std::vector<pid_t>& running = trainer_->workers().running();
    return std::vector<int>(running.begin(), running.end());
  }

 private:
  Trainer& trainer() {
    if (!trainer_) raise_runtime("the session is closed");
    return *trainer_;
  }

  // Until the first worker has joined, when only the goldminer-dw this
  // session started can deliver: waits for one to join, or raises when all
  // have exited (a worker that cannot start or connect), and lets Ctrl-C in.
  void await_first_worker() {
    Trainer& t = trainer();
    if (worker_seen_ || t.workers().started().empty() || t.local_workers() > 0 || t.expects_external_workers())
      return;
    for (;;) {
      check_workers();  // reaps first, so a join seen below came before the exits
      // One joined: it may since have left with an error the session holds
      // (a corrupt record, a program that does not load): next() says.
      const SessionMetrics m = t.session().metrics();
      if (m.workers > 0 || m.workers_lost > 0 || !m.per_worker.empty() || m.queue_batches > 0) {
        worker_seen_ = true;
        return;
      }
      // All gone before one was seen to join. Exit status 1 is also how a
      // worker ends that joined and reported its error to the session (it
      // may have come and gone between two looks): then next() says why.
      if (t.workers().running().empty()) {
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

  // Reaps the goldminer-dw this session started that exited.
  void check_workers() {
    for (const WorkerProcesses::Exit& e : trainer().workers().reap()) {
      exits_.push_back("pid " + std::to_string(e.pid) + ": " + describe_exit(e.status));
      if (!WIFEXITED(e.status) || WEXITSTATUS(e.status) != 1) all_status_1_ = false;
    }
  }

  [[noreturn]] void raise_all_exited() {
    std::string why;
    for (const auto& e : exits_) why += (why.empty() ? "" : ", ") + e;
    raise_runtime("all " + std::to_string(trainer().workers().started().size()) +
                  " goldminer-dw workers it started have exited (" + why + "); none is left to deliver the epoch");
  }

  std::unique_ptr<Trainer> trainer_;
  uint32_t rank_ = 0, world_size_ = 1;  // also once closed
  std::vector<std::string> exits_;
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
  static const std::string doc = std::string(gm::kModuleDoc) + gm::session_signature() + gm::kModuleDocKeywords +
                                 gm::session_keyword_docs() + gm::kModuleDocRest;
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
        return gm::data_worker_program(job->dw_program, gm::dw_beside_package());
      },
      "The goldminer-dw a Session with workers=N starts (python -m goldminer --version).");
  // The keywords' defaults are SessionOptions' (include/goldminer/session.h).
  const gm::SessionOptions d;
  py::class_<gm::PySession>(m, "Session", "A GoldMiner trainer session; see help(goldminer._session).")
      .def(py::init<const std::string&, uint32_t, const py::object&, uint32_t, uint32_t, const std::string&,
                    const py::object&, const py::object&, uint32_t, bool, bool, uint64_t, uint64_t, const std::string&,
                    uint32_t, double,
                    const py::object&, const py::object&, double, const py::object&, const py::object&, bool, bool, bool,
                    const py::object&, int, uint32_t>(),
           py::arg("input"), py::arg("batch_size") = d.batch_size, py::kw_only(), py::arg("program") = py::none(),
           py::arg("workers") = 0, py::arg("threads") = d.local_worker_threads, py::arg("transport") = "ucx",
           py::arg("listen") = py::none(), py::arg("seed") = py::none(), py::arg("shuffle_buffer") = d.shuffle_buffer,
           py::arg("deterministic") = d.deterministic, py::arg("shuffle_splits") = d.shuffle_splits,
           py::arg("records_per_split") = d.records_per_split, py::arg("max_bad_records") = d.max_bad_records,
           py::arg("jpeg_decode") = d.jpeg_decode, py::arg("queue_batches") = d.queue_batches,
           py::arg("timeout") = d.timeout_s, py::arg("resume") = py::none(), py::arg("secret") = py::none(),
           py::arg("first_worker_timeout") = d.first_worker_timeout_s, py::arg("rank") = py::none(),
           py::arg("world_size") = py::none(), py::arg("drop_last") = d.drop_last, py::arg("pad") = d.pad,
           py::arg("pin_memory") = d.pin_memory, py::arg("numa_node") = py::none(),
           py::arg("cuda_device") = d.cuda_device, py::arg("split_retries") = d.split_retries)
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
