// Graph preparation and node classification (split.h, graph_split.h).
//
// Preparation (shared/docs/torchscript-split.md): inline every call, freeze
// plain attributes, then ConstantPropagation, UnrollConstantLoops,
// RemoveListMutation, RemoveTensorMutation, EliminateDeadCode. Without
// constant propagation F.normalize stays on the trainer; without loop
// unrolling, list-append loops do. The passes preserve semantics, so the
// trainer runs this graph.
//
// Cost: each torch pass builds its own alias analysis and walks the whole
// graph, and dead-code elimination (which constant propagation runs after
// every change) does both again: most of the analysis time is proportional
// to the size of the graph handed to the passes, times the number of passes.
// So the inliner below hands them a smaller graph (constants are not
// cloned once per use: ~2,300 instead of ~3,500 nodes on ResNet-50), passes
// that would only repeat work are skipped, and the alias analysis of the
// classification is kept for the probe.
#include <torch/csrc/jit/ir/alias_analysis.h>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/node_hashing.h>
#include <torch/csrc/jit/passes/constant_propagation.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/csrc/jit/passes/loop_unrolling.h>
#include <torch/csrc/jit/passes/remove_mutation.h>

#include <algorithm>
#include <optional>
#include <set>
#include <unordered_set>

#include "tw_lib/split/graph_split.h"

namespace goldminer::split {
namespace {

using torch::jit::AliasDb;
using torch::jit::ValueSet;
using Object = c10::intrusive_ptr<c10::ivalue::Object>;
namespace prim = c10::prim;
namespace attr = c10::attr;

// The graph function that call node `n` runs; null when `n` is not a call
// or its callee is not a graph (such a call stays, on the trainer).
torch::jit::GraphFunction* callee_of(Node* n) {
  if (n->kind() != prim::CallFunction && n->kind() != prim::CallMethod) return nullptr;
  return torch::jit::tryToGraphFunction(n);
}

// Names of the attributes that `block`, or a graph it calls, sets.
void collect_set_attributes(Block* block, std::unordered_set<Graph*>* seen, std::set<std::string>* names) {
  for (Node* n : block->nodes()) {
    if (n->kind() == prim::SetAttr) names->insert(n->s(attr::name));
    if (auto* callee = callee_of(n))
      if (seen->insert(callee->graph().get()).second) collect_set_attributes(callee->graph()->block(), seen, names);
    for (Block* b : n->blocks()) collect_set_attributes(b, seen, names);
  }
}

// Values of these types cannot be mutated: one constant serves every use.
bool immutable(const c10::TypePtr& type) {
  switch (type->kind()) {
    case c10::TypeKind::IntType:
    case c10::TypeKind::FloatType:
    case c10::TypeKind::BoolType:
    case c10::TypeKind::StringType:
    case c10::TypeKind::NoneType:
    case c10::TypeKind::DeviceObjType:
      return true;
    case c10::TypeKind::TupleType:
    case c10::TypeKind::OptionalType:
      for (const auto& t : type->containedTypes())
        if (!immutable(t)) return false;
      return true;
    default:
      return false;
  }
}

// The inlined copy of a method graph, built in one pass over the method
// and its callees' own graphs (not torch's Inline, which compiles every
// callee's optimized graph, ~110 ms on a freshly loaded ResNet-50, and
// records an inlined call stack per node). While copying it
//  - freezes reads of plain attributes (ints, floats, bools, strings, lists
//    and tuples of them) that the program never sets to constants, so the
//    worker needs no module state;
//  - materialises each constant when first used, at the top of the graph
//    (where a constant is defined does not change what it is), once per
//    value for immutable types.
// Cloning every callee node (and freezing afterwards) gave the passes
// ~3,500 nodes on ResNet-50, a third of them copies of the same constants.
// Thread-compatible; one use.
class Inliner {
 public:
  Inliner(const torch::jit::Module& model, Graph& method)
      : method_(method), model_(model._ivalue()), graph_(std::make_shared<Graph>()) {
    std::unordered_set<Graph*> seen = {&method};
    collect_set_attributes(method.block(), &seen, &set_names_);
  }

  std::shared_ptr<Graph> run() {
    Env env;
    for (Value* v : method_.inputs()) env[v] = graph_->addInput()->copyMetadata(v);
    modules_[graph_->inputs()[0]] = model_;
    copy_block(method_.block(), graph_->block(), &env);
    for (Value* v : method_.outputs()) graph_->registerOutput(map(&env, v));
    return graph_;
  }

 private:
  // Values of the graph being copied (the method's or a callee's) -> ours.
  using Env = std::unordered_map<Value*, Value*>;

