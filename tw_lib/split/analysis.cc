// Graph preparation and node classification (split.h, graph_split.h).
//
// Passes (shared/docs/torchscript-split.md): inline, freeze plain
// attributes, ConstantPropagation, UnrollConstantLoops, RemoveListMutation,
// RemoveTensorMutation, EliminateDeadCode. Without constant propagation
// F.normalize stays on the trainer; without loop unrolling, list-append
// loops do. The passes preserve semantics, so the trainer runs this graph.
#include <torch/csrc/jit/ir/alias_analysis.h>
#include <torch/csrc/jit/passes/constant_propagation.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/csrc/jit/passes/loop_unrolling.h>
#include <torch/csrc/jit/passes/remove_mutation.h>

#include <optional>
#include <set>
#include <unordered_set>

#include "tw_lib/split/graph_split.h"

namespace goldminer::split {
namespace {

using torch::jit::AliasDb;
using torch::jit::ValueSet;
namespace prim = c10::prim;
namespace attr = c10::attr;

void all_nodes(Block* block, std::vector<Node*>* out) {
  for (Node* n : block->nodes()) {
    out->push_back(n);
    for (Block* b : n->blocks()) all_nodes(b, out);
  }
}

// Module-typed values: the object each refers to and its attribute path.
struct ModuleRef {
  c10::intrusive_ptr<c10::ivalue::Object> object;
  std::string path;
};

// Walks GetAttr chains from the model. With `freeze`, replaces reads of
// plain attributes (ints, floats, bools, strings, lists and tuples of them)
// that the program never sets with constants, so the worker needs no module
// state. Returns the root-cause text of the GetAttr nodes left.
std::unordered_map<Node*, std::string> resolve_attributes(Graph& graph, const torch::jit::Module& model,
                                                          bool freeze) {
  std::unordered_map<Node*, std::string> why;
  std::unordered_map<Value*, ModuleRef> modules;
  modules[graph.inputs()[0]] = {model._ivalue(), ""};
  std::vector<Node*> nodes;
  all_nodes(graph.block(), &nodes);
  std::set<std::string> set_names;
  for (Node* n : nodes)
    if (n->kind() == prim::SetAttr) set_names.insert(n->s(attr::name));
  for (Node* n : nodes) {
    if (n->kind() != prim::GetAttr) continue;
    const std::string name = n->s(attr::name);
    auto it = modules.find(n->input());
    if (it == modules.end()) {
      why[n] = "prim::GetAttr " + name + ": attribute of a module value";
      continue;
    }
    const ModuleRef& ref = it->second;
    const std::string path = ref.path.empty() ? name : ref.path + "." + name;
    const std::string head = "prim::GetAttr " + path + ": ";
    auto type = ref.object->type();
    auto slot = type->findAttributeSlot(name);
    if (!slot) {
      why[n] = head + "unknown attribute";
      continue;
    }
    c10::IValue value = ref.object->getSlot(*slot);
    if (value.isObject()) {
      modules[n->output()] = {value.toObject(), path};
      why[n] = head + "submodule";
      continue;
    }
    if (name == "training") {
      why[n] = head + "training flag (module mode)";
    } else if (type->is_parameter(*slot)) {
      why[n] = head + "parameter";
    } else if (type->is_buffer(*slot)) {
      why[n] = head + "buffer";
    } else if (value.isTensor()) {
      why[n] = head + "tensor attribute (module state)";
    } else if (set_names.count(name)) {
      why[n] = head + "attribute set by the program";
    } else if (freeze) {
      torch::jit::WithInsertPoint guard(n);
      if (auto constant = torch::jit::tryInsertConstant(graph, value)) {
        n->output()->replaceAllUsesWith(*constant);
        continue;  // dead; removed by EliminateDeadCode
      }
      why[n] = head + "attribute that is not a constant";
    } else {
      why[n] = head + "module attribute";
    }
  }
  return why;
}

// Inlines every call whose callee is a graph, from the callees' own graphs.
// torch::jit::Inline uses each callee's optimized_graph(), which a freshly
// loaded module compiles on first use (~110 ms for ResNet-50); our passes
// below do that optimisation once, on the whole graph. Returns whether a
// call was inlined (callees' calls are inlined by the next round).
bool inline_calls(Block* block) {
  bool changed = false;
  for (auto it = block->nodes().begin(); it != block->nodes().end();) {
    Node* cur = *it++;
    if (cur->kind() == prim::CallFunction || cur->kind() == prim::CallMethod) {
      if (auto* callee = torch::jit::tryToGraphFunction(cur)) {
        if (cur->kind() == prim::CallFunction) cur->removeInput(0);
        // insertGraph, not inlineCallTo: no inlined-call-stack bookkeeping
        // per node (debug information the split does not need).
        torch::jit::WithInsertPoint guard(cur);
        auto outputs = torch::jit::insertGraph(*cur->owningGraph(), *callee->graph(), cur->inputs());
        for (size_t i = 0; i < outputs.size(); ++i) cur->outputs()[i]->replaceAllUsesWith(outputs[i]);
        cur->destroy();
        changed = true;
        continue;
      }
    }
    for (Block* b : cur->blocks()) changed |= inline_calls(b);
  }
  return changed;
}

bool nondeterministic(Node* n) {
  if (n->isNondeterministic()) return true;
  if (!n->kind().is_aten()) return false;
  std::string name = n->kind().toUnqualString();
  while (!name.empty() && name.back() == '_') name.pop_back();
  static const std::set<std::string> kRandom = {"bernoulli", "normal",      "uniform",  "exponential",
                                                "geometric", "log_normal",  "cauchy",   "multinomial",
                                                "poisson",   "rrelu",       "rrelu_with_noise"};
  return name.find("rand") != std::string::npos || name.find("dropout") != std::string::npos ||
         kRandom.count(name) > 0;
}

class Classifier {
 public:
  Classifier(Analysis* a, std::unordered_map<Node*, std::string> attr_why)
      : a_(*a), attr_why_(std::move(attr_why)), db_(a->graph) {}

