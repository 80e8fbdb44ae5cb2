// Orchestration of the split (split.h): loading, argument binding and cut
// choice; measurement is measure.cc, verification verify.cc. Torch
// exceptions stop here.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>
#include <unordered_set>

#include <torch/csrc/jit/passes/inliner.h>

#include "goldminer/split.h"
#include "tw_lib/split/cost_model.h"
#include "tw_lib/split/cut.h"
#include "tw_lib/split/graph_split.h"
#include "tw_lib/split/measure.h"
#include "tw_lib/split/program_util.h"

namespace goldminer {
namespace {

using c10::IValue;
using split::Analysis;
using split::NodeClass;
using split::Node;
using split::Value;
using namespace split;  // program_util's helpers (RngGuard, Programs, load_module...)
using Clock = std::chrono::steady_clock;

double since_ms(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
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

// The stateless top-level nodes of `a` in program order, and their indices.
struct StatelessNodes {
  std::vector<Node*> nodes;
  std::unordered_map<Node*, int> index;
};
StatelessNodes stateless_nodes(const Analysis& a) {
  StatelessNodes s;
  for (Node* n : a.nodes)
    if (a.cls.at(n) == NodeClass::kStateless) {
      s.index[n] = static_cast<int>(s.nodes.size());
      s.nodes.push_back(n);
    }
  return s;
}

// `v` with every tensor whose leading dimension is `batch` repeated twice
// along it: the example at twice its batch size, for the linear fit.
IValue doubled(const IValue& v, int64_t batch) {
  return split::map_tensors(v, [batch](const at::Tensor& t) {
    return t.dim() > 0 && t.size(0) == batch ? at::cat({t, t}, 0) : t;
  });
}

// Kernels node `n` launches on a GPU, nested blocks included.
int kernels_in(Node* n) {
  int k = split::kernels_of(n->kind().toQualString());
  for (auto* b : n->blocks())
    for (Node* inner : b->nodes()) k += kernels_in(inner);
  return k;
}

// The pricing the options ask for at example batch `batch`.
split::Pricing pricing_for(const SplitOptions& o, int64_t batch, SplitReport* r) {
  split::Pricing p;
  p.device = o.trainer_device;
  p.batch = static_cast<double>(o.batch_size > 0 ? o.batch_size : batch);
  p.pinned = o.pinned;
  if (o.transfer_gbps > 0) {
    p.link_gbps = o.transfer_gbps;
    r->link_source = "given";
  } else {
    const std::string iface = !o.network_interface.empty() ? o.network_interface : split::listen_interface();
    split::Link link = split::detect_link("/sys/class/net", iface,
                                          o.gpus_per_node > 0 ? o.gpus_per_node : split::gpus_on_this_node());
    p.link_gbps = link.gbps;
    r->link_source = link.source;
  }
  r->trainer_device = trainer_device_name(p.device);
  r->priced_batch_size = static_cast<int64_t>(p.batch);
  r->link_gbps = p.link_gbps;
  r->host_to_device_gbps = p.device == TrainerDevice::kCuda
                               ? (p.pinned ? p.gpu.pcie_pinned_gbps : p.gpu.pcie_pageable_gbps)
                               : 0;
  return p;
}

// Model nodes the worker runs with `moved` (nested blocks counted).
int model_nodes_moved(const std::vector<Node*>& stateless, const std::vector<bool>& moved) {
  int n = 0;
  for (size_t i = 0; i < stateless.size(); ++i)
    if (moved[i]) {
      n += 1;
      for (auto* b : stateless[i]->blocks()) n += split::count_nodes(b);
    }
  return n;
}

std::string ms_text(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f", ms);
  return buf;
}

// Fills the report's cut, kept nodes and moved count for the nodes in
// `moved` of analysis `a`, whose stateless region ran as `probe`.
void describe_cut(const Analysis& a, const split::Probe& probe, const std::vector<Node*>& moved,
                  const std::vector<Value*>& cut, const c10::FunctionSchema& model_schema, int64_t batch,
                  int transform_nodes, const SplitOptions& options, SplitReport* r) {
  r->cut.clear();
  r->kept.clear();
  r->inputs.clear();
  r->bytes_per_sample_before = r->bytes_per_sample_after = 0;
  r->batch_size = batch;
  for (size_t i = 1; i < a.graph->inputs().size(); ++i) {
    Value* v = a.graph->inputs()[i];
    r->inputs.push_back(describe(model_schema.arguments()[i].name(), probe.values.at(v), batch));
    r->bytes_per_sample_before += r->inputs.back().bytes_per_sample;
  }
  for (Value* v : cut) {
    std::string name = value_name(v);
    if (v->node() == a.graph->param_node()) name = model_schema.arguments()[v->offset()].name();
    r->cut.push_back(describe(name, probe.values.at(v), batch));
    r->bytes_per_sample_after += r->cut.back().bytes_per_sample;
  }
  r->nodes_total = transform_nodes + a.nodes_total;
  r->nodes_stateless = transform_nodes + a.nodes_stateless;
  r->nodes_moved = transform_nodes;
  for (Node* n : moved) {
    r->nodes_moved += 1;
    for (auto* b : n->blocks()) r->nodes_moved += split::count_nodes(b);
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
      auto it = probe.values.find(o);
      if (it == probe.values.end()) continue;
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
      k.reason = std::string("stateless: cheaper on the ") + r->trainer_device + " trainer than shipping what it needs";
    }
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
    const int64_t batch = std::max<int64_t>(1, first_batch_dim(c10::ivalue::Tuple::create(inputs)));
    const split::Pricing pricing = pricing_for(options, batch, &r);

    // Each stateless node and value, measured at the example's batch and at
    // twice it (the example repeated), priced at the job's batch.
    Analysis& a = *analysis;
    auto probe = split::probe_stateless(a, inputs, /*time_nodes=*/true);
    if (!probe.ok()) return probe.status();
    const int64_t batch2 = 2 * batch;
    std::vector<IValue> inputs2;
    for (const auto& v : inputs) inputs2.push_back(doubled(v, batch));
    auto probe2 = split::probe_stateless(a, inputs2, /*time_nodes=*/true);
    const bool fitted = probe2.ok();
    const bool on_gpu = pricing.device == TrainerDevice::kCuda && split::cuda_visible();
    Expected<split::Probe> gpu1 = Status::error("not run"), gpu2 = Status::error("not run");
    if (on_gpu) {
      gpu1 = split::probe_stateless(a, inputs, true, /*on_cuda=*/true);
      gpu2 = split::probe_stateless(a, inputs2, true, /*on_cuda=*/true);
    }
    const bool gpu_timed = on_gpu && gpu1.ok() && gpu2.ok();
    const split::Probe& second = fitted ? *probe2 : *probe;
    const double b2 = fitted ? batch2 : batch;
    const std::string batches = fitted ? "at batch " + std::to_string(batch) + " and " + std::to_string(batch2) +
                                             ", fitted as fixed + per-sample"
                                       : "at batch " + std::to_string(batch) + " scaled with the batch (the example "
                                             "does not run at batch " + std::to_string(batch2) + ": " +
                                             probe2.status().message() + ")";
    if (pricing.device == TrainerDevice::kCpu)
      r.node_costs = "CPU time measured " + batches;
    else if (gpu_timed)
      r.node_costs = "GPU time measured at batch " + std::to_string(batch) + " and " + std::to_string(batch2);
    else
      r.node_costs = std::string("GPU device model (") + (on_gpu ? "GPU timing failed" : "no GPU visible to libtorch") +
                     "): " + ms_text(pricing.gpu.launch_us / 1e3) + " ms per kernel + bytes read and written at " +
                     std::to_string(static_cast<int>(pricing.gpu.memory_gbps)) + " GB/s, bytes measured " + batches;

    const StatelessNodes sn = stateless_nodes(a);
    split::CutProblem problem;
    for (Node* n : sn.nodes) {
      split::NodeFigures f;
      f.cpu_ms = split::fit_linear(batch, probe->node_ms.at(n), b2, second.node_ms.at(n));
      f.bytes = split::fit_linear(batch, probe->node_bytes.at(n), b2, second.node_bytes.at(n));
      f.kernels = kernels_in(n);
      if (gpu_timed) {
        f.gpu_ms = split::fit_linear(batch, gpu1->node_ms.at(n), batch2, gpu2->node_ms.at(n));
        f.gpu_measured = true;
      }
      problem.node_ms.push_back(split::node_ms(f, pricing));
    }
    std::unordered_map<Value*, int> value_index;
    std::vector<Value*> values(a.graph->inputs().begin() + 1, a.graph->inputs().end());
    for (Node* n : sn.nodes)
      for (Value* o : n->outputs()) values.push_back(o);
    for (Value* v : values) {
      split::CutProblem::Value pv;
      bool input = v->node() == a.graph->param_node();
      pv.producer = input ? -1 : sn.index.at(v->node());
      const IValue& at_example = probe->values.at(v);
      const bool shippable = why_not_shippable(at_example, v->type(), options).empty();
      pv.bytes = split::fit_linear(batch, std::max(0.0, split::value_bytes(at_example)), b2,
                                   std::max(0.0, split::value_bytes(second.values.at(v))))
                     .at(pricing.batch);
      pv.cost = !shippable ? (input ? 0 : split::kCannotCross) : split::transfer_ms(pv.bytes, pricing).total();
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
          pv.consumers.push_back(sn.index.at(n));
        else
          pv.trainer_reads = true;
      }
    }
    for (Value* v : a.graph->outputs())
      if (value_index.count(v)) problem.values[value_index[v]].trainer_reads = true;
    for (const auto& [later, earlier] : a.order)
      problem.requires_moved.emplace_back(sn.index.at(later), sn.index.at(earlier));

    // The candidates, cheapest first; the mode picks among them.
    std::vector<split::NamedCut> candidates;
    if (options.mode == SplitMode::kExtended) candidates = split::candidate_cuts(problem);
    const std::vector<bool> nothing(sn.nodes.size(), false);
    if (options.mode == SplitMode::kDataset) candidates.push_back({"dataset", {nothing, split::cut_cost(problem, nothing)}});
    if (options.mode == SplitMode::kMax) {
      auto max = split::choose_max_cut(problem);
      candidates.push_back({"max", max});
    }
    for (const auto& c : candidates) {
      CandidateCut cc;
      cc.name = c.name;
      cc.nodes_moved = model_nodes_moved(sn.nodes, c.choice.moved);
      const double bytes = split::crossing_bytes(problem, c.choice.moved);
      cc.bytes_per_sample = bytes / pricing.batch;
      cc.trainer_ms = split::trainer_part(problem, c.choice.moved);
      const split::TransferMs t = split::transfer_ms(bytes, pricing);
      cc.network_ms = t.network;
      cc.host_to_device_ms = t.host_to_device;
      cc.outcome = "not tried";
      r.candidates.push_back(cc);
    }
    r.predicted_ms_saved_per_batch =
        split::cut_cost(problem, nothing) - split::cut_cost(problem, candidates.front().choice.moved);
    r.split_ms = since_ms(start);

    // Never lose: the cheapest candidate is extracted and measured; while
    // the trainer's own measurement says it is not faster than dataset
    // mode by the margin, the next one is (at most three measured, then
    // dataset mode, the reference, which needs no measuring to stand).
    const bool check = options.measure && options.mode == SplitMode::kExtended &&
                       options.trainer_device == TrainerDevice::kCpu;
    const size_t dataset_at = static_cast<size_t>(
        std::find_if(candidates.begin(), candidates.end(), [](const split::NamedCut& c) { return c.name == "dataset"; }) -
        candidates.begin());
    std::string overruled;
    int measured_tries = 0;
    bool consumed = false;  // extraction consumes the analysis's graph
    for (size_t pick = 0;;) {
      std::optional<Analysis> fresh;
      std::optional<split::Probe> fresh_probe;
      Analysis* an = &a;
      const split::Probe* pr = &*probe;
      if (consumed) {
        auto again = split::analyse_method(model, options.method);
        if (!again.ok()) return Status::error("model " + again.status().message());
        fresh.emplace(std::move(*again));
        auto values_again = split::probe_stateless(*fresh, inputs, /*time_nodes=*/false);
        if (!values_again.ok()) return values_again.status();
        fresh_probe.emplace(std::move(*values_again));
        an = &*fresh;
        pr = &*fresh_probe;
      }
      const StatelessNodes nodes = stateless_nodes(*an);
      if (nodes.nodes.size() != sn.nodes.size()) return Status::error("split failed: the model's analysis differs between runs");
      std::vector<Node*> moved;
      for (size_t i = 0; i < nodes.nodes.size(); ++i)
        if (candidates[pick].choice.moved[i]) moved.push_back(nodes.nodes[i]);
      const std::vector<Value*> cut = split::cut_values(*an, moved);
      describe_cut(*an, *pr, moved, cut, model_schema, batch, transform_nodes, options, &r);
      auto ex_start = Clock::now();
      auto extraction =
          split::extract_programs(an, moved, cut, model, {transform, p.unpack}, worker_types, worker_names);
      if (!extraction.ok()) return extraction.status();
      consumed = true;
      r.split_ms += since_ms(ex_start);
      result.worker = std::make_shared<torch::jit::Module>(extraction->worker);
      result.trainer = std::make_shared<torch::jit::Module>(extraction->trainer);
      if (options.measure) {
        try {
          split::measure(save_bytes(*result.worker), save_bytes(*result.trainer), options.method, x,
                         std::max(1, options.repeat), /*cut_only=*/measured_tries > 0, &r);
        } catch (const std::exception& e) {
          return Status::error("the example does not run through the model: " + split::torch_error_text(e));
        }
        ++measured_tries;
      }
      const double b = static_cast<double>(batch);
      r.transfer_ms = split::transfer_ms(r.bytes_per_sample_after * b, pricing).total();
      CandidateCut& cc = r.candidates[pick];
      if (options.measure) {
        cc.measured_trainer_ms = r.trainer_ms;
        cc.measured_dataset_ms = r.trainer_ms_dataset;
      }
      if (!check || pick >= dataset_at) {  // dataset mode is the reference: it needs no check
        cc.outcome = "chosen";
        break;
      }
      const double mine = r.trainer_ms + r.transfer_ms;
      const double reference = r.trainer_ms_dataset + split::transfer_ms(r.bytes_per_sample_before * b, pricing).total();
      if (mine <= reference * (1 - options.keep_margin)) {
        cc.outcome = "chosen";
        break;
      }
      cc.outcome = "measured " + ms_text(mine) + " ms against dataset mode's " + ms_text(reference) +
                   " ms per example batch (trainer CPU + transfer): not faster by " +
                   std::to_string(static_cast<int>(options.keep_margin * 100 + 0.5)) + "%";
      if (overruled.empty()) overruled = cc.name + " " + cc.outcome;
      r.fell_back = true;
      pick = measured_tries >= 3 ? dataset_at : pick + 1;
    }
    const auto chosen = std::find_if(r.candidates.begin(), r.candidates.end(),
                                     [](const CandidateCut& c) { return c.outcome == "chosen"; });
    const CandidateCut& best = r.candidates.front();
    std::string because;
    if (options.mode != SplitMode::kExtended) {
      because = std::string("mode ") + r.mode + " asks for this cut";
    } else if (r.fell_back) {
      because = "measurement overruled the predicted best: " + overruled + "; " + chosen->name +
                (chosen->name == "dataset" ? " (the reference) stands" : " measured faster");
    } else {
      because = "lowest predicted " + r.trainer_device + " trainer cost at batch " + std::to_string(r.priced_batch_size) +
                ": " + ms_text(best.trainer_ms) + " ms of stateless nodes + " + ms_text(best.network_ms) +
                " ms network" + (pricing.device == TrainerDevice::kCuda ? " + " + ms_text(best.host_to_device_ms) +
                                                                              " ms host-to-device" : "") +
                " per batch";
      if (r.candidates.size() > 1) {
        const CandidateCut& next = r.candidates[1];
        because += ", against " + ms_text(next.total_ms()) + " ms for " + next.name;
      }
      if (options.measure && !check)
        because += "; not checked by measurement (the trainer is a GPU; the CPU timings here are not its own)";
    }
    r.chosen_because = because;
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

}  // namespace goldminer