  Value* map(Env* env, Value* v) {
    auto it = env->find(v);
    if (it != env->end()) return it->second;
    TORCH_CHECK(v->node()->kind() == prim::Constant, "goldminer: split: %", v->debugName(), " used before defined");
    Value* copy = constant(v->node());
    env->emplace(v, copy);
    return copy;
  }

  Value* constant(Node* n) {
    const bool pooled = immutable(n->output()->type());
    if (pooled) {
      auto it = pool_.find(n);  // by kind, type and value
      if (it != pool_.end()) return (*it)->output();
    }
    Node* copy = graph_->createClone(n, [](Value* v) { return v; });  // a constant has no inputs
    graph_->block()->prependNode(copy);
    if (pooled) pool_.insert(copy);
    return copy->output();
  }

  // The constant for a frozen attribute value; null if it has none.
  Value* frozen(const c10::IValue& value) {
    torch::jit::WithInsertPoint guard(graph_->block()->nodes().front());
    auto inserted = torch::jit::tryInsertConstant(*graph_, value);
    if (!inserted) return nullptr;
    Node* n = (*inserted)->node();
    if (!immutable(n->output()->type())) return n->output();
    auto [it, added] = pool_.insert(n);
    if (added) return n->output();
    n->destroy();
    return (*it)->output();
  }

  // The value of attribute `name` of `object` when `object` is a known
  // module with that slot; `plain` says whether it may be frozen.
  std::optional<c10::IValue> read(Value* object, const std::string& name, bool* plain) {
    auto it = modules_.find(object);
    if (it == modules_.end()) return std::nullopt;
    const auto& type = it->second->type();
    auto slot = type->findAttributeSlot(name);
    if (!slot) return std::nullopt;
    c10::IValue value = it->second->getSlot(*slot);
    *plain = !value.isObject() && name != "training" && !type->is_parameter(*slot) && !type->is_buffer(*slot) &&
             !value.isTensor() && set_names_.count(name) == 0;
    return value;
  }

  // Appends copies of the nodes of `from` to `to`, calls replaced by their
  // callees' nodes.
  void copy_block(Block* from, Block* to, Env* env) {
    for (Node* n : from->nodes()) {
      if (n->kind() == prim::Constant) continue;  // materialised where used
      if (auto* callee = callee_of(n)) {
        Graph& body = *callee->graph();
        Env callee_env;
        const size_t first = n->kind() == prim::CallFunction ? 1 : 0;  // CallFunction's input 0 is the function
        for (size_t i = first; i < n->inputs().size(); ++i) callee_env[body.inputs()[i - first]] = map(env, n->input(i));
        copy_block(body.block(), to, &callee_env);
        for (size_t i = 0; i < n->outputs().size(); ++i) (*env)[n->output(i)] = map(&callee_env, body.outputs()[i]);
        continue;
      }
      std::optional<c10::IValue> attribute;
      if (n->kind() == prim::GetAttr) {
        bool plain = false;
        attribute = read(map(env, n->input()), n->s(attr::name), &plain);
        if (attribute && plain)
          if (Value* c = frozen(*attribute)) {
            (*env)[n->output()] = c;
            continue;
          }
      }
      Node* copy = graph_->createClone(n, [&](Value* v) { return map(env, v); }, /*copy_blocks=*/false);
      to->appendNode(copy);
      for (size_t i = 0; i < n->outputs().size(); ++i) (*env)[n->output(i)] = copy->output(i);
      if (attribute && attribute->isObject()) modules_[copy->output()] = attribute->toObject();
      for (Block* b : n->blocks()) {
        Block* copied = copy->addBlock();
        for (Value* v : b->inputs()) (*env)[v] = copied->addInput()->copyMetadata(v);
        copy_block(b, copied, env);
        for (Value* v : b->outputs()) copied->registerOutput(map(env, v));
      }
    }
  }

  Graph& method_;
  Object model_;
  std::shared_ptr<Graph> graph_;
  std::set<std::string> set_names_;
  std::unordered_map<Value*, Object> modules_;  // our module-typed values
  std::unordered_set<Node*, torch::jit::HashNode, torch::jit::EqualNode> pool_;
};

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

std::string kind_of(Node* n) { return n->kind().toQualString(); }

// Why nodes are stateful, as "<node>: <why>" texts. A node's reason is the
// first that applies of: stateful by itself (intrinsic), uses the module
// object, reads a stateful node's value (that node's reason), conflicts in
// memory. Texts are built when asked for: only the trainer-side nodes at
// the boundary are reported, and a text (an attribute path, say) costs
// more than classifying. Reads the graph: valid while the graph is.
class Reasons {
 public:
  Reasons(Object model, Graph* graph) : model_(std::move(model)), graph_(graph) {}