  void run() {
    Value* self = a_.graph->inputs()[0];
    std::vector<Node*> stateful_writers, stateful, stateless, stateless_writers;
    for (Node* n : a_.graph->nodes()) {
      a_.nodes.push_back(n);
      std::vector<Value*> reads = outer_inputs(n);
      ValueSet touched(reads.begin(), reads.end());
      for (Value* o : n->outputs()) touched.insert(o);
      touched_[n] = touched;
      std::optional<std::string> why = intrinsic(n);
      for (size_t i = 0; !why && i < reads.size(); ++i) {
        Value* v = reads[i];
        if (v == self) why = std::string(n->kind().toQualString()) + ": uses the module object";
        auto producer = a_.cls.find(v->node());
        if (producer != a_.cls.end() && producer->second == NodeClass::kStateful)
          why = a_.why[v->node()];
      }
      const bool writes = db_.writesToAlias(n, ValueSet(reads.begin(), reads.end()));
      for (size_t i = 0; !why && i < stateful_writers.size(); ++i)
        if (db_.writesToAlias(stateful_writers[i], touched))
          why = std::string(n->kind().toQualString()) + ": reads memory that trainer-side " +
                stateful_writers[i]->kind().toQualString() + " writes";
      for (size_t i = 0; !why && writes && i < stateful.size(); ++i)
        if (db_.writesToAlias(n, touched_[stateful[i]]))
          why = std::string(n->kind().toQualString()) + ": writes memory that trainer-side " +
                stateful[i]->kind().toQualString() + " reads";
      if (why) {
        a_.cls[n] = NodeClass::kStateful;
        a_.why[n] = *why;
        stateful.push_back(n);
        if (writes) stateful_writers.push_back(n);
        continue;
      }
      if (shared(n, reads)) {
        a_.cls[n] = NodeClass::kShared;
        if (n->kind() != prim::Constant) a_.nodes_stateless += 1;
        continue;
      }
      a_.cls[n] = NodeClass::kStateless;
      a_.nodes_stateless += 1;
      for (Block* b : n->blocks()) a_.nodes_stateless += count_nodes(b);
      // Memory order among stateless nodes, enforced by the cut.
      for (Node* w : stateless_writers)
        if (db_.writesToAlias(w, touched)) a_.order.emplace_back(n, w);
      if (writes)
        for (Node* m : stateless)
          if (db_.writesToAlias(n, touched_[m])) a_.order.emplace_back(n, m);
      stateless.push_back(n);
      if (writes) stateless_writers.push_back(n);
    }
  }

