// Fault tests of a split that fails on a worker through the worker's
// environment, not its input (Status::environment_error): a read error of
// the OS, a Python dataset process killed with SIGKILL (as the kernel's OOM
// killer does) in the middle of a split, an EIO raised in a Python
// dataset; and, for contrast, a dataset's own error, which still ends the
// run at once. The split is given back failed,
// re-leased from its first batch not delivered, the epoch stays exactly
// once and the worker goes on; past SessionOptions::split_retries the
// session fails naming the split's file, records and first byte and each
// failure's cause. Part of tests/dataplane_test.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <map>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "dw_daemon/python_program.h"
#include "dw_daemon/worker.h"
#include "gmcore/log.h"
#include "goldminer/session.h"
#include "tw_lib/session/dataplane_test_util.h"

namespace goldminer {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

// The log lines of this process (session and worker threads) while it
// lives; `on_line` runs on the logging thread, before the line is kept.
class LogCapture {
 public:
  explicit LogCapture(std::function<void(const std::string&)> on_line = nullptr) : on_line_(std::move(on_line)) {
    previous_ = log::set_sink([this](log::Level, const std::string& line) {
      if (on_line_) on_line_(line);
      std::lock_guard<std::mutex> lock(mu_);
      lines_.push_back(line);
    });
  }
  ~LogCapture() { log::set_sink(previous_); }
  size_t count(const std::string& part) const {
    std::lock_guard<std::mutex> lock(mu_);
    size_t n = 0;
    for (const auto& l : lines_) n += l.find(part) != std::string::npos ? 1 : 0;
    return n;
  }
  std::string text() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::string all;
    for (const auto& l : lines_) all += l + "\n";
    return all;
  }

 private:
  std::function<void(const std::string&)> on_line_;
  mutable std::mutex mu_;
  std::vector<std::string> lines_;
  log::Sink previous_;
};

// Data workers as threads of this process (the worker loop of
// goldminer-dw), each with one producer thread; their reports kept.
class Workers {
 public:
  void start(const std::string& trainer, int n, dw::ProgramLoader loader = nullptr) {
    for (int i = 0; i < n; ++i)
      threads_.emplace_back([this, trainer, loader, id = "w" + std::to_string(threads_.size())] {
        dw::WorkerOptions w;
        w.trainer = trainer;
        w.secret = "x";
        w.id = id;
        w.load_program = loader;
        auto r = dw::run_worker(w, stop_);
        std::lock_guard<std::mutex> lock(mu_);
        if (r.ok()) splits_failed_ += r->splits_failed;
        else errors_.push_back(id + ": " + r.status().message());
      });
  }
  // Stops them: each drains (SIGTERM's path) and returns its report. Done
  // while the session is still there, so that none sees it vanish mid-drain.
  void join() {
    stop_ = true;
    for (auto& t : threads_) t.join();
    threads_.clear();
  }
  ~Workers() { join(); }
  uint64_t splits_failed() const { return splits_failed_; }
  const std::vector<std::string>& errors() const { return errors_; }

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
  std::mutex mu_;
  uint64_t splits_failed_ = 0;
  std::vector<std::string> errors_;
};

// The records of one epoch, each counted; the session's status after it.
std::map<int64_t, int> read_epoch(Session* s) {
  std::map<int64_t, int> seen;
  for (const SessionBatch& b : s->epoch())
    for (uint32_t i = 0; i < b.samples; ++i) ++seen[b.sample_ids[2 * i + 1]];
  return seen;
}

void expect_exactly_once(const std::map<int64_t, int>& seen, int64_t records) {
  EXPECT_EQ(seen.size(), static_cast<size_t>(records));
  if (!seen.empty()) {
    EXPECT_EQ(seen.begin()->first, 0);
    EXPECT_EQ(seen.rbegin()->first, records - 1);
  }
  for (const auto& [record, times] : seen) EXPECT_EQ(times, 1) << "record " << record;
}

// The input path is a symlink; pointed at a folder, open() of it works
// and read() fails with EISDIR (or lseek() to a split's offset fails): a
// read error of the OS, as EIO is, on the real reader path
// (readers/file_io.cc), with no special file system.
struct SwappableInput {
  explicit SwappableInput(const TempDir& d) : file(d / "lines.txt"), folder(d / "a-folder"), link(d / "input.txt") {
    testing::write_text(file, 1000);
    fs::create_directory(folder);
    fs::create_symlink(file, link);
  }
  void point_at(const std::string& target) {
    const std::string next = link + ".next";
    fs::remove(next);
    fs::create_symlink(target, next);
    fs::rename(next, link);  // atomic: a reader sees one or the other
  }
  std::string file, folder, link;
};

