// The TorchScript worker program: the only daemon file that includes
// libtorch (about 8 s and 0.7 GB to compile).
#include <ATen/Parallel.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/csrc/jit/runtime/operator.h>
#include <torch/script.h>
#include <torch/version.h>

#include <algorithm>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "dw_daemon/program.h"

namespace goldminer::dw {
namespace {

// The line of a torch exception's text that says what went wrong: its
// first, or for an error the TorchScript interpreter wraps ("The following
// operation failed in the TorchScript interpreter." and a traceback) its
// last, the error itself.
std::string cause_of(const std::string& what) {
  const std::string first = what.substr(0, what.find('\n'));
  if (first.rfind("The following operation failed in the TorchScript interpreter", 0) != 0) return first;
  size_t end = what.find_last_not_of('\n');
  if (end == std::string::npos) return first;
  const size_t begin = what.rfind('\n', end);
  return what.substr(begin == std::string::npos ? 0 : begin + 1, end + 1 - (begin == std::string::npos ? 0 : begin + 1));
}

Expected<torch::ScalarType> to_torch(wire::DType d) {
  switch (d) {
    case wire::DType::kUInt8: return torch::kUInt8;
    case wire::DType::kInt32: return torch::kInt32;
    case wire::DType::kInt64: return torch::kInt64;
    case wire::DType::kFloat32: return torch::kFloat32;
    case wire::DType::kFloat64: return torch::kFloat64;
    case wire::DType::kBool: return torch::kBool;
  }
  return Status::error("program: unknown dtype");
}

Expected<wire::DType> from_torch(torch::ScalarType t) {
  switch (t) {
    case torch::kUInt8: return wire::DType::kUInt8;
    case torch::kInt32: return wire::DType::kInt32;
    case torch::kInt64: return wire::DType::kInt64;
    case torch::kFloat32: return wire::DType::kFloat32;
    case torch::kFloat64: return wire::DType::kFloat64;
    case torch::kBool: return wire::DType::kBool;
    default: break;
  }
  return Status::error(std::string("program: output dtype ") + c10::toString(t) +
                       " cannot be sent (uint8, int32, int64, float32, float64, bool)");
}

// Operators that draw from torch's generator without taking one as an
// argument (every other random operator has an overload with a Generator
// argument); read off libtorch 1.13's schemas.
bool draws_without_generator_argument(const std::string& name) {
  const bool like = name.size() > 5 && name.compare(name.size() - 5, 5, "_like") == 0;
  return name.find("dropout") != std::string::npos || (name.rfind("rand", 0) == 0 && like) ||
         name == "_no_grad_normal_" || name == "_no_grad_uniform_" || name == "normal" || name == "uniform";
}

// Whether an operator may draw random numbers: one of its overloads takes
// a Generator, or it is a dropout. Cached per symbol.
bool may_draw(c10::Symbol kind, std::unordered_map<c10::Symbol, bool>* seen) {
  if (auto it = seen->find(kind); it != seen->end()) return it->second;
  bool draws = draws_without_generator_argument(kind.toUnqualString());
  for (const auto& op : torch::jit::getAllOperatorsFor(kind))
    for (const auto& arg : op->schema().arguments()) {
      c10::TypePtr t = arg.type();
      if (auto opt = t->cast<c10::OptionalType>()) t = opt->getElementType();
      draws |= t->kind() == c10::TypeKind::GeneratorType;
    }
  (*seen)[kind] = draws;
  return draws;
}

bool block_may_draw(const torch::jit::Block* block, std::unordered_map<c10::Symbol, bool>* seen) {
  for (const torch::jit::Node* node : block->nodes()) {
    if (may_draw(node->kind(), seen)) return true;
    for (const torch::jit::Block* sub : node->blocks())
      if (block_may_draw(sub, seen)) return true;
  }
  return false;
}

// Whether the module may draw random numbers from torch's generator: any
// method of it or of its submodules (so whatever forward calls), with the
// functions each calls inlined.
bool module_may_draw(const torch::jit::Module& module) {
  std::unordered_map<c10::Symbol, bool> seen;
  for (const torch::jit::Module& m : module.modules())
    for (const torch::jit::Method& method : m.get_methods()) {
      std::shared_ptr<torch::jit::Graph> graph = method.graph()->copy();
      torch::jit::Inline(*graph);
      if (block_may_draw(graph->block(), &seen)) return true;
    }
  return false;
}

class TorchOutput final : public ProgramOutput {
 public:
  std::vector<torch::Tensor> keep;
  std::vector<wire::TensorView> views;
  const std::vector<wire::TensorView>& tensors() const override { return views; }
};

class TorchProgram final : public WorkerProgram {
 public:
  TorchProgram(torch::jit::Module module, int threads)
      : module_(std::move(module)), threads_(threads), serialized_(module_may_draw(module_)) {}

