// Internal interface between the torch translation units of the split:
// analysis.cc (graph preparation and node classification), probe.cc
// (running the stateless region on the example), extract.cc (worker and
// trainer programs), split.cc (orchestration, I/O) and measure.cc.
// Only these files include torch headers.
#ifndef GOLDMINER_TW_LIB_SPLIT_GRAPH_SPLIT_H_
#define GOLDMINER_TW_LIB_SPLIT_GRAPH_SPLIT_H_

#include <torch/csrc/jit/ir/alias_analysis.h>
#include <torch/script.h>

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gmcore/status.h"

namespace goldminer::split {

using torch::jit::Block;
using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Value;

enum class NodeClass {
  kStateless,  // may run on the worker
  kShared,     // constant-like (prim::Constant and pure functions of constants): cloned where needed
  kStateful,   // stays on the trainer
};

// The classified graph of one method. Owns the graph; Node* and Value*
// point into it until extract_programs consumes it. Thread-compatible.
struct Analysis {
  std::shared_ptr<Graph> graph;  // inlined, optimised copy; input 0 is the model
  // Alias analysis of `graph` as classified (built once; probe_stateless
  // uses it too). Invalid once the graph is edited.
  std::unique_ptr<torch::jit::AliasDb> alias_db;
  std::vector<Node*> nodes;      // top-level nodes in program order
  std::unordered_map<Node*, NodeClass> cls;
  // For stateful nodes: the root cause, "<node>: <why>" (e.g.
  // "prim::GetAttr fc.weight: parameter", "aten::dropout: nondeterministic
  // in the model"), built on demand; valid while `graph` is unedited.
  std::function<std::string(Node*)> why;
  // Stateless pairs (a, b), b before a, that touch the same memory with a
  // write: a may move to the worker only if b does.
  std::vector<std::pair<Node*, Node*>> order;
  int nodes_total = 0;      // recursive, constants excluded
  int nodes_stateless = 0;  // recursive count inside stateless top-level nodes
};

// Prepares and classifies `model.<method>`; see split.h for the rules.
Expected<Analysis> analyse_method(const torch::jit::Module& model, const std::string& method);

// Inputs of `n` and values defined outside `n` used in its blocks (or
// returned by them), each once, in first-use order.
std::vector<Value*> outer_inputs(Node* n);

// Nodes under `block`, nested blocks included, prim::Constant excluded.
int count_nodes(Block* block);

// The stateless region run on example inputs (the model's inputs, without
// the module). Values: every model input and output of a stateless
// top-level node. Times: trainer cost of each stateless top-level node, ms
// of CPU, and the tensor bytes it reads and writes.
struct Probe {
  std::unordered_map<Value*, c10::IValue> values;
  std::unordered_map<Node*, double> node_ms;
  std::unordered_map<Node*, double> node_bytes;
};
// `on_cuda`: the inputs are copied to the GPU first, so values live there
// and times are GPU times (synchronised); only when cuda_visible().
Expected<Probe> probe_stateless(const Analysis& analysis, const std::vector<c10::IValue>& model_inputs,
                                bool time_nodes, bool on_cuda = false);
// Whether libtorch sees a CUDA device (Debian's libtorch is built without CUDA).
bool cuda_visible();

// The values crossing from worker to trainer when the nodes in `moved`
// (stateless top-level nodes) run on the worker: worker-side values that a
// trainer-side node reads or the model returns, in the worker's output order.
std::vector<Value*> cut_values(const Analysis& analysis, const std::vector<Node*>& moved);

// Worker and trainer programs for the nodes in `moved` with the cut `cut`
// (from cut_values). Consumes `analysis->graph`, which becomes the
// trainer's graph: read everything needed from the analysis first.
struct TransformCall {
  const torch::jit::Module* module = nullptr;  // null: no transform
  bool unpack = false;  // its tuple output spreads over the model's arguments
};
struct Extraction {
  torch::jit::Module worker;
  torch::jit::Module trainer;
};
Expected<Extraction> extract_programs(Analysis* analysis, const std::vector<Node*>& moved,
                                      const std::vector<Value*>& cut, const torch::jit::Module& model,
                                      const TransformCall& transform,
                                      const std::vector<c10::TypePtr>& worker_input_types,
                                      const std::vector<std::string>& worker_input_names);

// Bytes of the tensors in `value` (recursively through containers); 8 per
// scalar. -1 when the value cannot be shipped (objects, modules, futures...).
double value_bytes(const c10::IValue& value);

// `value` with `f` applied to each of its tensors, containers rebuilt
// (lists, tuples, dicts; undefined tensors and other values as they are).
c10::IValue map_tensors(const c10::IValue& value, const std::function<at::Tensor(const at::Tensor&)>& f);

// Deep copy of tensors in `value` (for repeated runs of mutating code).
c10::IValue deep_clone(const c10::IValue& value);

// The first line of a torch error, without C++ backtrace.
std::string torch_error_text(const std::exception& e);

}  // namespace goldminer::split

#endif  // GOLDMINER_TW_LIB_SPLIT_GRAPH_SPLIT_H_
