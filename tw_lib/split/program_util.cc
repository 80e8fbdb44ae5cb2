#include "tw_lib/split/program_util.h"

#include <sstream>

#include "tw_lib/split/graph_split.h"

namespace goldminer::split {

// Python's torch.load gives Dict[Any, Any] and List[Any]: give containers
// the static types the schema asks for.
namespace {

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

}  // namespace

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

std::vector<IValue> clone_all(const std::vector<IValue>& v) {
  std::vector<IValue> out;
  for (const auto& e : v) out.push_back(split::deep_clone(e));
  return out;
}


// The model's inputs for the transform's output.
std::vector<IValue> model_inputs(const Programs& p, const std::vector<IValue>& x) {
  if (!p.transform) return x;
  IValue out = p.transform->get_method("forward")(x);
  return p.unpack ? out.toTupleRef().elements().vec() : std::vector<IValue>{out};
}

}  // namespace goldminer::split
