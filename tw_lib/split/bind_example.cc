// The split's first step (split_steps.h): the example bound to the
// transform and the model, checked against their schemas, and run through
// the transform to get the model's inputs.
#include <torch/csrc/jit/passes/inliner.h>

#include <algorithm>

#include "tw_lib/split/split_steps.h"

namespace goldminer::split {
namespace {

// The schema's arguments, self excluded, as the worker program's arguments.
void take_arguments(const c10::FunctionSchema& schema, BoundExample* b) {
  for (size_t i = 1; i < schema.arguments().size(); ++i) {
    b->worker_types.push_back(schema.arguments()[i].type());
    b->worker_names.push_back(schema.arguments()[i].name());
  }
}

// Binds the example to `transform.forward`, whose output must fill the
// model's `model_args` arguments; counts the transform's nodes.
Status bind_to_transform(const torch::jit::Module& transform, const std::vector<IValue>& example,
                         const std::string& method, size_t model_args, BoundExample* b) {
  auto fwd = transform.find_method("forward");
  if (!fwd) return Status::error("transform has no method 'forward'");
  const auto& ts = fwd->function().getSchema();
  auto bound = bind_arguments(ts, example, "transform.forward", "the example");
  if (!bound.ok()) return bound.status();
  b->example = std::move(*bound);
  take_arguments(ts, b);
  auto ret = ts.returns().at(0).type()->cast<c10::TupleType>();
  if (model_args > 1) {
    if (!ret || ret->elements().size() != model_args)
      return Status::error("transform.forward returns " + ts.returns().at(0).type()->repr_str() + " but model." +
                           method + " takes " + std::to_string(model_args) + " arguments");
    b->programs.unpack = true;
  }
  b->programs.transform = transform;
  if (auto* gf = torch::jit::tryToGraphFunction(fwd->function())) {
    auto g = gf->graph()->copy();
    torch::jit::Inline(*g);
    b->transform_nodes = count_nodes(g->block());
  }
  return Status();
}

}  // namespace

Expected<BoundExample> bind_example(const torch::jit::Module& model, const std::vector<IValue>& example,
                                    const torch::jit::Module* transform, const std::string& method) {
  BoundExample b{Programs{model, std::nullopt, false}, nullptr, {}, {}, {}, {}, 0, 1};
  const auto& model_schema = model.get_method(method).function().getSchema();
  b.model_schema = &model_schema;
  const std::string model_what = "model." + method;
  if (transform != nullptr) {
    if (Status s = bind_to_transform(*transform, example, method, model_schema.arguments().size() - 1, &b); !s.ok())
      return s;
  } else {
    auto bound = bind_arguments(model_schema, example, model_what, "the example");
    if (!bound.ok()) return bound.status();
    b.example = std::move(*bound);
    take_arguments(model_schema, &b);
  }
  try {
    torch::NoGradGuard no_grad;
    RngGuard rng;
    b.model_inputs = model_inputs(b.programs, clone_all(b.example));
  } catch (const std::exception& e) {
    return Status::error("the example does not run through transform.forward: " + torch_error_text(e));
  }
  if (transform != nullptr) {
    auto bound = bind_arguments(model_schema, b.model_inputs, model_what, "the transform's output");
    if (!bound.ok()) return bound.status();
    b.model_inputs = std::move(*bound);
  }
  b.batch = std::max<int64_t>(1, first_batch_dim(c10::ivalue::Tuple::create(b.model_inputs)));
  return b;
}

}  // namespace goldminer::split
