// The TorchScript worker program: which programs run one call at a time
// (those that may draw random numbers) and that calls from many threads at
// once give what calls one at a time give, seeded ones included; a program
// this libtorch cannot load says which libtorch it is. (The same programs
// in a Python child: torchscript_child_test.cc.)
#include <gtest/gtest.h>
#include <torch/script.h>
#include <torch/version.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "dw_daemon/program.h"
#include "dw_daemon/program_test_util.h"

namespace goldminer::dw {
namespace {

std::unique_ptr<WorkerProgram> load(const std::string& source) {
  auto p = load_torchscript(module_bytes(source), 1);
  EXPECT_TRUE(p.ok()) << p.status().message();
  return p.ok() ? std::move(p).value() : nullptr;
}

std::vector<float> first_output(WorkerProgram* p, const readers::Batch& b, uint64_t seed) {
  auto out = p->run(b, seed, 0);
  EXPECT_TRUE(out.ok()) << out.status().message();
  if (!out.ok()) return {};
  const auto& t = (*out)->tensors().at(0);
  const auto* f = reinterpret_cast<const float*>(t.data);
  return std::vector<float>(f, f + t.nbytes / sizeof(float));
}

TEST(TorchProgramTest, OnlyProgramsThatMayDrawRandomNumbersRunOneCallAtATime) {
  EXPECT_FALSE(load("def forward(self, x):\n  return torch.tanh(x * 2.0 + 1.0)\n")->serializes_calls());
  EXPECT_TRUE(load("def forward(self, x):\n  return x + torch.rand(x.size())\n")->serializes_calls());
  EXPECT_TRUE(load("def forward(self, x):\n  return torch.dropout(x, 0.5, True)\n")->serializes_calls());
  EXPECT_TRUE(load("def forward(self, x):\n  return x[torch.randperm(x.size(0))]\n")->serializes_calls());
  // Inside a branch, and in a method that forward calls.
  EXPECT_TRUE(load("def forward(self, x):\n  if bool(x.sum() > 0):\n    x = x.bernoulli()\n  return x\n")
                  ->serializes_calls());
  EXPECT_TRUE(load("def noise(self, x):\n  return torch.randn_like(x)\n"
                   "def forward(self, x):\n  return x + self.noise(x)\n")
                  ->serializes_calls());
}

// Eight threads each run 40 batches at once; every output equals the one
// a lone call with the same seed gives.
void expect_concurrent_equals_serial(WorkerProgram* p) {
  constexpr int kThreads = 8, kBatches = 40;
  std::vector<std::vector<std::vector<float>>> alone(kThreads), together(kThreads);
  for (int t = 0; t < kThreads; ++t)
    for (int i = 0; i < kBatches; ++i) alone[t].push_back(first_output(p, batch_of(float(t)), 1000 * t + i));
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kBatches; ++i) together[t].push_back(first_output(p, batch_of(float(t)), 1000 * t + i));
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(together, alone);
}

TEST(TorchProgramTest, ConcurrentCallsGiveWhatLoneCallsGive) {
  auto plain = load("def forward(self, x):\n  return torch.tanh(x * 2.0 + 1.0)\n");
  expect_concurrent_equals_serial(plain.get());
  auto seeded = load("def forward(self, x):\n  return x + torch.rand(x.size())\n");
  expect_concurrent_equals_serial(seeded.get());
  // Seeds matter: two seeds, two outputs.
  EXPECT_NE(first_output(seeded.get(), batch_of(0), 1), first_output(seeded.get(), batch_of(0), 2));
}

// Injected: a forward that asks for a petabyte. Checked: the failure is
// the machine's (Status::environment_error: the worker gives the split
// back to be re-run elsewhere); a forward that fails on its batch (a bad
// shape) is the program's own error; both say the cause, not the
// interpreter's "The following operation failed" line.
TEST(TorchProgramTest, OutOfMemoryIsAnEnvironmentErrorABadShapeIsNot) {
  auto oom = load("def forward(self, x):\n  return x.new_empty([1 << 50])\n");
  ASSERT_NE(oom, nullptr);
  auto r = oom->run(batch_of(0), 1, 0);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().is_environment_error()) << r.status().message();
  EXPECT_EQ(r.status().message().rfind("program: forward ran out of memory: ", 0), 0u) << r.status().message();
  EXPECT_NE(r.status().message().find("you tried to allocate 4503599627370496 bytes"), std::string::npos)
      << "the cause, not the interpreter's first line: " << r.status().message();
  auto bad_shape = load("def forward(self, x):\n  return x.view([-1, 7])\n");  // 16 values
  ASSERT_NE(bad_shape, nullptr);
  r = bad_shape->run(batch_of(0), 1, 0);
  ASSERT_FALSE(r.ok());
  EXPECT_FALSE(r.status().is_environment_error()) << r.status().message();
  EXPECT_EQ(r.status().message().rfind("program: forward failed: RuntimeError: shape '[-1, 7]' is invalid", 0), 0u)
      << r.status().message();
}

// A program saved by torch 2.x with an operator libtorch 1.13 lacks
// (scaled_dot_product_attention), made by $GOLDMINER_TORCH2_PYTHON: the
// in-process loader names the libtorch it links and the way out.
TEST(TorchProgramTest, AProgramThisLibtorchCannotLoadNamesItsVersion) {
  const char* python = std::getenv("GOLDMINER_TORCH2_PYTHON");
  if (python == nullptr || *python == '\0')
    GTEST_SKIP() << "$GOLDMINER_TORCH2_PYTHON (a python with torch 2.x) not set";
  char dir[] = "/tmp/goldminer-script-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string d = dir;
  std::ofstream(d + "/make.py") << "import sys, torch\n"
                                   "class M(torch.nn.Module):\n"
                                   "    def forward(self, x: torch.Tensor):\n"
                                   "        q = x.reshape([1, 1, -1, 1])\n"
                                   "        return torch.nn.functional.scaled_dot_product_attention(q, q, q)\n"
                                   "torch.jit.save(torch.jit.script(M()), sys.argv[1])\n";
  ASSERT_EQ(std::system((std::string(python) + " -W ignore " + d + "/make.py " + d + "/m.pt").c_str()), 0);
  std::ifstream in(d + "/m.pt", std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  std::system(("rm -rf " + d).c_str());
  auto p = load_torchscript(bytes.str(), 1);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message(),
            "program: not a loadable TorchScript module: Unknown builtin op: aten::scaled_dot_product_attention. "
            "(this goldminer-dw links libtorch " TORCH_VERSION
            "; a trainer with another torch should let goldminer.Session hand the program over, which wraps it "
            "for a Python child that runs the job's torch)");
}

}  // namespace
}  // namespace goldminer::dw