SessionOptions text_options(const std::string& listen, const std::string& input) {
  SessionOptions o;
  o.listen = listen;
  o.secret = "x";
  o.input = "text:" + input;
  o.batch_size = 50;
  o.records_per_split = 200;  // 5 splits of 4 batches
  return o;
}

// A session over `input` that re-leases a failed split `retries` times;
// once it has planned, the input turns into a folder, so that every read
// of it fails until it is pointed back at the file.
Expected<std::unique_ptr<Session>> session_then_failing_reads(const std::string& listen, SwappableInput& input,
                                                              uint32_t retries) {
  SessionOptions o = text_options(listen, input.link);
  o.split_retries = retries;
  auto s = Session::create(o);
  if (s.ok()) input.point_at(input.folder);
  return s;
}

// Injected: the input's path turned into a folder after planning, so the
// worker's first read fails (EISDIR), and turned back by the log sink the
// moment the worker logs that failure (so it fails exactly once: one
// worker, one producer thread). Checked: the split comes back failed with
// its cause on the trainer's log, is re-leased (to the same worker: no
// other one is there) and re-run, every record arrives exactly once, the
// worker went on (still connected, not lost), and counts one failed split.
TEST(SplitFailureTest, AReadErrorOnAWorkerReLeasesItsSplitAndTheEpochStaysExactlyOnce) {
  TempDir d;
  SwappableInput input(d);
  std::atomic<bool> failed_once{false};
  LogCapture logs([&](const std::string& line) {
    if (line.find("goldminer-dw: split ") != std::string::npos && line.find("failed here") != std::string::npos &&
        !failed_once.exchange(true))
      input.point_at(input.file);
  });
  auto s = session_then_failing_reads("local://split-failure-read", input, 1);
  ASSERT_TRUE(s.ok()) << s.status().message();
  Workers workers;
  workers.start("local://split-failure-read", 1);
  const auto seen = read_epoch(s->get());
  ASSERT_TRUE((*s)->status().ok()) << (*s)->status().message() << "\n" << logs.text();
  expect_exactly_once(seen, 1000);
  const SessionMetrics m = (*s)->metrics();
  EXPECT_EQ(m.splits_failed, 1u) << logs.text();
  EXPECT_EQ(m.workers_lost, 0u) << "the worker went on";
  EXPECT_EQ(m.workers, 1u);
  EXPECT_EQ(logs.count("; re-leased (failure 1, at most 1 re-leases)"), 1u) << logs.text();
  EXPECT_EQ(logs.count("goldminer: session: worker w0 failed split "), 1u) << logs.text();
  EXPECT_EQ(logs.count("text: " + input.link + ": "), 2u) << "the cause, on the worker and on the trainer\n"
                                                          << logs.text();
  workers.join();
  s->reset();
  EXPECT_EQ(workers.splits_failed(), 1u);
  EXPECT_TRUE(workers.errors().empty()) << workers.errors()[0];
}

// Injected: the input's path a folder for good, two workers, split_retries
// 2. Checked: the first split that failed 3 times fails the session,
// naming the split's file, records and first byte, and each failure's
// worker and cause. (Which worker a re-lease goes to: LeaseTableTest.)
TEST(SplitFailureTest, ASplitFailingPastItsRetriesFailsTheSessionNamingFileRecordsAndCauses) {
  TempDir d;
  SwappableInput input(d);
  LogCapture logs;
  auto s = session_then_failing_reads("local://split-failure-bound", input, 2);
  ASSERT_TRUE(s.ok()) << s.status().message();
  Workers workers;
  workers.start("local://split-failure-bound", 2);
  auto b = (*s)->next();
  ASSERT_FALSE(b.ok()) << "no batch can be read";
  const std::string& e = b.status().message();
  const std::string cause = "worker w[01]: text: " + input.link + ": (read|seek): [^;]+";
  const std::regex re("^session: split ([0-4]) of " + input.link +
                      " \\(records ([0-9]+) to ([0-9]+), from byte ([0-9]+)\\) failed 3 times in epoch 0, more than "
                      "split_retries \\(2\\) allows: " + cause + "; " + cause + "; " + cause + "$");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(e, m, re)) << e;
  std::cerr << "the session's error: " << e << "\n";
  const int split = std::stoi(m[1]);
  EXPECT_EQ(std::stoi(m[2]), 200 * split);
  EXPECT_EQ(std::stoi(m[3]), 200 * split + 200);
  // Byte offset of record 200 * split: lines "sample I " + I % 37 'x's.
  uint64_t offset = 0;
  for (int i = 0; i < 200 * split; ++i) offset += ("sample " + std::to_string(i) + " ").size() + i % 37 + 1;
  EXPECT_EQ(std::stoull(m[4]), offset);
  workers.join();
  s->reset();
}

