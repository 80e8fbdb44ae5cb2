// Tests of the Python program (dw_daemon/python_program.h), part of
// tests/dataplane_test: a bad header names its line, a missing interpreter
// and an unloadable pickle say so; a TorchScript program run by the job's
// torch in a child (mode=torchscript): one its torch cannot load names both
// versions, a child killed in the middle of a batch is an environment
// error, a reply that grows the child's shared memory past the worker's
// mapping gives all its tensors from the new mapping, and a program saved
// by torch 2.x runs with that torch ($GOLDMINER_TORCH2_PYTHON); a child
// whose every descriptor above 2 is closed (as a container runtime closes
// them) runs a Dataset batch and a TorchScript program. The
// dataset batches are tested end to end by python/tests/test_dataloader.py
// (goldminer.DataLoader); that a child's outputs are the in-process
// runner's, by tests/torch_program_test.
#include "dw_daemon/python_program.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <sstream>
#include <string>
#include <vector>

#include "tests/test_util.h"

namespace goldminer::dw {
namespace {

std::string load_error(const std::string& bytes) {
  auto p = load_python_program(bytes);
  return p.ok() ? "" : p.status().message();
}

TEST(PythonProgramTest, ABadHeaderNamesItsLine) {
  const std::string magic = kPythonProgramMagic;
  EXPECT_FALSE(is_python_program("PK\x03\x04 a TorchScript zip"));
  EXPECT_TRUE(is_python_program(magic + "python=/x\n\npickle"));
  EXPECT_EQ(load_error(magic + "python=/usr/bin/python3\nbogus\n\npickle"),
            "python dataset: header line 3: expected KEY=VALUE");
  EXPECT_EQ(load_error(magic + "python=/usr/bin/python3\ncolor=blue\n\npickle"),
            "python dataset: header line 3: unknown key 'color'");
  EXPECT_EQ(load_error(magic + "python=/usr/bin/python3\n\n"), "python dataset: no pickled dataset after the header");
  EXPECT_EQ(load_error(magic + "python=/usr/bin/python3\npath=/x"), "python dataset: header line 3 has no end");
  EXPECT_EQ(load_error("not a program"), "python dataset: not a GOLDMINER-PYTHON program");
}

TEST(PythonProgramTest, AMissingInterpreterOrABadPickleSaysSo) {
  const std::string magic = kPythonProgramMagic;
  const std::string missing = load_error(magic + "python=/nonexistent/python3\n\n\x80\x04N.");
  EXPECT_EQ(missing.rfind("python dataset: cannot start /nonexistent/python3: ", 0), 0u) << missing;
  if (access("/usr/bin/python3", X_OK) != 0) GTEST_SKIP() << "no /usr/bin/python3 here";
  const char* path = std::getenv("PYTHONPATH");  // the staged goldminer package (make check sets it)
  if (path == nullptr) GTEST_SKIP() << "PYTHONPATH (the staged goldminer package) not set";
  const std::string garbage = load_error(magic + "python=/usr/bin/python3\n\nnot a pickle at all");
  EXPECT_EQ(garbage.rfind("cannot load the DataLoader's dataset on this worker: UnpicklingError", 0), 0u) << garbage;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A TorchScript module saved by `python` (torch.jit.script of a Module
// whose forward is `forward`, a def over x), and that torch's version; the
// bytes are empty when python has no torch.
struct Saved {
  std::string bytes, version;
};

Saved save_with(const std::string& python, const std::string& forward) {
  char dir[] = "/tmp/goldminer-script-XXXXXX";
  if (::mkdtemp(dir) == nullptr) return {};
  const std::string d = dir;
  std::ofstream(d + "/make.py") << "import sys, torch\n"
                                   "class M(torch.nn.Module):\n"
                                   "    def forward(self, x: torch.Tensor):\n"
                                << forward
                                << "torch.jit.save(torch.jit.script(M()), sys.argv[1])\n"
                                   "print(torch.__version__, end='')\n";
  Saved s;
  s.version = testing::output_if_ok(python + " -W ignore " + d + "/make.py " + d + "/m.pt");
  s.bytes = read_file(d + "/m.pt");
  testing::output_if_ok("rm -rf " + d);
  return s;
}

std::string wrapped(const std::string& python, const std::string& saved_by, const std::string& bytes) {
  return std::string(kPythonProgramMagic) + "python=" + python + "\nmode=torchscript\ntorch=" + saved_by + "\n\n" +
         bytes;
}

// One float32 tensor of `n` values 0, 1, ...
readers::Batch counting(int n) {
  readers::Batch b;
  readers::HostTensor t;
  t.dtype = wire::DType::kFloat32;
  t.shape = {n};
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = float(i);
  t.data.assign(reinterpret_cast<const uint8_t*>(v.data()), reinterpret_cast<const uint8_t*>(v.data() + n));
  b.tensors.push_back(std::move(t));
  return b;
}

std::vector<float> floats(const wire::TensorView& t) {
  const auto* f = reinterpret_cast<const float*>(t.data);
  return std::vector<float>(f, f + t.nbytes / sizeof(float));
}

// The python with torch and the staged goldminer package, or a reason to skip.
std::string skip_reason(const std::string& python) {
  if (std::getenv("PYTHONPATH") == nullptr) return "PYTHONPATH (the staged goldminer package) not set";
  if (access(python.c_str(), X_OK) != 0) return "no " + python + " here";
  return "";
}

// The program of a module whose forward is `forward`, saved and loaded by
// /usr/bin/python3; `*skip` says why a test cannot run it (no python3 here,
// or no torch in it) and is empty otherwise.
Expected<std::unique_ptr<WorkerProgram>> debian_program(const std::string& forward, std::string* skip) {
  *skip = skip_reason("/usr/bin/python3");
  if (!skip->empty()) return Status::error(*skip);
  const Saved saved = save_with("/usr/bin/python3", forward);
  if (saved.bytes.empty()) {
    *skip = "/usr/bin/python3 has no torch";
    return Status::error(*skip);
  }
  return load_python_program(wrapped("/usr/bin/python3", saved.version, saved.bytes));
}

TEST(PythonProgramTest, TorchScriptHeaderNeedsTheTrainersTorch) {
  const std::string magic = kPythonProgramMagic;
  EXPECT_EQ(load_error(magic + "python=/usr/bin/python3\nmode=torchscript\n\nPK"),
            "torchscript program: no torch= in the header (the trainer's torch version)");
  EXPECT_EQ(load_error(magic + "python=/usr/bin/python3\nmode=torchscript\ntorch=1.13.0\n\n"),
            "torchscript program: no TorchScript module after the header");
  EXPECT_EQ(load_error(magic + "python=/usr/bin/python3\nmode=jit\n\nPK"),
            "python dataset: header line 3: mode 'jit': expected map, iterable or torchscript");
}

TEST(PythonProgramTest, AProgramTheJobsTorchCannotLoadNamesBothVersions) {
  if (auto why = skip_reason("/usr/bin/python3"); !why.empty()) GTEST_SKIP() << why;
  const std::string version = testing::output_if_ok("/usr/bin/python3 -c 'import torch; print(torch.__version__, end=\"\")'");
  if (version.empty()) GTEST_SKIP() << "/usr/bin/python3 has no torch";
  const std::string e = load_error(wrapped("/usr/bin/python3", "9.9.9", "PK\x03\x04 not a zip archive after all"));
  EXPECT_EQ(e.rfind("torchscript program: torch " + version +
                        " (/usr/bin/python3) cannot load the worker program saved by torch 9.9.9: RuntimeError: ",
                    0),
            0u)
      << e;
}

// The children of this process that run a TorchScript program.
std::vector<pid_t> script_children() {
  std::vector<pid_t> pids;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return pids;
  while (dirent* d = ::readdir(proc)) {
    const pid_t pid = std::atoi(d->d_name);
    if (pid <= 0) continue;
    const std::string stat = read_file("/proc/" + std::string(d->d_name) + "/stat");
    const size_t paren = stat.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream rest(stat.substr(paren + 2));
    std::string state;
    pid_t ppid = 0;
    rest >> state >> ppid;
    std::string cmdline = read_file("/proc/" + std::string(d->d_name) + "/cmdline");
    for (char& c : cmdline)
      if (c == '\0') c = ' ';
    if (ppid == ::getpid() && cmdline.find("goldminer._dw_child --torchscript") != std::string::npos)
      pids.push_back(pid);
  }
  ::closedir(proc);
  return pids;
}

// Injected: SIGKILL to the child while forward runs (a loop of about 100 s).
// Checked: the batch fails as an environment error (the worker gives the
// split back), within the watchdog's 60 s; the next batch gets a new child.
TEST(PythonProgramTest, AChildKilledInTheMiddleOfABatchIsAnEnvironmentError) {
  if (auto why = skip_reason("/usr/bin/python3"); !why.empty()) GTEST_SKIP() << why;
  ::signal(SIGPIPE, SIG_IGN);  // as goldminer-dw: a dead child's pipe is an error from write()
  const Saved slow = save_with("/usr/bin/python3",
                               "        for i in range(200000):\n"
                               "            x = torch.tanh(torch.ones([1 << 18]) + x.sum())[:x.numel()]\n"
                               "        return x\n");
  if (slow.bytes.empty()) GTEST_SKIP() << "/usr/bin/python3 has no torch";
  auto p = load_python_program(wrapped("/usr/bin/python3", slow.version, slow.bytes));
  ASSERT_TRUE(p.ok()) << p.status().message();
  const std::vector<pid_t> children = script_children();
  ASSERT_EQ(children.size(), 1u);
  auto running = std::async(std::launch::async, [&] { return (*p)->run(counting(4), 7, 0); });
  ASSERT_EQ(running.wait_for(std::chrono::milliseconds(500)), std::future_status::timeout) << "forward ended early";
  ASSERT_EQ(::kill(children[0], SIGKILL), 0);
  ASSERT_EQ(running.wait_for(std::chrono::seconds(60)), std::future_status::ready) << "watchdog: run() hangs";
  auto r = running.get();
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().is_environment_error()) << r.status().message();
  EXPECT_EQ(r.status().message(), "torchscript program: the Python process was killed by signal 9 before it "
                                  "answered (its stderr is this worker's)");
  EXPECT_TRUE(script_children().empty());
}

// warm_up(3) before the first split: three processes run the program (the
// one load started and two more), a second warm_up starts none, and
// three batches at once find them started.
TEST(PythonProgramTest, WarmingUpStartsAProcessForEachCallAtOnce) {
  std::string skip;
  auto p = debian_program("        return x * 2.0\n", &skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(script_children().size(), 1u);
  (*p)->warm_up(3);
  const std::vector<pid_t> started = script_children();
  EXPECT_EQ(started.size(), 3u);
  (*p)->warm_up(3);
  EXPECT_EQ(script_children(), started);
  std::vector<std::future<Expected<std::unique_ptr<ProgramOutput>>>> runs;
  for (int i = 0; i < 3; ++i)
    runs.push_back(std::async(std::launch::async, [&] { return (*p)->run(counting(4), 1, 0); }));
  for (auto& r : runs) {
    auto out = r.get();
    ASSERT_TRUE(out.ok()) << out.status().message();
    EXPECT_EQ(floats((*out)->tensors()[0]), (std::vector<float>{0, 2, 4, 6}));
  }
  std::vector<pid_t> after = script_children();
  std::sort(after.begin(), after.end());
  std::vector<pid_t> before = started;
  std::sort(before.begin(), before.end());
  EXPECT_EQ(after, before) << "a batch started a process of its own";
}

// Injected: a reply whose second tensor lies past the worker's mapping of
// the child's shared memory (a batch more than twice the size of the
// child's earlier ones: the child grows the memfd, the worker maps it
// again). Checked: the first tensor, which lies inside the old mapping, is
// read from the new one (its view pointed into the unmapped one: a
// DataLoader batch's structure tensor held other bytes, or the worker
// crashed), and so is the second.
TEST(PythonProgramTest, ALargerBatchMapsTheSharedMemoryAgainForAllItsTensors) {
  std::string skip;
  auto p = debian_program("        return (x[:1] * 0.0 + 42.0, x * 2.0 + 1.0)\n", &skip);
  if (!skip.empty()) GTEST_SKIP() << skip;
  ASSERT_TRUE(p.ok()) << p.status().message();
  for (int n : {4, 1 << 20, 1 << 22}) {  // the child's memfd: 1 MiB, then 4 MiB + 64 bytes, then 16 MiB + 64
    auto out = (*p)->run(counting(n), 1, 0);
    ASSERT_TRUE(out.ok()) << out.status().message();
    const auto& t = (*out)->tensors();
    ASSERT_EQ(t.size(), 2u);
    EXPECT_EQ(floats(t[0]), (std::vector<float>{42})) << "batch of " << n;
    std::vector<float> want(n);
    for (int i = 0; i < n; ++i) want[i] = 2.0f * float(i) + 1.0f;
    EXPECT_EQ(floats(t[1]), want) << "batch of " << n;
  }
}

// An interpreter that closes every inherited descriptor above 2 before it
// runs /usr/bin/python3 with its arguments, as `enroot start` does
// (closefrom) before the container's command; its path, in `dir`.
std::string closing_interpreter(const std::string& dir) {
  const std::string path = dir + "/python-closing-fds";
  std::ofstream(path) << "#!/usr/bin/python3\n"
                         "import os, sys\n"
                         "os.closerange(3, os.sysconf('SC_OPEN_MAX'))\n"
                         "os.execv('/usr/bin/python3', ['/usr/bin/python3'] + sys.argv[1:])\n";
  ::chmod(path.c_str(), 0755);
  return path;
}

std::vector<int64_t> int64s(const wire::TensorView& t) {
  const auto* v = reinterpret_cast<const int64_t*>(t.data);
  return std::vector<int64_t>(v, v + t.nbytes / sizeof(int64_t));
}

// Injected: the child runs through closing_interpreter, so it has only
// stdin, stdout and stderr. Checked: a Dataset's batch and a TorchScript
// program's outputs come back through the shared memory the worker sent
// over stdin (with descriptors 3 and 4 as the memfds, neither starts).
TEST(PythonProgramTest, TheChildNeedsNoDescriptorAboveTwo) {
  if (auto why = skip_reason("/usr/bin/python3"); !why.empty()) GTEST_SKIP() << why;
  char dir[] = "/tmp/goldminer-closing-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string python = closing_interpreter(dir);
  const std::string settings = testing::output_if_ok(
      "/usr/bin/python3 -c 'import pickle, sys; sys.stdout.buffer.write(pickle.dumps({\"dataset\": "
      "[10, 11, 12, 13, 14, 15], \"sampler\": None, \"shuffle\": False, \"seed\": 0, \"length\": 6, "
      "\"collate_fn\": None}))'");
  ASSERT_FALSE(settings.empty());
  const std::string version = testing::output_if_ok("/usr/bin/python3 -c 'import torch; print(torch.__version__, end=\"\")'");
  if (version.empty()) {
    testing::output_if_ok("rm -rf " + std::string(dir));
    GTEST_SKIP() << "/usr/bin/python3 has no torch";
  }
  auto dataset = load_python_program(std::string(kPythonProgramMagic) + "python=" + python + "\n\n" + settings);
  ASSERT_TRUE(dataset.ok()) << dataset.status().message();
  readers::Batch positions;
  positions.records = {2, 3, 5};
  auto batch = (*dataset)->run(positions, 1, 0);
  ASSERT_TRUE(batch.ok()) << batch.status().message();
  ASSERT_EQ((*batch)->tensors().size(), 2u);  // the batch's structure, then the collated items
  EXPECT_EQ(int64s((*batch)->tensors()[1]), (std::vector<int64_t>{12, 13, 15}));

  const Saved saved = save_with("/usr/bin/python3", "        return x * 2.0\n");
  ASSERT_FALSE(saved.bytes.empty());
  auto script = load_python_program(wrapped(python, saved.version, saved.bytes));
  ASSERT_TRUE(script.ok()) << script.status().message();
  auto out = (*script)->run(counting(4), 1, 0);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(floats((*out)->tensors().at(0)), (std::vector<float>{0, 2, 4, 6}));
  testing::output_if_ok("rm -rf " + std::string(dir));
}

// A program saved by torch 2.x runs with that torch: the interpreter of a
// venv that has it, $GOLDMINER_TORCH2_PYTHON; its outputs are the values
// forward makes, and a random op gives the same batch under the same seed.
TEST(PythonProgramTest, AProgramSavedByTorch2RunsWithThatTorch) {
  const char* env = std::getenv("GOLDMINER_TORCH2_PYTHON");
  if (env == nullptr || *env == '\0') GTEST_SKIP() << "$GOLDMINER_TORCH2_PYTHON (a python with torch 2.x) not set";
  const std::string python = env;
  if (auto why = skip_reason(python); !why.empty()) GTEST_SKIP() << why;
  const Saved saved = save_with(python, "        return (x * 2.0 + 1.0, x + torch.rand(x.size()), x > 2.0)\n");
  ASSERT_FALSE(saved.bytes.empty()) << python << " could not save a TorchScript module";
  ASSERT_EQ(saved.version.rfind("2.", 0), 0u) << python << " has torch " << saved.version;
  auto p = load_python_program(wrapped(python, saved.version, saved.bytes), 2);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_FALSE((*p)->serializes_calls());
  std::vector<float> noisy[3];
  for (int i = 0; i < 3; ++i) {
    auto out = (*p)->run(counting(5), i < 2 ? 42 : 43, 0);
    ASSERT_TRUE(out.ok()) << out.status().message();
    const auto& t = (*out)->tensors();
    ASSERT_EQ(t.size(), 3u);
    EXPECT_EQ(floats(t[0]), (std::vector<float>{1, 3, 5, 7, 9}));
    EXPECT_EQ(t[1].shape, (std::vector<int64_t>{5}));
    noisy[i] = floats(t[1]);
    ASSERT_EQ(t[2].dtype, wire::DType::kBool);
    EXPECT_EQ(std::vector<uint8_t>(t[2].data, t[2].data + t[2].nbytes), (std::vector<uint8_t>{0, 0, 0, 1, 1}));
  }
  EXPECT_EQ(noisy[0], noisy[1]) << "the same seed, the same batch";
  EXPECT_NE(noisy[0], noisy[2]);

  // An operator torch 1.13 lacks: that torch cannot load the program and
  // says so, naming both versions; torch 2.x runs it.
  const Saved sdpa = save_with(python, "        q = x.reshape([1, 1, -1, 1])\n"
                                       "        return torch.nn.functional.scaled_dot_product_attention(q, q, q)\n");
  ASSERT_FALSE(sdpa.bytes.empty());
  auto runs = load_python_program(wrapped(python, sdpa.version, sdpa.bytes));
  ASSERT_TRUE(runs.ok()) << runs.status().message();
  auto out = (*runs)->run(counting(5), 1, 0);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ((*out)->tensors().at(0).shape, (std::vector<int64_t>{1, 1, 5, 1}));
  const std::string old = testing::output_if_ok("/usr/bin/python3 -c 'import torch; print(torch.__version__, end=\"\")'");
  if (old.empty() || old.rfind("1.", 0) != 0) GTEST_SKIP() << "/usr/bin/python3 has no torch 1.x (" << old << ")";
  EXPECT_EQ(load_error(wrapped("/usr/bin/python3", sdpa.version, sdpa.bytes)),
            "torchscript program: torch " + old + " (/usr/bin/python3) cannot load the worker program saved by torch " +
                sdpa.version + ": RuntimeError: Unknown builtin op: aten::scaled_dot_product_attention.");
}

}  // namespace
}  // namespace goldminer::dw
