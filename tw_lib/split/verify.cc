// Equivalence of a split (split.h, verify_split): the model and the split
// programs run on fresh copies of the example, in eval and train mode.
#include <cstring>

#include "goldminer/split.h"
#include "tw_lib/split/graph_split.h"
#include "tw_lib/split/program_util.h"

namespace goldminer {
namespace {

using split::IValue;
using namespace split;  // program_util's helpers

// Bitwise equality of two program outputs; `where` gets the first difference.
bool same(const IValue& a, const IValue& b, const std::string& path, std::string* where) {
  if (a.isTensor() && b.isTensor()) {
    at::Tensor x = a.toTensor(), y = b.toTensor();
    if (x.defined() != y.defined()) return (*where = path + ": one undefined"), false;
    if (!x.defined()) return true;
    if (x.scalar_type() != y.scalar_type() || x.sizes() != y.sizes())
      return (*where = path + ": dtype or shape differs"), false;
    x = x.detach().contiguous();
    y = y.detach().contiguous();
    if (std::memcmp(x.data_ptr(), y.data_ptr(), x.numel() * x.element_size()) != 0) {
      double diff = (x.to(at::kDouble) - y.to(at::kDouble)).abs().max().item<double>();
      return (*where = path + ": values differ (max abs diff " + std::to_string(diff) + ")"), false;
    }
    return true;
  }
  auto ea = a.isTuple() || a.isList() ? (a.isTuple() ? a.toTupleRef().elements().vec() : a.toListRef().vec())
                                      : std::vector<IValue>{};
  auto eb = b.isTuple() || b.isList() ? (b.isTuple() ? b.toTupleRef().elements().vec() : b.toListRef().vec())
                                      : std::vector<IValue>{};
  if (a.isTuple() || a.isList()) {
    if (ea.size() != eb.size()) return (*where = path + ": length differs"), false;
    for (size_t i = 0; i < ea.size(); ++i)
      if (!same(ea[i], eb[i], path + "[" + std::to_string(i) + "]", where)) return false;
    return true;
  }
  if (a.isGenericDict() && b.isGenericDict()) {
    auto da = a.toGenericDict(), db = b.toGenericDict();
    if (da.size() != db.size()) return (*where = path + ": dict size differs"), false;
    for (const auto& e : da) {
      if (!db.contains(e.key())) return (*where = path + ": key missing"), false;
      if (!same(e.value(), db.at(e.key()), path + "[key]", where)) return false;
    }
    return true;
  }
  if (a == b) return true;
  *where = path + ": values differ";
  return false;
}

}  // namespace

Expected<Equivalence> verify_split(const SplitInputs& in, const std::string& worker_bytes,
                                   const std::string& trainer_bytes, const std::string& method, uint64_t seed) {
  try {
    RngGuard rng;
    Equivalence eq;
    auto example = load_example(in.example, in.example_name);
    if (!example.ok()) return example.status();
    auto load_all = [&]() -> Expected<std::vector<torch::jit::Module>> {
      std::vector<torch::jit::Module> m;
      for (const std::string* bytes : {&in.model, &worker_bytes, &trainer_bytes, &in.transform}) {
        if (bytes->empty()) break;
        auto loaded = load_module(*bytes, "program");
        if (!loaded.ok()) return loaded.status();
        m.push_back(*loaded);
      }
      return m;
    };
    for (bool train : {false, true}) {
      auto programs = load_all();
      if (!programs.ok()) return programs.status();
      auto& m = *programs;
      for (auto& module : m) module.train(train);
      Programs p{m[0], std::nullopt, false};
      std::vector<IValue> x = *example;
      if (m.size() > 3) {
        p.transform = m[3];
        const auto& ts = m[3].get_method("forward").function().getSchema();
        auto bound = bind_arguments(ts, x, "transform.forward", "the example");
        if (!bound.ok()) return bound.status();
        x = *bound;
        p.unpack = ts.returns().at(0).type()->cast<c10::TupleType>() &&
                   m[0].get_method(method).function().getSchema().arguments().size() > 2;
      } else {
        auto bound = bind_arguments(m[0].get_method(method).function().getSchema(), x, "model." + method,
                                    "the example");
        if (!bound.ok()) return bound.status();
        x = *bound;
      }
      torch::manual_seed(seed);
      std::vector<IValue> in1 = model_inputs(p, clone_all(x));
      IValue out1 = m[0].get_method(method)(in1);
      if (train) train_step_loss(out1);
      torch::manual_seed(seed);
      IValue out2 = m[2].forward(elements(m[1].forward(clone_all(x))));
      if (train) train_step_loss(out2);
      std::string where;
      bool outputs = same(out1, out2, "output", &where);
      if (!train) {
        eq.eval_equal = outputs;
        if (!outputs) eq.detail = "eval: " + where;
        continue;
      }
      eq.train_outputs_equal = outputs;
      if (!outputs && eq.detail.empty()) eq.detail = "train: " + where;
      eq.train_grads_equal = true;
      eq.parameters = 0;
      auto trainer_params = m[2].named_parameters();
      std::unordered_map<std::string, at::Tensor> by_name;
      for (const auto& np : trainer_params) by_name[np.name] = np.value;
      for (const auto& np : m[0].named_parameters()) {
        eq.parameters += 1;
        auto it = by_name.find("model." + np.name);
        std::string w;
        if (it == by_name.end() || !same(np.value.grad(), it->second.grad(), "grad of " + np.name, &w)) {
          eq.train_grads_equal = false;
          if (eq.detail.empty()) eq.detail = it == by_name.end() ? "trainer lacks parameter " + np.name : w;
        }
      }
      eq.train_buffers_equal = true;
      std::unordered_map<std::string, at::Tensor> buffers;
      for (const auto& nb : m[2].named_buffers()) buffers[nb.name] = nb.value;
      for (const auto& nb : m[0].named_buffers()) {
        auto it = buffers.find("model." + nb.name);
        std::string w;
        if (it == buffers.end() || !same(nb.value, it->second, "buffer " + nb.name, &w)) {
          eq.train_buffers_equal = false;
          if (eq.detail.empty()) eq.detail = it == buffers.end() ? "trainer lacks buffer " + nb.name : w;
        }
      }
    }
    return eq;
  } catch (const std::exception& e) {
    return Status::error("verification failed to run: " + split::torch_error_text(e));
  }
}

}  // namespace goldminer