 private:
  // Why `n` (or a node in its blocks) must run on the trainer by itself.
  std::optional<std::string> intrinsic(Node* n) {
    const std::string kind = n->kind().toQualString();
    if (n->kind() == prim::GetAttr) {
      auto it = attr_why_.find(n);
      return it != attr_why_.end() ? it->second : kind + ": module attribute";
    }
    if (n->kind() == prim::SetAttr) return kind + " " + n->s(attr::name) + ": side effect (sets module state)";
    if (n->kind() == prim::CallMethod || n->kind() == prim::CallFunction)
      return kind + ": call that cannot be inlined";
    if (nondeterministic(n)) return kind + ": nondeterministic in the model";
    // An exception aborts the batch on either side: raising on the worker
    // is the same program behaviour, so checks may move.
    if (n->kind() != prim::RaiseException && n->hasSideEffects()) return kind + ": side effect";
    for (Block* b : n->blocks())
      for (Node* inner : b->nodes())
        if (auto why = intrinsic(inner)) return *why + " (inside " + kind + ")";
    return std::nullopt;
  }

  // Constant-like: pure, no blocks, only constant-like inputs, never written.
  bool shared(Node* n, const std::vector<Value*>& reads) {
    if (n->kind() == prim::Constant) return true;
    if (!n->blocks().empty() || n->outputs().empty() || db_.hasWriters(n)) return false;
    for (Value* v : reads) {
      auto it = a_.cls.find(v->node());
      if (it == a_.cls.end() || it->second != NodeClass::kShared) return false;
    }
    return true;
  }

  Analysis& a_;
  std::unordered_map<Node*, std::string> attr_why_;
  AliasDb db_;
  std::unordered_map<Node*, ValueSet> touched_;
};

}  // namespace

std::vector<Value*> outer_inputs(Node* n) {
  Block* top = n->owningBlock();
  std::vector<Value*> out;
  std::unordered_set<Value*> seen;
  auto add = [&](Value* v) {
    Node* def = v->node();
    bool outer = def->owningBlock() == top || def == top->param_node() ||
                 (def->kind() == prim::Param && def->owningBlock() == nullptr && top == n->owningGraph()->block());
    if (outer && seen.insert(v).second) out.push_back(v);
  };
  for (Value* v : n->inputs()) add(v);
  std::vector<Block*> blocks(n->blocks().begin(), n->blocks().end());
  while (!blocks.empty()) {
    Block* b = blocks.back();
    blocks.pop_back();
    for (Node* m : b->nodes()) {
      for (Value* v : m->inputs()) add(v);
      for (Block* inner : m->blocks()) blocks.push_back(inner);
    }
    for (Value* v : b->outputs()) add(v);
  }
  return out;
}

int count_nodes(Block* block) {
  int count = 0;
  for (Node* n : block->nodes()) {
    if (n->kind() != prim::Constant) count += 1;
    for (Block* b : n->blocks()) count += count_nodes(b);
  }
  return count;
}

Expected<Analysis> analyse_method(const torch::jit::Module& model, const std::string& method) {
  auto found = model.find_method(method);
  if (!found) {
    std::string names;
    for (const auto& m : model.get_methods()) names += (names.empty() ? "" : ", ") + m.name();
    return Status::error("has no method '" + method + "' (methods: " + names + ")");
  }
  auto* fn = torch::jit::tryToGraphFunction(found->function());
  if (fn == nullptr) return Status::error("method '" + method + "' is not a TorchScript graph");
  Analysis a;
  a.graph = fn->graph()->copy();
  while (inline_calls(a.graph->block())) {
  }
  resolve_attributes(*a.graph, model, /*freeze=*/true);
  torch::jit::ConstantPropagation(a.graph);
  torch::jit::UnrollConstantLoops(a.graph);
  torch::jit::ConstantPropagation(a.graph);
  torch::jit::RemoveListMutation(a.graph);
  torch::jit::RemoveTensorMutation(a.graph);
  torch::jit::ConstantPropagation(a.graph);
  torch::jit::EliminateDeadCode(a.graph);
  auto why = resolve_attributes(*a.graph, model, /*freeze=*/false);
  a.nodes_total = count_nodes(a.graph->block());
  Classifier(&a, std::move(why)).run();
  return a;
}

}  // namespace goldminer::split
