// Helpers the worker-program tests (torch_program_test.cc,
// torchscript_child_test.cc) and bench/dataplane/torchscript_child_bench.cc
// share. tensor_of is torch-free; module_bytes is declared only where the
// includer has torch's headers (it includes <torch/script.h> first).
#ifndef GOLDMINER_DW_DAEMON_PROGRAM_TEST_UTIL_H_
#define GOLDMINER_DW_DAEMON_PROGRAM_TEST_UTIL_H_

#include <cstdint>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "readers/reader.h"

namespace goldminer::dw {

// A reader tensor of `dtype` and `shape` holding `values`.
template <class T>
readers::HostTensor tensor_of(wire::DType dtype, std::vector<int64_t> shape, const std::vector<T>& values) {
  readers::HostTensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.data.assign(reinterpret_cast<const uint8_t*>(values.data()),
                reinterpret_cast<const uint8_t*>(values.data() + values.size()));
  return t;
}

// A reader batch of one float32 tensor of 16 values, each `v`.
inline readers::Batch batch_of(float v) {
  readers::Batch b;
  b.tensors.push_back(tensor_of(wire::DType::kFloat32, {16}, std::vector<float>(16, v)));
  return b;
}

#ifdef TORCH_VERSION_MAJOR
// A module with `source` as its methods, serialized as a trainer sends it.
inline std::string module_bytes(const std::string& source) {
  torch::jit::Module m("m");
  m.define(source);
  std::ostringstream out;
  m.save(out);
  return out.str();
}
#endif

}  // namespace goldminer::dw

#endif  // GOLDMINER_DW_DAEMON_PROGRAM_TEST_UTIL_H_