  bool serializes_calls() const override { return serialized_; }

  Expected<std::unique_ptr<ProgramOutput>> run(const readers::Batch& batch, uint64_t seed, uint32_t) override {
    try {
      std::vector<torch::jit::IValue> inputs;
      for (const auto& t : batch.tensors) {
        auto st = to_torch(t.dtype);
        if (!st.ok()) return st.status();
        // A view of the reader's bytes: the program must not write to it.
        inputs.emplace_back(torch::from_blob(const_cast<uint8_t*>(t.data.data()), t.shape,
                                             torch::TensorOptions().dtype(*st)));
      }
      torch::jit::IValue out;
      torch::NoGradGuard no_grad;
      at::set_num_threads(threads_);  // intra-op threads of this calling thread
      if (serialized_) {
        // Torch's CPU generator is process-wide: seed and run under one
        // lock so each batch's random ops see exactly its own seed.
        std::lock_guard<std::mutex> lock(mu_);
        torch::manual_seed(seed);
        out = module_.forward(inputs);
      } else {
        // Nothing random: the worker's threads run it side by side.
        out = module_.forward(inputs);
      }
      auto result = std::make_unique<TorchOutput>();
      std::vector<torch::Tensor> tensors;
      if (out.isTensor()) {
        tensors.push_back(out.toTensor());
      } else if (out.isTuple()) {
        for (const auto& v : out.toTuple()->elements()) {
          if (!v.isTensor()) return Status::error("program: forward returned a tuple holding a non-tensor");
          tensors.push_back(v.toTensor());
        }
      } else if (out.isTensorList()) {
        for (const auto& t : out.toTensorList()) tensors.push_back(t);
      } else {
        return Status::error("program: forward must return a tensor or a tuple of tensors, it returned " +
                             out.tagKind());
      }
      for (auto& t : tensors) {
        t = t.contiguous();
        auto dt = from_torch(t.scalar_type());
        if (!dt.ok()) return dt.status();
        result->views.push_back({*dt, t.sizes().vec(), static_cast<const uint8_t*>(t.data_ptr()),
                                 static_cast<uint64_t>(t.nbytes())});
        result->keep.push_back(t);
      }
      return std::unique_ptr<ProgramOutput>(std::move(result));
    } catch (const std::bad_alloc& e) {  // memory is the machine's: another worker may run the batch
      return Status::environment_error(std::string("program: forward ran out of memory: ") + e.what());
    } catch (const std::exception& e) {
      const std::string what = e.what();
      // torch's CPU allocator reports a failed allocation as a plain
      // c10::Error, which the interpreter wraps like any other.
      if (dynamic_cast<const c10::OutOfMemoryError*>(&e) != nullptr ||
          what.find("DefaultCPUAllocator: can't allocate memory") != std::string::npos)
        return Status::environment_error("program: forward ran out of memory: " + cause_of(what));
      return Status::error("program: forward failed: " + cause_of(what));
    }
  }

 private:
  torch::jit::Module module_;
  int threads_;
  const bool serialized_;  // forward may draw random numbers
  std::mutex mu_;
};

}  // namespace

Expected<std::unique_ptr<WorkerProgram>> load_torchscript(const std::string& bytes, int threads) {
  try {
    std::istringstream in(bytes);
    torch::jit::Module m = torch::jit::load(in, torch::kCPU);
    m.eval();
    if (!m.find_method("forward")) return Status::error("program: the TorchScript module has no forward method");
    return std::unique_ptr<WorkerProgram>(new TorchProgram(std::move(m), threads));
  } catch (const std::exception& e) {
    std::string what = e.what();
    // The first line that says something (an unknown operator's text
    // starts with a newline).
    const size_t begin = std::min(what.find_first_not_of('\n'), what.size());
    const std::string cause = what.substr(begin, what.find('\n', begin) - begin);
    // Most often a program saved by a newer torch than the one linked here.
    return Status::error("program: not a loadable TorchScript module: " + cause +
                         " (this goldminer-dw links libtorch " TORCH_VERSION
                         "; a trainer with another torch should let goldminer.Session hand the program over, "
                         "which wraps it for a Python child that runs the job's torch)");
  }
}

}  // namespace goldminer::dw
