// Runs the stateless region on the example: values of every model input
// and stateless top-level output (cut sizes), and the trainer time of each
// stateless node (TorchScript 1.13 gives no static shapes, so sizes and
// times come from running; shared/docs/torchscript-split.md).
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/ir/alias_analysis.h>
#include <torch/cuda.h>

#include <algorithm>
#include <chrono>

#include "tw_lib/split/graph_split.h"

namespace goldminer::split {
namespace {

namespace prim = c10::prim;

using Clock = std::chrono::steady_clock;

// A graph that clones `nodes` (top-level nodes of `src`) with `inputs` as
// its inputs and returns `outputs` as one tuple. Shared (constant-like)
// producers of values that are not inputs are cloned on demand.
std::shared_ptr<Graph> sub_graph(const Analysis& a, const std::vector<Node*>& nodes,
                                 const std::vector<Value*>& inputs, const std::vector<Value*>& outputs) {
  auto g = std::make_shared<Graph>();
  std::unordered_map<Value*, Value*> env;
  for (Value* v : inputs) env[v] = g->addInput()->setType(v->type());
  std::function<Value*(Value*)> map = [&](Value* v) -> Value* {
    auto it = env.find(v);
    if (it != env.end()) return it->second;
    Node* def = v->node();
    // Only shared producers get here (callers pass every other input).
    Node* clone = g->insertNode(g->createClone(def, map));
    for (size_t i = 0; i < def->outputs().size(); ++i) env[def->outputs()[i]] = clone->outputs()[i];
    return env.at(v);
  };
  for (Node* n : nodes) {
    Node* clone = g->insertNode(g->createClone(n, map));
    for (size_t i = 0; i < n->outputs().size(); ++i) env[n->outputs()[i]] = clone->outputs()[i];
  }
  std::vector<Value*> outs;
  for (Value* v : outputs) outs.push_back(map(v));
  g->registerOutput(g->insertNode(g->createTuple(outs))->output());
  (void)a;
  return g;
}

std::vector<c10::IValue> run(torch::jit::GraphFunction& fn, std::vector<c10::IValue> stack) {
  fn.run(stack);
  return stack.at(0).toTupleRef().elements().vec();
}

}  // namespace

bool cuda_visible() { return torch::cuda::is_available(); }

double value_bytes(const c10::IValue& v) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    return t.defined() ? static_cast<double>(t.numel()) * t.element_size() : 0;
  }
  if (v.isInt() || v.isDouble() || v.isBool()) return 8;
  if (v.isNone() || v.isString() || v.isDevice()) return 0;
  if (v.isList() || v.isTuple()) {
    double sum = 0;
    auto elems = v.isList() ? v.toListRef().vec() : v.toTupleRef().elements().vec();
    for (const auto& e : elems) {
      double b = value_bytes(e);
      if (b < 0) return -1;
      sum += b;
    }
    return sum;
  }
  if (v.isGenericDict()) {
    double sum = 0;
    for (const auto& e : v.toGenericDict()) {
      double k = value_bytes(e.key()), b = value_bytes(e.value());
      if (k < 0 || b < 0) return -1;
      sum += k + b;
    }
    return sum;
  }
  return -1;
}

c10::IValue map_tensors(const c10::IValue& v, const std::function<at::Tensor(const at::Tensor&)>& f) {
  if (v.isTensor()) return v.toTensor().defined() ? c10::IValue(f(v.toTensor())) : v;
  if (v.isList()) {
    auto src = v.toList();
    c10::impl::GenericList out(src.elementType());
    for (const auto& e : src) out.push_back(map_tensors(e, f));
    return out;
  }
  if (v.isTuple()) {
    std::vector<c10::IValue> elems;
    for (const auto& e : v.toTupleRef().elements()) elems.push_back(map_tensors(e, f));
    return c10::ivalue::Tuple::create(std::move(elems));
  }
  if (v.isGenericDict()) {
    auto src = v.toGenericDict();
    c10::impl::GenericDict out(src.keyType(), src.valueType());
    for (const auto& e : src) out.insert(e.key(), map_tensors(e.value(), f));
    return out;
  }
  return v;
}

