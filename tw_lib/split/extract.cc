// Worker and trainer programs from a classified graph (graph_split.h).
//
// Both are fresh modules with one `forward`. The worker holds the transform
// (as submodule "transform") and no model state; its graph is built by
// cloning the moved nodes. The trainer holds the model as submodule "model"
// (the same object: parameters and buffers are shared, not copied); its
// graph is the analysed graph itself, edited in place: the cut becomes its
// inputs, the moved nodes are removed and the model's `self` is replaced by
// `self.model`. Editing costs O(moved + cut) where cloning cost O(graph)
// (~2 ms on ResNet-50, plus ~3 ms of dead-code elimination, which the edit
// does not need: see extract_programs).
#include <torch/csrc/jit/passes/dead_code_elimination.h>

#include <algorithm>
#include <functional>
#include <unordered_set>

#include "tw_lib/split/graph_split.h"

namespace goldminer::split {
namespace {

namespace prim = c10::prim;
namespace attr = c10::attr;

// Clones nodes into `g`, mapping values through `env`; shared producers of
// unmapped values are cloned on demand (constants are never cut).
class Cloner {
 public:
  Cloner(const Analysis& a, Graph* g) : a_(a), g_(g) {
    map_ = [this](Value* v) -> Value* {
      auto it = env_.find(v);
      if (it != env_.end()) return it->second;
      Node* def = v->node();
      auto cls = a_.cls.find(def);
      TORCH_CHECK(cls != a_.cls.end() && cls->second == NodeClass::kShared,
                  "goldminer: split: value %", v->debugName(), " crosses the cut but is not in it");
      clone(def);
      return env_.at(v);
    };
  }
  void bind(Value* from, Value* to) { env_[from] = to; }
  void clone(Node* n) {
    Node* copy = g_->insertNode(g_->createClone(n, map_));
    for (size_t i = 0; i < n->outputs().size(); ++i) env_[n->outputs()[i]] = copy->outputs()[i];
  }
  Value* map(Value* v) { return map_(v); }

 private:
  const Analysis& a_;
  Graph* g_;
  std::unordered_map<Value*, Value*> env_;
  std::function<Value*(Value*)> map_;
};

torch::jit::Module new_module(const std::string& name, bool training) {
  auto cu = std::make_shared<torch::jit::CompilationUnit>();
  torch::jit::Module m(c10::QualifiedName("__torch__.goldminer." + name), cu, /*shouldMangle=*/true);
  m.register_attribute("training", c10::BoolType::get(), training);
  return m;
}

void add_forward(torch::jit::Module& m, const std::shared_ptr<Graph>& g) {
  auto* fn = m._ivalue()->compilation_unit()->create_function(
      c10::QualifiedName(*m.type()->name(), "forward"), g);
  m.type()->addMethod(fn);
}

// A name TorchScript's printer accepts for a graph input.
std::string input_name(Value* v, size_t index) {
  std::string name = v->hasDebugName() ? v->debugName() : "";
  auto dot = name.find('.');
  if (dot != std::string::npos) name.resize(dot);
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) name = "cut";
  return name + "_" + std::to_string(index);
}

}  // namespace

std::vector<Value*> cut_values(const Analysis& a, const std::vector<Node*>& moved) {
  const std::unordered_set<Node*> on_worker(moved.begin(), moved.end());
  Value* self = a.graph->inputs()[0];
  std::unordered_map<Node*, size_t> position;
  for (size_t i = 0; i < a.nodes.size(); ++i) position[a.nodes[i]] = i + 1;
  auto worker_side = [&](Value* v) {
    if (v == self) return false;
    if (v->node() == a.graph->param_node()) return true;
    return on_worker.count(v->node()) > 0;
  };
  // Worker-side values that a trainer-side node reads or the model returns.
  std::vector<Value*> cut;
  std::unordered_set<Value*> in_cut;
  auto add_cut = [&](Value* v) {
    if (worker_side(v) && in_cut.insert(v).second) cut.push_back(v);
  };
  for (Node* n : a.nodes)
    if (!on_worker.count(n) && a.cls.at(n) != NodeClass::kShared)
      for (Value* v : outer_inputs(n)) add_cut(v);
  for (Value* v : a.graph->outputs()) add_cut(v);
  auto order = [&](Value* v) {
    return v->node() == a.graph->param_node() ? v->offset() : 1000000 + position[v->node()] * 64 + v->offset();
  };
  std::stable_sort(cut.begin(), cut.end(), [&](Value* x, Value* y) { return order(x) < order(y); });
  return cut;
}

