// A TorchScript program run by the job's torch in a Python child
// (python_program.h, mode=torchscript) gives what the in-process runner
// (torch_program.cc) gives on the same batch and seed: the same tensors
// byte for byte, random ops included, and the same errors. Needs libtorch
// (the in-process runner) and /usr/bin/python3 with torch and the staged
// goldminer package on PYTHONPATH (the children); skips, saying so,
// without them.
#include <gtest/gtest.h>
#include <torch/script.h>
#include <torch/version.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "dw_daemon/program.h"
#include "dw_daemon/program_test_util.h"
#include "dw_daemon/python_program.h"

namespace goldminer::dw {
namespace {

// The program wrapped for a Python child of `python`, as goldminer.Session
// wraps it.
std::string for_child(const std::string& python, const std::string& bytes) {
  return std::string(kPythonProgramMagic) + "python=" + python + "\nmode=torchscript\ntorch=" TORCH_VERSION "\n\n" +
         bytes;
}

std::string skip_reason() {
  if (std::getenv("PYTHONPATH") == nullptr) return "PYTHONPATH (the staged goldminer package) not set";
  if (access("/usr/bin/python3", X_OK) != 0) return "no /usr/bin/python3 here";
  if (std::system("/usr/bin/python3 -c 'import torch' 2>/dev/null") != 0) return "/usr/bin/python3 has no torch";
  return "";
}

// float32 x[4, 8], int64 y[4], uint8 z[0] (an empty tensor).
readers::Batch mixed_batch() {
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[i] = 0.03f * float(i) - 0.2f;
  readers::Batch b;
  b.tensors.push_back(tensor_of(wire::DType::kFloat32, {4, 8}, x));
  b.tensors.push_back(tensor_of(wire::DType::kInt64, {4}, std::vector<int64_t>{3, -1, 7, 1ll << 40}));
  b.tensors.push_back(tensor_of(wire::DType::kUInt8, {0}, std::vector<uint8_t>{}));
  return b;
}

// An output as comparable values: per tensor its dtype, shape and bytes.
struct Tensor {
  wire::DType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
  bool operator==(const Tensor& o) const { return dtype == o.dtype && shape == o.shape && bytes == o.bytes; }
};

std::vector<Tensor> outputs(WorkerProgram* p, const readers::Batch& b, uint64_t seed) {
  auto out = p->run(b, seed, 0);
  EXPECT_TRUE(out.ok()) << out.status().message();
  std::vector<Tensor> r;
  if (out.ok())
    for (const auto& t : (*out)->tensors())
      r.push_back({t.dtype, t.shape, std::vector<uint8_t>(t.data, t.data + t.nbytes)});
  return r;
}

// `source`'s module loaded in process and in a /usr/bin/python3 child, both
// with `threads` threads; the error of the first that could not load it.
struct Runners {
  std::unique_ptr<WorkerProgram> here, child;
};

Expected<Runners> both_runners(const char* source, int threads) {
  const std::string bytes = module_bytes(source);
  auto here = load_torchscript(bytes, threads);
  if (!here.ok()) return here.status();
  auto child = load_python_program(for_child("/usr/bin/python3", bytes), threads);
  if (!child.ok()) return child.status();
  return Runners{std::move(*here), std::move(*child)};
}

// Each program, in process and in a child, on the same batch and seeds
// (one past 2^63): the same tensors, byte for byte, random ops included.
TEST(TorchScriptChildTest, APythonChildGivesWhatTheInProcessRunnerGives) {
  if (auto why = skip_reason(); !why.empty()) GTEST_SKIP() << why;
  const char* programs[] = {
      "def forward(self, x, y, z):\n"
      "  return (torch.tanh(x * 2.0) + torch.rand(x.size()), y * 3, x > 0.1, torch.dropout(x, 0.5, True),\n"
      "          x[torch.randperm(4)], z)\n",
      "def forward(self, x, y, z):\n  return [x.t(), x.sum(1), (y % 5).int()]\n",
      "def forward(self, x, y, z):\n  return x.double() * 0.5 + torch.randn_like(x).double()\n",
  };
  const readers::Batch batch = mixed_batch();
  for (const char* source : programs) {
    SCOPED_TRACE(source);
    auto r = both_runners(source, 2);
    ASSERT_TRUE(r.ok()) << r.status().message();
    for (uint64_t seed : {uint64_t{1}, uint64_t{12345}, (uint64_t{1} << 63) + 5}) {
      const std::vector<Tensor> expected = outputs(r->here.get(), batch, seed);
      ASSERT_FALSE(expected.empty());
      EXPECT_EQ(outputs(r->child.get(), batch, seed), expected) << "seed " << seed;
    }
  }
}

// A failing forward fails alike in both: the same message, and out of
// memory is the machine's (environment) in both.
TEST(TorchScriptChildTest, APythonChildFailsAsTheInProcessRunnerFails) {
  if (auto why = skip_reason(); !why.empty()) GTEST_SKIP() << why;
  const char* programs[] = {
      "def forward(self, x):\n  return x.view([-1, 7])\n",
      "def forward(self, x):\n  return x.new_empty([1 << 50])\n",
      "def forward(self, x):\n  return x.half()\n",
      "def forward(self, x):\n  return (x, 3)\n",
      "def forward(self, x):\n  return x.size(0)\n",
  };
  for (const char* source : programs) {
    SCOPED_TRACE(source);
    auto r = both_runners(source, 1);
    ASSERT_TRUE(r.ok()) << r.status().message();
    auto expected = r->here->run(batch_of(1), 7, 0);
    auto got = r->child->run(batch_of(1), 7, 0);
    ASSERT_FALSE(expected.ok());
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().message(), expected.status().message());
    EXPECT_EQ(got.status().is_environment_error(), expected.status().is_environment_error());
  }
}

}  // namespace
}  // namespace goldminer::dw