c10::IValue deep_clone(const c10::IValue& v) {
  return map_tensors(v, [](const at::Tensor& t) { return t.clone(); });
}

std::string torch_error_text(const std::exception& e) {
  std::string text;
  if (auto* c10_error = dynamic_cast<const c10::Error*>(&e))
    text = c10_error->what_without_backtrace();
  else
    text = e.what();
  // Interpreter errors put a TorchScript traceback first and the cause on
  // the last line; other errors carry a source excerpt after a blank line.
  if (text.rfind("The following operation failed in the TorchScript interpreter", 0) == 0) {
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    text = text.substr(text.rfind('\n') + 1);
  }
  auto cut = text.find("\n\n");
  if (cut != std::string::npos) text.resize(cut);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

Expected<Probe> probe_stateless(const Analysis& a, const std::vector<c10::IValue>& model_inputs, bool time_nodes,
                                bool on_cuda) {
  std::vector<Node*> stateless;
  std::vector<Value*> inputs(a.graph->inputs().begin() + 1, a.graph->inputs().end());
  std::vector<Value*> outputs = inputs;
  for (Node* n : a.nodes)
    if (a.cls.at(n) == NodeClass::kStateless) {
      stateless.push_back(n);
      for (Value* o : n->outputs()) outputs.push_back(o);
    }
  Probe probe;
  if (stateless.empty()) {  // nothing to run: the values are the inputs
    for (size_t i = 0; i < inputs.size(); ++i) probe.values[inputs[i]] = model_inputs.at(i);
    return probe;
  }
  try {
    auto g = sub_graph(a, stateless, inputs, outputs);
    torch::jit::GraphFunction fn("goldminer_probe", g, nullptr, torch::jit::ExecutorExecutionMode::SIMPLE);
    std::vector<c10::IValue> stack;
    for (const auto& v : model_inputs)
      stack.push_back(on_cuda ? map_tensors(v, [](const at::Tensor& t) { return t.to(c10::kCUDA); }) : deep_clone(v));
    auto values = run(fn, stack);
    for (size_t i = 0; i < outputs.size(); ++i) probe.values[outputs[i]] = values[i];
  } catch (const std::exception& e) {
    return Status::error("the example does not run through the model's stateless part: " +
                         torch_error_text(e));
  }
  if (!time_nodes) return probe;
  const torch::jit::AliasDb& db = *a.alias_db;
  for (Node* n : stateless) {
    std::vector<Value*> reads;
    for (Value* v : outer_inputs(n))
      if (a.cls.count(v->node()) == 0 || a.cls.at(v->node()) != NodeClass::kShared) reads.push_back(v);
    std::vector<Value*> outs(n->outputs().begin(), n->outputs().end());
    const bool mutates = db.writesToAlias(n, torch::jit::ValueSet(reads.begin(), reads.end()));
    try {
      auto g = sub_graph(a, {n}, reads, outs);
      torch::jit::GraphFunction fn("goldminer_time", g, nullptr, torch::jit::ExecutorExecutionMode::SIMPLE);
      std::vector<c10::IValue> args;
      for (Value* v : reads) args.push_back(probe.values.at(v));
      double best = 1e300, total = 0;
      for (int rep = 0; rep < 20 && (rep < 3 || total < 2.0); ++rep) {
        std::vector<c10::IValue> stack;
        for (const auto& v : args) stack.push_back(mutates ? deep_clone(v) : v);
        if (on_cuda) torch::cuda::synchronize();
        auto start = Clock::now();
        fn.run(stack);
        if (on_cuda) torch::cuda::synchronize();  // kernels run asynchronously
        double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
        if (rep > 0) best = std::min(best, ms);  // the first run warms caches
        total += ms;
      }
      probe.node_ms[n] = best;
      double bytes = 0;
      for (Value* v : reads) bytes += std::max(0.0, value_bytes(probe.values.at(v)));
      for (Value* v : outs) bytes += std::max(0.0, value_bytes(probe.values.at(v)));
      probe.node_bytes[n] = bytes;
    } catch (const std::exception& e) {
      return Status::error(std::string("cannot time ") + n->kind().toQualString() + " on the example: " +
                           torch_error_text(e));
    }
  }
  return probe;
}

}  // namespace goldminer::split