Expected<Extraction> extract_programs(Analysis* analysis, const std::vector<Node*>& moved,
                                      const std::vector<Value*>& cut, const torch::jit::Module& model,
                                      const TransformCall& transform,
                                      const std::vector<c10::TypePtr>& worker_input_types,
                                      const std::vector<std::string>& worker_input_names) {
  Analysis& a = *analysis;
  const std::unordered_set<Node*> on_worker(moved.begin(), moved.end());
  Extraction out{new_module("SplitWorker", model.is_training()), new_module("SplitTrainer", model.is_training())};
  try {
    // Worker: (self, *inputs) -> transform -> moved nodes -> tuple(cut).
    torch::jit::Module& worker = out.worker;
    if (transform.module != nullptr) worker.register_module("transform", *transform.module);
    auto wg = std::make_shared<Graph>();
    Value* wself = wg->addInput("self")->setType(worker.type());
    std::vector<Value*> xs;
    for (size_t i = 0; i < worker_input_types.size(); ++i)
      xs.push_back(wg->addInput(worker_input_names[i])->setType(worker_input_types[i]));
    std::vector<Value*> model_in = xs;
    if (transform.module != nullptr) {
      Value* tm = wg->insertGetAttr(wself, "transform");
      std::vector<Value*> args = {tm};
      args.insert(args.end(), xs.begin(), xs.end());
      Node* call = wg->insertNode(wg->create(prim::CallMethod, args, 1));
      call->s_(attr::name, "forward");
      const auto& schema = transform.module->get_method("forward").function().getSchema();
      call->output()->setType(schema.returns().at(0).type());
      if (transform.unpack) {
        Node* unpack = wg->insertNode(wg->createTupleUnpack(call->output()));
        model_in.assign(unpack->outputs().begin(), unpack->outputs().end());
      } else {
        model_in = {call->output()};
      }
    }
    TORCH_CHECK(model_in.size() + 1 == a.graph->inputs().size(), "goldminer: split: argument count");
    Cloner wc(a, wg.get());
    for (size_t i = 0; i < model_in.size(); ++i) wc.bind(a.graph->inputs()[i + 1], model_in[i]);
    for (Node* n : a.nodes)
      if (on_worker.count(n)) wc.clone(n);
    std::vector<Value*> cut_out;
    for (Value* v : cut) cut_out.push_back(wc.map(v));
    wg->registerOutput(wg->insertNode(wg->createTuple(cut_out))->output());
    torch::jit::EliminateDeadCode(wg);
    add_forward(worker, wg);

    // Trainer: (self, *cut) -> self.model -> the other nodes -> outputs,
    // by editing the analysed graph. No dead-code elimination is needed:
    // the analysed graph has none left (analyse_method ends with it), and
    // removing the moved nodes leaves none either, except shared nodes that
    // only moved nodes used, removed here. A trainer-side node that a moved
    // node reads would have to move with it (the cut is closed under
    // producers), and memory order between the sides is kept by the
    // classification (a.order and the stateful conflicts). Destroying a
    // node or input that still has uses throws, so a violation fails loudly.
    torch::jit::Module& trainer = out.trainer;
    trainer.register_module("model", model);
    a.alias_db.reset();  // describes the graph before the edit
    std::shared_ptr<Graph> tg = std::move(a.graph);
    const size_t old_inputs = tg->inputs().size();  // the model's self and arguments
    for (size_t i = 0; i < cut.size(); ++i) {
      c10::TypePtr type = cut[i]->type();
      if (type->kind() == c10::TypeKind::TensorType) type = c10::TensorType::get();
      cut[i]->replaceAllUsesWith(tg->addInput(input_name(cut[i], i))->setType(type));
    }
    for (auto it = a.nodes.rbegin(); it != a.nodes.rend(); ++it) {
      Node* n = *it;
      const bool unused = std::none_of(n->outputs().begin(), n->outputs().end(), [](Value* v) { return v->hasUses(); });
      if (on_worker.count(n) || (unused && a.cls.at(n) == NodeClass::kShared)) n->destroy();
    }
    Value* tself = tg->insertInput(0)->setType(trainer.type());
    Value* model_self = tg->inputs()[1];
    if (model_self->hasUses()) {
      torch::jit::WithInsertPoint guard(tg->block()->nodes().front());
      model_self->replaceAllUsesWith(tg->insertGetAttr(tself, "model"));
    }
    for (size_t i = old_inputs; i >= 1; --i) tg->eraseInput(i);
    tself->setDebugName("self");
    add_forward(trainer, tg);
  } catch (const std::exception& e) {
    return Status::error("cannot build the split programs: " + torch_error_text(e));
  }
  return out;
}

}  // namespace goldminer::split