  // Why `n` (or a node in its blocks) must run on the trainer by itself.
  std::optional<std::string> intrinsic(Node* n) {
    if (n->kind() == prim::GetAttr) return attribute(n);
    if (n->kind() == prim::SetAttr) return kind_of(n) + " " + n->s(attr::name) + ": side effect (sets module state)";
    if (n->kind() == prim::CallMethod || n->kind() == prim::CallFunction)
      return kind_of(n) + ": call that cannot be inlined";
    // torch.jit.fork: a task on the inter-op pool, awaited by aten::wait.
    if (n->kind() == prim::fork) return kind_of(n) + ": asynchronous call (torch.jit.fork)";
    if (nondeterministic(n)) return kind_of(n) + ": nondeterministic in the model";
    // An exception aborts the batch on either side: raising on the worker
    // is the same program behaviour, so checks may move.
    if (n->kind() != prim::RaiseException && n->hasSideEffects()) return kind_of(n) + ": side effect";
    for (Block* b : n->blocks())
      for (Node* inner : b->nodes())
        if (auto why = intrinsic(inner)) return *why + " (inside " + kind_of(n) + ")";
    return std::nullopt;
  }

  // Reasons found while classifying, before asking whether `n` is
  // intrinsically stateful (which then, when it is, takes precedence).
  void reads_stateful(Node* n, Node* producer) { causes_[n] = {producer, false, {}}; }
  void uses_module(Node* n) { causes_[n] = {nullptr, true, {}}; }
  void set(Node* n, std::string text) { causes_[n] = {nullptr, false, std::move(text)}; }

  std::string why(Node* n) {
    std::vector<Node*> chain;
    std::string text;
    for (;;) {
      auto done = texts_.find(n);
      if (done != texts_.end()) {
        text = done->second;
        break;
      }
      chain.push_back(n);
      const Cause& cause = causes_.at(n);
      if (!cause.text.empty()) {
        text = cause.text;
        break;
      }
      if (auto own = intrinsic(n)) {
        text = *own;
        break;
      }
      if (cause.module) {
        text = kind_of(n) + ": uses the module object";
        break;
      }
      n = cause.producer;
    }
    for (Node* m : chain) texts_[m] = text;
    return text;
  }

 private:
  struct Cause {
    Node* producer = nullptr;  // reads this stateful node's value
    bool module = false;       // uses the module object
    std::string text;          // decided when classified
  };
  struct ModuleRef {
    Object object;
    std::string path;
  };

  // The module a module-typed value refers to: the model or a chain of
  // attribute reads from it.
  std::optional<ModuleRef> module_of(Value* v) {
    if (v == graph_->inputs()[0]) return ModuleRef{model_, ""};
    Node* n = v->node();
    if (n->kind() != prim::GetAttr) return std::nullopt;
    auto ref = module_of(n->input());
    if (!ref) return std::nullopt;
    const std::string& name = n->s(attr::name);
    auto slot = ref->object->type()->findAttributeSlot(name);
    if (!slot) return std::nullopt;
    c10::IValue value = ref->object->getSlot(*slot);
    if (!value.isObject()) return std::nullopt;
    return ModuleRef{value.toObject(), ref->path.empty() ? name : ref->path + "." + name};
  }

  // A GetAttr left by the inliner (not frozen): what it reads.
  std::string attribute(Node* n) {
    const std::string name = n->s(attr::name);
    auto ref = module_of(n->input());
    if (!ref) return "prim::GetAttr " + name + ": attribute of a module value";
    const std::string head = "prim::GetAttr " + (ref->path.empty() ? name : ref->path + "." + name) + ": ";
    auto type = ref->object->type();
    auto slot = type->findAttributeSlot(name);
    if (!slot) return head + "unknown attribute";
    c10::IValue value = ref->object->getSlot(*slot);
    if (value.isObject()) return head + "submodule";
    if (name == "training") return head + "training flag (module mode)";
    if (type->is_parameter(*slot)) return head + "parameter";
    if (type->is_buffer(*slot)) return head + "buffer";
    if (value.isTensor()) return head + "tensor attribute (module state)";
    if (set_names().count(name)) return head + "attribute set by the program";
    return head + "module attribute";
  }

  const std::set<std::string>& set_names() {
    if (!set_names_) {
      set_names_.emplace();
      std::unordered_set<Graph*> seen;
      collect_set_attributes(graph_->block(), &seen, &*set_names_);
    }
    return *set_names_;
  }