// A Python dataset of items 0 .. 599 (goldminer.DataLoader's program: a
// map-style dataset over "index:600", batches of 10, 100 items a split,
// so item 250 is batch 5 of split 2, mid-split) whose item 250 runs
// `fault` (Python statements) the first time it is read: a marker file
// says whether it was. Two workers as threads of this process.
class PythonDatasetFault {
 public:
  // Empty: the run could not be set up (the reason in skip_reason()).
  explicit PythonDatasetFault(const std::string& fault) {
    const char* python_env = std::getenv("PYTHON");
    python_ = python_env != nullptr && *python_env != '\0' ? python_env : "/usr/bin/python3";
    if (std::getenv("PYTHONPATH") == nullptr) {  // the staged goldminer package (make check sets it)
      skip_ = "PYTHONPATH (the staged goldminer package) not set";
      return;
    }
    if (std::system((python_ + " -c 'import torch, goldminer._dw_child' 2>/dev/null").c_str()) != 0) {
      skip_ = python_ + " cannot import torch and goldminer._dw_child";
      return;
    }
    marker_ = d_ / "fault-once";
    std::ofstream(marker_) << "item 250 runs its fault while this file exists\n";
    std::ofstream(d_ / "faulty.py") << "import errno\nimport os\nimport signal\n\n\n"
                                    << "class FaultOnce:\n"
                                    << "    def __init__(self, n, at, marker):\n"
                                    << "        self.n, self.at, self.marker = n, at, marker\n\n"
                                    << "    def __len__(self):\n        return self.n\n\n"
                                    << "    def __getitem__(self, i):\n"
                                    << "        if i == self.at and os.path.exists(self.marker):\n"
                                    << "            os.unlink(self.marker)\n"
                                    << "            " << fault << "\n"
                                    << "        return i\n";
    // The program bytes goldminer.DataLoader would send (python_program.h).
    std::ofstream(d_ / "make.py")
        << "import pickle, sys\nsys.path.insert(0, sys.argv[1])\nfrom faulty import FaultOnce\n"
        << "settings = {'dataset': FaultOnce(600, 250, sys.argv[2]), 'collate_fn': None, 'sampler': None,\n"
        << "            'shuffle': False, 'seed': 0, 'length': 600, 'worker_init_fn': None, 'program': None,\n"
        << "            'iterable': False, 'shards': 1, 'batch_size': 10, 'drop_last': False}\n"
        << "sys.stdout.buffer.write(pickle.dumps(settings))\n";
    const std::string pickle_file = d_ / "settings.pickle";
    if (std::system((python_ + " " + (d_ / "make.py") + " " + (d_ / "") + " " + marker_ + " > " + pickle_file).c_str()) !=
        0) {
      skip_ = "cannot pickle the dataset";
      return;
    }
    std::ifstream in(pickle_file, std::ios::binary);
    pickle_.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const std::string& skip_reason() const { return skip_; }
  bool fault_ran() const { return !marker_.empty() && !fs::exists(marker_); }
  LogCapture logs;  // what is logged while the fault lives (the run's workers and session)

  // Runs one epoch with two workers; the records seen (each item's value
  // checked against its sample id) and the session's status and metrics.
  struct Run {
    std::map<int64_t, int> seen;
    Status status;
    SessionMetrics metrics;
    uint64_t worker_splits_failed = 0;
    std::vector<std::string> worker_errors;
  };
  Run run(const std::string& listen) {
    Run r;
    SessionOptions o;
    o.listen = listen;
    o.secret = "x";
    o.input = "index:600";
    o.batch_size = 10;
    o.records_per_split = 100;
    o.shuffle_splits = false;
    o.program = std::string(dw::kPythonProgramMagic) + "python=" + python_ + "\nmode=map\npath=" + (d_ / "") + "\n\n" + pickle_;
    auto s = Session::create(o);
    if (!s.ok()) {
      r.status = s.status();
      return r;
    }
    Workers workers;
    workers.start(listen, 2, [](const std::string& bytes) { return dw::load_python_program(bytes); });
    for (const SessionBatch& b : (*s)->epoch()) {
      const auto& items = b.tensors.back();  // the collated items (after the batch structure's description)
      if (items.dtype != wire::DType::kInt64 || items.nbytes != 8u * b.samples) {
        r.status = Status::error("a batch without its int64 items");
        break;
      }
      const auto* v = reinterpret_cast<const int64_t*>(items.data);
      for (uint32_t i = 0; i < b.samples; ++i) {
        EXPECT_EQ(v[i], b.sample_ids[2 * i + 1]) << "item and sample id agree";
        ++r.seen[b.sample_ids[2 * i + 1]];
      }
    }
    if (r.status.ok()) r.status = (*s)->status();
    r.metrics = (*s)->metrics();
    workers.join();
    s->reset();
    r.worker_splits_failed = workers.splits_failed();
    r.worker_errors = workers.errors();
    return r;
  }

 private:
  TempDir d_;
  std::string python_, marker_, pickle_, skip_;
};

// What a fault that costs one re-lease leaves: the run went on, every item
// arrived exactly once, item 250 ran the fault, one split failed (on the
// trainer and on the worker), no worker was lost.
void expect_one_re_lease(const PythonDatasetFault& dataset, const PythonDatasetFault::Run& r) {
  ASSERT_TRUE(r.status.ok()) << r.status.message() << "\n" << dataset.logs.text();
  expect_exactly_once(r.seen, 600);
  EXPECT_TRUE(dataset.fault_ran()) << "item 250 ran its fault";
  EXPECT_EQ(r.metrics.splits_failed, 1u) << dataset.logs.text();
  EXPECT_EQ(r.metrics.workers_lost, 0u) << "the worker went on";
  EXPECT_EQ(r.worker_splits_failed, 1u);
}

// Injected: item 250 sends SIGKILL to its own Python process the first
// time it is read, as the kernel's OOM killer does to a process mid-batch.
// Checked: the worker gives the split back failed with the cause ("killed
// by signal 9") and goes on with a new Python process, the split is
// re-leased and re-run from its first batch not delivered, every item
// arrives exactly once with its value, no worker is lost.
TEST(SplitFailureTest, APythonProcessKilledMidSplitCostsAReLeaseNotTheRun) {
  PythonDatasetFault dataset("os.kill(os.getpid(), signal.SIGKILL)");
  if (!dataset.skip_reason().empty()) GTEST_SKIP() << dataset.skip_reason();
  const auto r = dataset.run("local://split-failure-python-kill");
  ASSERT_NO_FATAL_FAILURE(expect_one_re_lease(dataset, r));
  EXPECT_EQ(r.metrics.workers, 2u);
  EXPECT_EQ(dataset.logs.count("failed split 2 of "), 1u) << dataset.logs.text();
  EXPECT_EQ(dataset.logs.count(" (records 200 to 300, from byte 0): python dataset: "), 1u) << dataset.logs.text();
  EXPECT_EQ(dataset.logs.count("the Python process was killed by signal 9 before it answered"), 2u)
      << "once on the worker, once on the trainer\n" << dataset.logs.text();
  EXPECT_EQ(dataset.logs.count("python dataset: starting a Python process (1 ended or broke so far)"), 1u)
      << dataset.logs.text();
  EXPECT_TRUE(r.worker_errors.empty()) << r.worker_errors[0];
}

// Injected: item 250 raises OSError(EIO) the first time it is read, as a
// read of a flaky network file system would (one EIO). Checked: an error
// of the machine, not the data: the split is re-leased and the epoch is
// exactly once, with the child kept (no new Python process).
TEST(SplitFailureTest, AnEioInAPythonDatasetCostsAReLeaseNotTheRun) {
  PythonDatasetFault dataset("raise OSError(errno.EIO, os.strerror(errno.EIO), '/data/item-250.jpg')");
  if (!dataset.skip_reason().empty()) GTEST_SKIP() << dataset.skip_reason();
  const auto r = dataset.run("local://split-failure-python-eio");
  ASSERT_NO_FATAL_FAILURE(expect_one_re_lease(dataset, r));
  EXPECT_EQ(dataset.logs.count("dataset[250] (position 250 of epoch 0) raised OSError: [Errno 5] Input/output error: "
                       "'/data/item-250.jpg'"),
            2u)
      << "once on the worker, once on the trainer\n" << dataset.logs.text();
  EXPECT_EQ(dataset.logs.count("starting a Python process"), 0u) << "the child is kept\n" << dataset.logs.text();
}

// Injected: item 250 raises ValueError (the data's own error). Checked:
// it is not re-leased: the session fails at once with the dataset's error
// naming the index, and no split counts as failed.
TEST(SplitFailureTest, APythonDatasetsOwnErrorStillFailsTheRunAtOnce) {
  PythonDatasetFault dataset("raise ValueError('item 250 is broken')");
  if (!dataset.skip_reason().empty()) GTEST_SKIP() << dataset.skip_reason();
  const auto r = dataset.run("local://split-failure-python-value");
  ASSERT_FALSE(r.status.ok());
  EXPECT_NE(r.status.message().find("dataset[250] (position 250 of epoch 0) raised ValueError: item 250 is broken"),
            std::string::npos)
      << r.status.message();
  EXPECT_EQ(r.metrics.splits_failed, 0u);
}

}  // namespace
}  // namespace goldminer
