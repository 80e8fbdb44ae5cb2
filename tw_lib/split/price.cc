// The split's pricing step (split_steps.h): each stateless node and value,
// measured on the example at its batch and at twice it (the example
// repeated), fitted as fixed + per-sample and priced at the job's batch
// for the trainer's device (cost_model.h), as the cut problem (cut.h).
#include <algorithm>
#include <optional>

#include "tw_lib/split/split_steps.h"

namespace goldminer::split {
namespace {

// `v` with every tensor whose leading dimension is `batch` repeated twice
// along it: the example at twice its batch size, for the linear fit.
IValue doubled(const IValue& v, int64_t batch) {
  return map_tensors(v, [batch](const at::Tensor& t) {
    return t.dim() > 0 && t.size(0) == batch ? at::cat({t, t}, 0) : t;
  });
}

// Kernels node `n` launches on a GPU, nested blocks included.
int kernels_in(Node* n) {
  int k = kernels_of(n->kind().toQualString());
  for (auto* b : n->blocks())
    for (Node* inner : b->nodes()) k += kernels_in(inner);
  return k;
}

// The stateless region run at the example's batch and at twice it, on
// the CPU and, when the pricing is for a GPU libtorch can see, on the GPU.
struct Probes {
  int64_t batch = 1;
  Probe first;                   // CPU, at `batch`
  std::optional<Probe> doubled;  // CPU, at 2 * batch; none when the example does not run there
  std::string doubled_error;     // why it does not
  bool on_gpu = false;           // the GPU runs were tried
  std::optional<Probe> gpu_first, gpu_doubled;  // both, or neither when a GPU run failed
  // What the second point of each CPU fit is: twice the batch, or the
  // first again (the fit then scales with the batch).
  const Probe& second() const { return doubled ? *doubled : first; }
  double second_batch() const { return static_cast<double>(doubled ? 2 * batch : batch); }
};

Expected<Probes> probe_region(const Analysis& a, const std::vector<IValue>& inputs, int64_t batch,
                              const Pricing& pricing) {
  Probes p;
  p.batch = batch;
  auto first = probe_stateless(a, inputs, /*time_nodes=*/true);
  if (!first.ok()) return first.status();
  p.first = std::move(*first);
  std::vector<IValue> inputs2;
  for (const auto& v : inputs) inputs2.push_back(doubled(v, batch));
  auto second = probe_stateless(a, inputs2, /*time_nodes=*/true);
  if (second.ok())
    p.doubled = std::move(*second);
  else
    p.doubled_error = second.status().message();
  p.on_gpu = pricing.device == TrainerDevice::kCuda && cuda_visible();
  if (p.on_gpu) {
    auto gpu1 = probe_stateless(a, inputs, true, /*on_cuda=*/true);
    auto gpu2 = probe_stateless(a, inputs2, true, /*on_cuda=*/true);
    if (gpu1.ok() && gpu2.ok()) {
      p.gpu_first = std::move(*gpu1);
      p.gpu_doubled = std::move(*gpu2);
    }
  }
  return p;
}

// How the nodes were priced, for the report.
std::string node_costs_text(const Probes& p, const Pricing& pricing) {
  const std::string b1 = std::to_string(p.batch), b2 = std::to_string(2 * p.batch);
  const std::string batches = p.doubled ? "at batch " + b1 + " and " + b2 + ", fitted as fixed + per-sample"
                                        : "at batch " + b1 + " scaled with the batch (the example does not run at "
                                              "batch " + b2 + ": " + p.doubled_error + ")";
  if (pricing.device == TrainerDevice::kCpu) return "CPU time measured " + batches;
  if (p.gpu_first) return "GPU time measured at batch " + b1 + " and " + b2;
  return std::string("GPU device model (") + (p.on_gpu ? "GPU timing failed" : "no GPU visible to libtorch") +
         "): " + ms_text(pricing.gpu.launch_us / 1e3) + " ms per kernel + bytes read and written at " +
         std::to_string(static_cast<int>(pricing.gpu.memory_gbps)) + " GB/s, bytes measured " + batches;
}

// The trainer's time for each stateless node, priced at the job's batch.
std::vector<double> node_costs(const StatelessNodes& sn, const Probes& p, const Pricing& pricing) {
  const double b1 = static_cast<double>(p.batch), b2 = p.second_batch();
  std::vector<double> ms;
  for (Node* n : sn.nodes) {
    NodeFigures f;
    f.cpu_ms = fit_linear(b1, p.first.node_ms.at(n), b2, p.second().node_ms.at(n));
    f.bytes = fit_linear(b1, p.first.node_bytes.at(n), b2, p.second().node_bytes.at(n));
    f.kernels = kernels_in(n);
    if (p.gpu_first) {
      f.gpu_ms = fit_linear(b1, p.gpu_first->node_ms.at(n), 2 * b1, p.gpu_doubled->node_ms.at(n));
      f.gpu_measured = true;
    }
    ms.push_back(node_ms(f, pricing));
  }
  return ms;
}

// The values a cut may send (the model's inputs and the stateless nodes'
// outputs), each with its transfer cost at the job's batch, its producer
// and who reads it.
std::vector<CutProblem::Value> value_costs(const Analysis& a, const StatelessNodes& sn, const Probes& p,
                                           const Pricing& pricing, const SplitOptions& options) {
  std::unordered_map<Value*, int> value_index;
  std::vector<Value*> values(a.graph->inputs().begin() + 1, a.graph->inputs().end());
  for (Node* n : sn.nodes)
    for (Value* o : n->outputs()) values.push_back(o);
  std::vector<CutProblem::Value> priced;
  for (Value* v : values) {
    CutProblem::Value pv;
    const bool input = v->node() == a.graph->param_node();
    pv.producer = input ? -1 : sn.index.at(v->node());
    const IValue& at_example = p.first.values.at(v);
    const bool shippable = why_not_shippable(at_example, v->type(), options).empty();
    pv.bytes = fit_linear(static_cast<double>(p.batch), std::max(0.0, value_bytes(at_example)), p.second_batch(),
                          std::max(0.0, value_bytes(p.second().values.at(v))))
                   .at(pricing.batch);
    pv.cost = !shippable ? (input ? 0 : kCannotCross) : transfer_ms(pv.bytes, pricing).total();
    value_index[v] = static_cast<int>(priced.size());
    priced.push_back(pv);
  }
  for (Node* n : a.nodes) {
    if (a.cls.at(n) == NodeClass::kShared) continue;
    for (Value* v : outer_inputs(n)) {
      auto it = value_index.find(v);
      if (it == value_index.end()) continue;
      auto& pv = priced[it->second];
      if (a.cls.at(n) == NodeClass::kStateless)
        pv.consumers.push_back(sn.index.at(n));
      else
        pv.trainer_reads = true;
    }
  }
  for (Value* v : a.graph->outputs())
    if (value_index.count(v)) priced[value_index[v]].trainer_reads = true;
  return priced;
}

}  // namespace

std::string why_not_shippable(const IValue& v, const c10::TypePtr& type, const SplitOptions& options) {
  if (value_bytes(v) < 0) return type->repr_str();
  if (options.tensors_only && !v.isTensor()) return type->repr_str() + ": goldminer-dw sends tensors only";
  return "";
}

Pricing pricing_for(const SplitOptions& o, int64_t batch, SplitReport* r) {
  Pricing p;
  p.device = o.trainer_device;
  p.batch = static_cast<double>(o.batch_size > 0 ? o.batch_size : batch);
  p.pinned = o.pinned;
  if (o.transfer_gbps > 0) {
    p.link_gbps = o.transfer_gbps;
    r->link_source = "given";
  } else {
    const std::string iface = !o.network_interface.empty() ? o.network_interface : listen_interface(o.listen);
    Link link = detect_link("/sys/class/net", iface, o.gpus_per_node > 0 ? o.gpus_per_node : gpus_on_this_node());
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

StatelessNodes stateless_nodes(const Analysis& a) {
  StatelessNodes s;
  for (Node* n : a.nodes)
    if (a.cls.at(n) == NodeClass::kStateless) {
      s.index[n] = static_cast<int>(s.nodes.size());
      s.nodes.push_back(n);
    }
  return s;
}

Expected<PricedRegion> price_region(const Analysis& a, const BoundExample& bound, const Pricing& pricing,
                                    const SplitOptions& options) {
  auto probes = probe_region(a, bound.model_inputs, bound.batch, pricing);
  if (!probes.ok()) return probes.status();
  PricedRegion region;
  region.node_costs = node_costs_text(*probes, pricing);
  region.stateless = stateless_nodes(a);
  region.problem.node_ms = node_costs(region.stateless, *probes, pricing);
  region.problem.values = value_costs(a, region.stateless, *probes, pricing, options);
  for (const auto& [later, earlier] : a.order)
    region.problem.requires_moved.emplace_back(region.stateless.index.at(later), region.stateless.index.at(earlier));
  region.probe = std::move(probes->first);
  return region;
}

}  // namespace goldminer::split
