// Loading, binding and running TorchScript programs: what the split
// (split.cc), its measurement (measure.cc) and its verification (verify.cc)
// share. Internal; includes torch headers.
#ifndef GOLDMINER_TW_LIB_SPLIT_PROGRAM_UTIL_H_
#define GOLDMINER_TW_LIB_SPLIT_PROGRAM_UTIL_H_

#include <torch/script.h>

#include <optional>
#include <string>
#include <vector>

#include "gmcore/status.h"

namespace goldminer::split {

using c10::IValue;

// Keeps the caller's RNG stream: measurement and verification run
// nondeterministic ops.
class RngGuard {
 public:
  RngGuard() : state_(at::detail::getDefaultCPUGenerator().get_state()) {}
  ~RngGuard() {
    at::Generator generator = at::detail::getDefaultCPUGenerator();  // shares the default's state
    generator.set_state(state_);
  }

 private:
  at::Tensor state_;
};

// Checks values against a method's schema (self excluded), fills defaults;
// the error names `what` (the method) and `given` (where the values came from).
Expected<std::vector<IValue>> bind_arguments(const c10::FunctionSchema& schema, std::vector<IValue> values,
                                             const std::string& what, const std::string& given);
// The elements of a tuple, or the value alone.
std::vector<IValue> elements(const IValue& v);
// The leading dimension of the first tensor in `v` (0 if none).
int64_t first_batch_dim(const IValue& v);
Expected<torch::jit::Module> load_module(const std::string& bytes, const std::string& name);
Expected<std::vector<IValue>> load_example(const std::string& bytes, const std::string& name);
std::string save_bytes(const torch::jit::Module& m);
// Forward, plus backward of the sum of outputs when one requires grad.
double train_step_loss(const IValue& out);
void zero_grads(const torch::jit::Module& m);
std::vector<IValue> clone_all(const std::vector<IValue>& v);

struct Programs {
  torch::jit::Module model;
  std::optional<torch::jit::Module> transform;
  bool unpack = false;
};

// The model's inputs for the transform's output.
std::vector<IValue> model_inputs(const Programs& p, const std::vector<IValue>& x);

}  // namespace goldminer::split

#endif  // GOLDMINER_TW_LIB_SPLIT_PROGRAM_UTIL_H_
