// What the report says about a cut (split_steps.h, describe_cut): the
// values that cross it and the model's inputs, measured on the example;
// the node counts; and the trainer-side nodes at the boundary with why each
// stayed.
#include <algorithm>
#include <cctype>
#include <unordered_set>

#include "tw_lib/split/split_steps.h"

namespace goldminer::split {
namespace {

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
  c.bytes_per_sample = std::max(0.0, value_bytes(v)) / std::max<int64_t>(batch, 1);
  return c;
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

// The report's inputs and cut values, with their bytes per sample.
void describe_values(const Analysis& a, const Probe& probe, const std::vector<Value*>& cut, const BoundExample& bound,
                     SplitReport* r) {
  const c10::FunctionSchema& schema = *bound.model_schema;
  for (size_t i = 1; i < a.graph->inputs().size(); ++i) {
    Value* v = a.graph->inputs()[i];
    r->inputs.push_back(describe(schema.arguments()[i].name(), probe.values.at(v), bound.batch));
    r->bytes_per_sample_before += r->inputs.back().bytes_per_sample;
  }
  for (Value* v : cut) {
    std::string name = value_name(v);
    if (v->node() == a.graph->param_node()) name = schema.arguments()[v->offset()].name();
    r->cut.push_back(describe(name, probe.values.at(v), bound.batch));
    r->bytes_per_sample_after += r->cut.back().bytes_per_sample;
  }
}

// Why stateless node `n` stayed on the trainer though it reads what the
// worker sends.
std::string why_stateless_kept(Node* n, const Probe& probe, const SplitOptions& options, const SplitReport& r) {
  if (options.mode == SplitMode::kDataset) return "stateless: dataset mode moves only the transform";
  for (Value* o : n->outputs()) {
    auto it = probe.values.find(o);
    if (it == probe.values.end()) continue;
    if (std::string why = why_not_shippable(it->second, o->type(), options); !why.empty())
      return "stateless: its result cannot be shipped (" + why + ")";
  }
  if (options.mode == SplitMode::kMax)
    return "stateless: its result cannot be shipped (" + n->output(0)->type()->repr_str() + ")";
  return std::string("stateless: cheaper on the ") + r.trainer_device + " trainer than shipping what it needs";
}

// The trainer-side nodes that read what the worker sends, each with why it
// stayed; nodes of the same kind and reason make one entry.
void describe_kept(const Analysis& a, const Probe& probe, const std::vector<Node*>& moved, const SplitOptions& options,
                   SplitReport* r) {
  const std::unordered_set<Node*> on_worker(moved.begin(), moved.end());
  auto data_from_worker = [&](Value* v) {
    if (v == a.graph->inputs()[0]) return false;
    return v->node() == a.graph->param_node() || on_worker.count(v->node()) > 0 ||
           (a.cls.count(v->node()) && a.cls.at(v->node()) == NodeClass::kStateless);
  };
  for (Node* n : a.nodes) {
    if (on_worker.count(n) || a.cls.at(n) == NodeClass::kShared) continue;
    auto reads = outer_inputs(n);
    if (std::none_of(reads.begin(), reads.end(), data_from_worker)) continue;
    KeptNode k;
    k.node = n->kind().toQualString();
    k.reason = a.cls.at(n) == NodeClass::kStateful ? a.why(n) : why_stateless_kept(n, probe, options, *r);
    // Repeated submodules (embs.0 .. embs.25) make one entry: embs.*.
    k.reason = collapse_indices(k.reason);
    auto same_entry = std::find_if(r->kept.begin(), r->kept.end(),
                                   [&](const KeptNode& e) { return e.node == k.node && e.reason == k.reason; });
    if (same_entry != r->kept.end())
      same_entry->count += 1;
    else
      r->kept.push_back(k);
  }
}

}  // namespace

void describe_cut(const Analysis& a, const Probe& probe, const std::vector<Node*>& moved,
                  const std::vector<Value*>& cut, const BoundExample& bound, const SplitOptions& options,
                  SplitReport* r) {
  r->cut.clear();
  r->kept.clear();
  r->inputs.clear();
  r->bytes_per_sample_before = r->bytes_per_sample_after = 0;
  r->batch_size = bound.batch;
  describe_values(a, probe, cut, bound, r);
  r->nodes_total = bound.transform_nodes + a.nodes_total;
  r->nodes_stateless = bound.transform_nodes + a.nodes_stateless;
  r->nodes_moved = bound.transform_nodes;
  for (Node* n : moved) {
    r->nodes_moved += 1;
    for (auto* b : n->blocks()) r->nodes_moved += count_nodes(b);
  }
  describe_kept(a, probe, moved, options, r);
}

}  // namespace goldminer::split