  Object model_;
  Graph* graph_;
  std::unordered_map<Node*, Cause> causes_;
  std::unordered_map<Node*, std::string> texts_;
  std::optional<std::set<std::string>> set_names_;
};

class Classifier {
 public:
  Classifier(Analysis* a, Reasons* reasons)
      : a_(*a), reasons_(*reasons), db_(*(a->alias_db = std::make_unique<AliasDb>(a->graph))) {}

  void run() {
    Value* self = a_.graph->inputs()[0];
    std::vector<Node*> stateful_writers, stateful, stateless, stateless_writers;
    for (Node* n : a_.graph->nodes()) {
      a_.nodes.push_back(n);
      std::vector<Value*> reads = outer_inputs(n);
      ValueSet touched(reads.begin(), reads.end());
      const bool writes = db_.writesToAlias(n, touched);
      for (Value* o : n->outputs()) touched.insert(o);
      if (is_stateful(n, reads, touched, writes, self, stateful_writers, stateful)) {
        a_.cls[n] = NodeClass::kStateful;
        stateful.push_back(n);
        if (writes) stateful_writers.push_back(n);
        touched_.emplace(n, std::move(touched));
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
          if (db_.writesToAlias(n, touched_.at(m))) a_.order.emplace_back(n, m);
      stateless.push_back(n);
      if (writes) stateless_writers.push_back(n);
      touched_.emplace(n, std::move(touched));
    }
  }

 private:
  // Records the reason when `n` is stateful. Dependence is checked first
  // (cheap, and what most trainer-side nodes have); the reason text still
  // puts an intrinsic cause first (Reasons::why).
  bool is_stateful(Node* n, const std::vector<Value*>& reads, const ValueSet& touched, bool writes, Value* self,
                   const std::vector<Node*>& stateful_writers, const std::vector<Node*>& stateful) {
    for (Value* v : reads) {
      if (v == self) {
        reasons_.uses_module(n);
        return true;
      }
      auto producer = a_.cls.find(v->node());
      if (producer != a_.cls.end() && producer->second == NodeClass::kStateful) {
        reasons_.reads_stateful(n, v->node());
        return true;
      }
    }
    if (auto why = reasons_.intrinsic(n)) {
      reasons_.set(n, *why);
      return true;
    }
    for (Node* w : stateful_writers)
      if (db_.writesToAlias(w, touched)) {
        reasons_.set(n, kind_of(n) + ": reads memory that trainer-side " + kind_of(w) + " writes");
        return true;
      }
    if (writes)
      for (Node* s : stateful)
        if (db_.writesToAlias(n, touched_.at(s))) {
          reasons_.set(n, kind_of(n) + ": writes memory that trainer-side " + kind_of(s) + " reads");
          return true;
        }
    return false;
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
  Reasons& reasons_;
  const AliasDb& db_;
  std::unordered_map<Node*, ValueSet> touched_;  // reads and outputs of classified nodes
};

}  // namespace

std::vector<Value*> outer_inputs(Node* n) {
  std::vector<Value*> out;
  if (n->blocks().empty() && n->owningBlock() == n->owningGraph()->block()) {  // most nodes: no hash set
    for (Value* v : n->inputs())
      if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
    return out;
  }
  Block* top = n->owningBlock();
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
  a.graph = Inliner(model, *fn->graph()).run();
  // Each pass says whether it changed the graph, and ConstantPropagation
  // ends with EliminateDeadCode when it did. Two runs that would only
  // repeat work are skipped: constant propagation after unrolling when
  // nothing was unrolled, and the final dead-code elimination when the
  // graph has not changed since the last one. The last constant
  // propagation always runs: one round does not fold all it could (its
  // alias analysis goes stale as it folds; what is left even varies from
  // run to run), and the last round folds what the first left, as the
  // skipped one did.
  bool dead_code = true;  // calls whose results are unused, say
  if (torch::jit::ConstantPropagation(a.graph)) dead_code = false;
  if (torch::jit::UnrollConstantLoops(a.graph)) dead_code = !torch::jit::ConstantPropagation(a.graph);
  if (torch::jit::RemoveListMutation(a.graph)) dead_code = true;
  if (torch::jit::RemoveTensorMutation(a.graph)) dead_code = true;
  if (torch::jit::ConstantPropagation(a.graph)) dead_code = false;
  if (dead_code) torch::jit::EliminateDeadCode(a.graph);
  a.nodes_total = count_nodes(a.graph->block());
  auto reasons = std::make_shared<Reasons>(model._ivalue(), a.graph.get());
  Classifier(&a, reasons.get()).run();
  a.why = [reasons](Node* n) { return reasons->why(n); };
  return a;
}

}  // namespace goldminer::split
