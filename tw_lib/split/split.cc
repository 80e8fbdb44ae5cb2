// Orchestration of the split (split.h): loading, argument binding, cut
// choice, measurement and verification. Torch exceptions stop here.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <sstream>

#include <torch/csrc/jit/passes/inliner.h>

#include "goldminer/split.h"
#include "tw_lib/split/cut.h"
#include "tw_lib/split/graph_split.h"

namespace goldminer {
namespace {

using c10::IValue;
using split::Analysis;
using split::NodeClass;
using split::Node;
using split::Value;
using Clock = std::chrono::steady_clock;

double since_ms(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double cpu_ms() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

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

// Python's torch.load gives Dict[Any, Any] and List[Any]: give containers
// the static types the schema asks for.
IValue retype(const IValue& v, const c10::TypePtr& t) {
  if (auto dt = t->cast<c10::DictType>()) {
    if (!v.isGenericDict()) return v;
    c10::impl::GenericDict d(dt->getKeyType(), dt->getValueType());
    for (const auto& e : v.toGenericDict())
      d.insert(retype(e.key(), dt->getKeyType()), retype(e.value(), dt->getValueType()));
    return d;
  }
  if (auto lt = t->cast<c10::ListType>()) {
    if (!v.isList()) return v;
    c10::impl::GenericList l(lt->getElementType());
    for (const auto& e : v.toListRef()) l.push_back(retype(e, lt->getElementType()));
    return l;
  }
  if (auto tt = t->cast<c10::TupleType>()) {
    if (!v.isTuple() || v.toTupleRef().elements().size() != tt->elements().size()) return v;
    std::vector<IValue> elems;
    for (size_t i = 0; i < tt->elements().size(); ++i)
      elems.push_back(retype(v.toTupleRef().elements()[i], tt->elements()[i]));
    return c10::ivalue::Tuple::create(std::move(elems));
  }
  if (auto ot = t->cast<c10::OptionalType>()) return v.isNone() ? v : retype(v, ot->getElementType());
  return v;
}

// Checks values against a method's schema (self excluded), fills defaults.
Expected<std::vector<IValue>> bind_arguments(const c10::FunctionSchema& schema, std::vector<IValue> values,
                                             const std::string& what, const std::string& given) {
  std::vector<c10::Argument> args(schema.arguments().begin() + 1, schema.arguments().end());
  std::string names;
  for (const auto& a : args) names += (names.empty() ? "" : ", ") + a.name();
  if (values.size() > args.size())
    return Status::error(what + " takes " + std::to_string(args.size()) + " argument(s) (" + names + "), " +
                         given + " has " + std::to_string(values.size()));
  for (size_t i = values.size(); i < args.size(); ++i) {
    if (!args[i].default_value())
      return Status::error(what + " takes " + std::to_string(args.size()) + " argument(s) (" + names + "), " +
                           given + " has " + std::to_string(values.size()));
    values.push_back(*args[i].default_value());
  }
  for (size_t i = 0; i < args.size(); ++i) {
    values[i] = retype(values[i], args[i].type());
    if (!values[i].type()->isSubtypeOf(*args[i].type()))
      return Status::error(what + " argument '" + args[i].name() + "': expected " + args[i].type()->repr_str() +
                           ", " + given + " has " + values[i].type()->repr_str());
  }
  return values;
}

std::vector<IValue> elements(const IValue& v) {
  if (v.isTuple()) return v.toTupleRef().elements().vec();
  return {v};
}

int64_t first_batch_dim(const IValue& v) {
  if (v.isTensor()) return v.toTensor().dim() > 0 ? v.toTensor().size(0) : 0;
  std::vector<IValue> inner;
  if (v.isTuple()) inner = v.toTupleRef().elements().vec();
  if (v.isList()) inner = v.toListRef().vec();
  if (v.isGenericDict())
    for (const auto& e : v.toGenericDict()) inner.push_back(e.value());
  for (const auto& e : inner)
    if (int64_t b = first_batch_dim(e)) return b;
  return 0;
}

CutValue describe(const std::string& name, const IValue& v, int64_t batch) {
  CutValue c;
  c.name = name;
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    c.dtype = std::string(c10::toString(t.scalar_type()));
    std::transform(c.dtype.begin(), c.dtype.end(), c.dtype.begin(), ::tolower);
    static const std::pair<const char*, const char*> kNames[] = {
        {"float", "float32"}, {"double", "float64"}, {"long", "int64"}, {"int", "int32"},
        {"half", "float16"},  {"short", "int16"},    {"byte", "uint8"}, {"char", "int8"}};
    for (const auto& [from, to] : kNames)
      if (c.dtype == from) c.dtype = to;
    c.shape = t.sizes().vec();
  } else {
    c.dtype = v.type()->repr_str();
  }
  c.bytes_per_sample = std::max(0.0, split::value_bytes(v)) / std::max<int64_t>(batch, 1);
  return c;
}

// Why value `v` (of TorchScript type `type`, as on the example) may not
// cross the cut; "" if it may.
std::string why_not_shippable(const IValue& v, const c10::TypePtr& type, const SplitOptions& options) {
  if (split::value_bytes(v) < 0) return type->repr_str();
  if (options.tensors_only && !v.isTensor()) return type->repr_str() + ": goldminer-dw sends tensors only";
  return "";
}

// "prim::GetAttr embs.3.weight: parameter" -> "prim::GetAttr embs.*.weight: parameter".
std::string collapse_indices(const std::string& reason) {
  std::string out;
  for (size_t i = 0; i < reason.size(); ++i) {
    const bool after_dot = i > 0 && reason[i - 1] == '.';
    size_t j = i;
    while (j < reason.size() && std::isdigit(static_cast<unsigned char>(reason[j]))) ++j;
    if (after_dot && j > i && j < reason.size() && reason[j] == '.') {
      out += '*';
      i = j - 1;
    } else {
      out += reason[i];
    }
  }
  return out;
}

std::string value_name(Value* v) { return v->hasDebugName() ? v->debugName() : "%" + std::to_string(v->unique()); }

Expected<torch::jit::Module> load_module(const std::string& bytes, const std::string& name) {
  try {
    std::istringstream in(bytes);
    torch::jit::Module module = torch::jit::load(in);
    // A loaded module emits each method's graph from its source on first
    // use: do it here, as part of loading, so that analysis times analysis.
    for (const auto& m : module.modules())
      for (const auto& method : m.get_methods()) method.function().ensure_defined();
    return module;
  } catch (const std::exception& e) {
    return Status::error("cannot load " + name + " as TorchScript (torch.jit.save output): " +
                         split::torch_error_text(e));
  }
}

Expected<std::vector<IValue>> load_example(const std::string& bytes, const std::string& name) {
  try {
    IValue v = torch::jit::pickle_load(std::vector<char>(bytes.begin(), bytes.end()));
    return elements(v);
  } catch (const std::exception& e) {
    return Status::error("cannot load " + name + " as example inputs (torch.save(tuple_of_inputs, path)): " +
                         split::torch_error_text(e));
  }
}

std::string save_bytes(const torch::jit::Module& m) {
  std::ostringstream out;
  m.save(out);
  return out.str();
}

// Forward, plus backward of the sum of outputs when one requires grad.
double train_step_loss(const IValue& out) {
  std::vector<at::Tensor> ts;
  std::vector<IValue> todo = {out};
  while (!todo.empty()) {
    IValue v = todo.back();
    todo.pop_back();
    if (v.isTensor() && v.toTensor().defined() && v.toTensor().requires_grad()) ts.push_back(v.toTensor());
    if (v.isTuple())
      for (const auto& e : v.toTupleRef().elements()) todo.push_back(e);
    if (v.isList())
      for (const auto& e : v.toListRef()) todo.push_back(e);
    if (v.isGenericDict())
      for (const auto& e : v.toGenericDict()) todo.push_back(e.value());
  }
  if (ts.empty()) return 0;
  at::Tensor loss = ts[0].sum();
  for (size_t i = 1; i < ts.size(); ++i) loss = loss + ts[i].sum();
  loss.backward();
  return 1;
}

void zero_grads(const torch::jit::Module& m) {
  for (const auto& p : m.parameters())
    if (p.grad().defined()) const_cast<at::Tensor&>(p).mutable_grad().reset();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Median CPU ms of `step` over `repeat` runs after three warm-up runs (the
// profiling executor profiles, then optimises, then compiles the backward).
template <typename Prepare, typename Step>
double time_cpu(int repeat, Prepare prepare, Step step) {
  std::vector<double> ms;
  for (int i = 0; i < repeat + 3; ++i) {
    auto args = prepare();
    double start = cpu_ms();
    step(args);
    if (i >= 3) ms.push_back(cpu_ms() - start);
  }
  return median(ms);
}

std::vector<IValue> clone_all(const std::vector<IValue>& v) {
  std::vector<IValue> out;
  for (const auto& e : v) out.push_back(split::deep_clone(e));
  return out;
}

struct Programs {
  torch::jit::Module model;
  std::optional<torch::jit::Module> transform;
  bool unpack = false;
};

// The model's inputs for the transform's output.
std::vector<IValue> model_inputs(const Programs& p, const std::vector<IValue>& x) {
  if (!p.transform) return x;
  IValue out = p.transform->get_method("forward")(x);
  return p.unpack ? out.toTupleRef().elements().vec() : std::vector<IValue>{out};
}

void measure(const std::string& worker_bytes, const std::string& trainer_bytes, const std::string& method,
             const std::vector<IValue>& example, int repeat, SplitReport* r) {
  RngGuard rng;
  std::istringstream worker_in(worker_bytes), trainer_in(trainer_bytes);
  torch::jit::Module worker = torch::jit::load(worker_in);
  torch::jit::Module trainer = torch::jit::load(trainer_in);
  Programs p{trainer.attr("model").toModule(), std::nullopt, false};
  if (worker.hasattr("transform")) p.transform = worker.attr("transform").toModule();
  auto model_method = p.model.get_method(method);
  auto cut_of = [&](const std::vector<IValue>& x) {
    torch::NoGradGuard no_grad;
    return elements(worker.forward(x));
  };
  const std::vector<IValue> transformed = [&] {
    torch::NoGradGuard no_grad;
    return model_inputs(p, clone_all(example));
  }();
  if (p.transform) {
    std::vector<IValue> first = elements(p.transform->forward(clone_all(example)));
    p.unpack = first.size() + 1 == model_method.function().getSchema().arguments().size() && first.size() > 1;
  }
  auto prepare_x = [&] { return clone_all(example); };
  r->transform_ms = p.transform ? time_cpu(repeat, prepare_x, [&](std::vector<IValue>& x) {
    torch::NoGradGuard no_grad;
    p.transform->forward(x);
  }) : 0;
  r->trainer_ms_local = time_cpu(repeat, prepare_x, [&](std::vector<IValue>& x) {
    std::vector<IValue> in;
    {
      torch::NoGradGuard no_grad;
      in = model_inputs(p, x);
    }
    train_step_loss(model_method(in));
    zero_grads(p.model);
  });
  r->trainer_ms_dataset = time_cpu(repeat, [&] { return clone_all(transformed); }, [&](std::vector<IValue>& in) {
    train_step_loss(model_method(in));
    zero_grads(p.model);
  });
  const std::vector<IValue> cut = cut_of(clone_all(example));
  r->trainer_ms = time_cpu(repeat, [&] { return clone_all(cut); }, [&](std::vector<IValue>& in) {
    train_step_loss(trainer.forward(in));
    zero_grads(trainer);
  });
  r->worker_ms = time_cpu(repeat, prepare_x, [&](std::vector<IValue>& x) { cut_of(x); });
  r->trainer_ms_saved_per_batch = r->trainer_ms_local - r->trainer_ms;
  r->measured = true;
}

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

Expected<SplitProgram> split_module(const torch::jit::Module& model, const std::vector<c10::IValue>& example,
                                    const torch::jit::Module* transform, const SplitOptions& options) {
  try {
    SplitProgram result;
    SplitReport& r = result.report;
    r.mode = split_mode_name(options.mode);
    r.method = options.method;
    auto start = Clock::now();
    auto analysis = split::analyse_method(model, options.method);
    if (!analysis.ok()) return Status::error("model " + analysis.status().message());
    Analysis& a = *analysis;
    r.analysis_ms = since_ms(start);
    start = Clock::now();

    // Bind the example to the transform, and its output to the model.
    const auto& model_schema = model.get_method(options.method).function().getSchema();
    Programs p{model, std::nullopt, false};
    std::vector<IValue> x;
    std::vector<c10::TypePtr> worker_types;
    std::vector<std::string> worker_names;
    int transform_nodes = 0;
    const size_t model_args = model_schema.arguments().size() - 1;
    if (transform != nullptr) {
      auto fwd = transform->find_method("forward");
      if (!fwd) return Status::error("transform has no method 'forward'");
      const auto& ts = fwd->function().getSchema();
      auto bound = bind_arguments(ts, example, "transform.forward", "the example");
      if (!bound.ok()) return bound.status();
      x = *bound;
      for (size_t i = 1; i < ts.arguments().size(); ++i) {
        worker_types.push_back(ts.arguments()[i].type());
        worker_names.push_back(ts.arguments()[i].name());
      }
      auto ret = ts.returns().at(0).type()->cast<c10::TupleType>();
      if (model_args > 1) {
        if (!ret || ret->elements().size() != model_args)
          return Status::error("transform.forward returns " + ts.returns().at(0).type()->repr_str() + " but model." +
                               options.method + " takes " + std::to_string(model_args) + " arguments");
        p.unpack = true;
      }
      p.transform = *transform;
      if (auto* gf = torch::jit::tryToGraphFunction(fwd->function())) {
        auto g = gf->graph()->copy();
        torch::jit::Inline(*g);
        transform_nodes = split::count_nodes(g->block());
      }
    } else {
      auto bound = bind_arguments(model_schema, example, "model." + options.method, "the example");
      if (!bound.ok()) return bound.status();
      x = *bound;
      for (size_t i = 1; i < model_schema.arguments().size(); ++i) {
        worker_types.push_back(model_schema.arguments()[i].type());
        worker_names.push_back(model_schema.arguments()[i].name());
      }
    }
    std::vector<IValue> inputs;
    try {
      torch::NoGradGuard no_grad;
      RngGuard rng;
      inputs = model_inputs(p, clone_all(x));
    } catch (const std::exception& e) {
      return Status::error("the example does not run through transform.forward: " + split::torch_error_text(e));
    }
    if (transform != nullptr) {
      auto bound = bind_arguments(model_schema, inputs, "model." + options.method, "the transform's output");
      if (!bound.ok()) return bound.status();
      inputs = *bound;
    }

    auto probe = split::probe_stateless(a, inputs, /*time_nodes=*/true);
    if (!probe.ok()) return probe.status();

    // The cut problem over stateless top-level nodes.
    std::vector<Node*> stateless;
    std::unordered_map<Node*, int> index;
    for (Node* n : a.nodes)
      if (a.cls.at(n) == NodeClass::kStateless) {
        index[n] = static_cast<int>(stateless.size());
        stateless.push_back(n);
      }
    split::CutProblem problem;
    for (Node* n : stateless) problem.node_ms.push_back(probe->node_ms.at(n));
    std::unordered_map<Value*, int> value_index;
    std::vector<Value*> values(a.graph->inputs().begin() + 1, a.graph->inputs().end());
    for (Node* n : stateless)
      for (Value* o : n->outputs()) values.push_back(o);
    const int64_t batch = std::max<int64_t>(1, first_batch_dim(c10::ivalue::Tuple::create(inputs)));
    for (Value* v : values) {
      split::CutProblem::Value pv;
      bool input = v->node() == a.graph->param_node();
      pv.producer = input ? -1 : index.at(v->node());
      const IValue& example = probe->values.at(v);
      const bool shippable = why_not_shippable(example, v->type(), options).empty();
      pv.cost = !shippable ? (input ? 0 : split::kCannotCross)
                           : split::value_bytes(example) / (options.transfer_gbps * 1e6);
      value_index[v] = static_cast<int>(problem.values.size());
      problem.values.push_back(pv);
    }
    for (Node* n : a.nodes) {
      if (a.cls.at(n) == NodeClass::kShared) continue;
      for (Value* v : split::outer_inputs(n)) {
        auto it = value_index.find(v);
        if (it == value_index.end()) continue;
        auto& pv = problem.values[it->second];
        if (a.cls.at(n) == NodeClass::kStateless)
          pv.consumers.push_back(index.at(n));
        else
          pv.trainer_reads = true;
      }
    }
    for (Value* v : a.graph->outputs())
      if (value_index.count(v)) problem.values[value_index[v]].trainer_reads = true;
    for (const auto& [later, earlier] : a.order) problem.requires_moved.emplace_back(index.at(later), index.at(earlier));

    split::CutChoice choice;
    choice.moved.assign(stateless.size(), false);
    if (options.mode == SplitMode::kExtended) choice = split::choose_min_cost_cut(problem);
    if (options.mode == SplitMode::kMax) choice = split::choose_max_cut(problem);
    std::vector<Node*> moved;
    for (size_t i = 0; i < stateless.size(); ++i)
      if (choice.moved[i]) moved.push_back(stateless[i]);
    r.predicted_ms_saved_per_batch =
        split::cut_cost(problem, std::vector<bool>(stateless.size(), false)) - split::cut_cost(problem, choice.moved);

    const std::vector<Value*> cut = split::cut_values(a, moved);
    r.split_ms = since_ms(start);

    // Report (not timed), from the analysis before extraction consumes its graph.
    r.batch_size = batch;
    for (size_t i = 1; i < a.graph->inputs().size(); ++i) {
      Value* v = a.graph->inputs()[i];
      r.inputs.push_back(describe(model_schema.arguments()[i].name(), probe->values.at(v), batch));
      r.bytes_per_sample_before += r.inputs.back().bytes_per_sample;
    }
    for (Value* v : cut) {
      std::string name = value_name(v);
      if (v->node() == a.graph->param_node()) name = model_schema.arguments()[v->offset()].name();
      r.cut.push_back(describe(name, probe->values.at(v), batch));
      r.bytes_per_sample_after += r.cut.back().bytes_per_sample;
    }
    r.transfer_ms = r.bytes_per_sample_after * batch / (options.transfer_gbps * 1e6);
    r.nodes_total = transform_nodes + a.nodes_total;
    r.nodes_stateless = transform_nodes + a.nodes_stateless;
    r.nodes_moved = transform_nodes;
    for (Node* n : moved) {
      r.nodes_moved += 1;
      for (auto* b : n->blocks()) r.nodes_moved += split::count_nodes(b);
    }
    const std::unordered_set<Node*> on_worker(moved.begin(), moved.end());
    auto data_from_worker = [&](Value* v) {
      if (v == a.graph->inputs()[0]) return false;
      return v->node() == a.graph->param_node() || on_worker.count(v->node()) > 0 ||
             (a.cls.count(v->node()) && a.cls.at(v->node()) == NodeClass::kStateless);
    };
    // Why a stateless node's result may not cross the cut ("" if it may).
    auto cannot_ship = [&](Node* n) -> std::string {
      for (Value* o : n->outputs()) {
        auto it = probe->values.find(o);
        if (it == probe->values.end()) continue;
        if (std::string why = why_not_shippable(it->second, o->type(), options); !why.empty()) return why;
      }
      return "";
    };
    for (Node* n : a.nodes) {
      if (on_worker.count(n) || a.cls.at(n) == NodeClass::kShared) continue;
      auto reads = split::outer_inputs(n);
      if (std::none_of(reads.begin(), reads.end(), data_from_worker)) continue;
      KeptNode k;
      k.node = n->kind().toQualString();
      std::string unshippable;
      if (a.cls.at(n) == NodeClass::kStateful) {
        k.reason = a.why(n);
      } else if (options.mode == SplitMode::kDataset) {
        k.reason = "stateless: dataset mode moves only the transform";
      } else if (!(unshippable = cannot_ship(n)).empty()) {
        k.reason = "stateless: its result cannot be shipped (" + unshippable + ")";
      } else if (options.mode == SplitMode::kMax) {
        k.reason = "stateless: its result cannot be shipped (" + n->output(0)->type()->repr_str() + ")";
      } else {
        k.reason = "stateless: cheaper on the trainer than shipping what it needs";
      }
      // Repeated submodules (embs.0 .. embs.25) make one entry: embs.*.
      k.reason = collapse_indices(k.reason);
      auto same_entry = std::find_if(r.kept.begin(), r.kept.end(),
                                     [&](const KeptNode& e) { return e.node == k.node && e.reason == k.reason; });
      if (same_entry != r.kept.end())
        same_entry->count += 1;
      else
        r.kept.push_back(k);
    }
    start = Clock::now();
    auto extraction =
        split::extract_programs(&a, moved, cut, model, {transform, p.unpack}, worker_types, worker_names);
    if (!extraction.ok()) return extraction.status();
    r.split_ms += since_ms(start);
    result.worker = std::make_shared<torch::jit::Module>(extraction->worker);
    result.trainer = std::make_shared<torch::jit::Module>(extraction->trainer);
    if (options.measure) {
      try {
        measure(save_bytes(*result.worker), save_bytes(*result.trainer), options.method, x,
                std::max(1, options.repeat), &r);
      } catch (const std::exception& e) {
        return Status::error("the example does not run through the model: " + split::torch_error_text(e));
      }
    }
    return result;
  } catch (const std::exception& e) {
    return Status::error("split failed: " + split::torch_error_text(e));
  }
}

Expected<SerializedSplit> split_serialized(const SplitInputs& in, const SplitOptions& options) {
  try {
    auto model = load_module(in.model, in.model_name);
    if (!model.ok()) return model.status();
    std::optional<torch::jit::Module> transform;
    if (!in.transform.empty()) {
      auto t = load_module(in.transform, in.transform_name);
      if (!t.ok()) return t.status();
      transform = *t;
    }
    auto example = load_example(in.example, in.example_name);
    if (!example.ok()) return example.status();
    auto program = split_module(*model, *example, transform ? &*transform : nullptr, options);
    if (!program.ok()) return program.status();
    SerializedSplit out;
    out.worker = save_bytes(*program->worker);
    out.trainer = save_bytes(*program->trainer);
    out.report = program->report;
    return out;
  } catch (const std::exception& e) {
    return Status::error("split failed: " + split::torch_error_text(e));
  }
}

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
