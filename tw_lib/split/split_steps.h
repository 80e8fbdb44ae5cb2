// The steps of split_module (split.cc), each taking and giving its own
// types: binding the example (bind_example.cc), pricing the stateless nodes
// with the cost model (price.cc), describing a cut for the report
// (cut_report.cc), and choosing the cut, which extracts the two programs of
// each candidate it tries (choose_cut.cc). Internal; includes torch headers.
// Each step throws torch's exceptions; split_module turns them into a Status.
#ifndef GOLDMINER_TW_LIB_SPLIT_SPLIT_STEPS_H_
#define GOLDMINER_TW_LIB_SPLIT_SPLIT_STEPS_H_

#include <torch/script.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "gmcore/status.h"
#include "goldminer/split.h"
#include "tw_lib/split/cost_model.h"
#include "tw_lib/split/cut.h"
#include "tw_lib/split/graph_split.h"
#include "tw_lib/split/program_util.h"

namespace goldminer::split {

// The example bound to the programs: what the worker program takes and
// what the model's method receives.
struct BoundExample {
  Programs programs;             // the model and the transform (with how its output spreads)
  const c10::FunctionSchema* model_schema = nullptr;  // of the method split (owned by the model)
  std::vector<IValue> example;   // bound to the first program: the transform, else the model
  std::vector<IValue> model_inputs;  // the method's arguments on the example (self excluded)
  std::vector<c10::TypePtr> worker_types;  // the worker program's arguments
  std::vector<std::string> worker_names;
  int transform_nodes = 0;  // the transform's nodes, inlined: all of them run on the worker
  int64_t batch = 1;        // the example's batch size (the first tensor's leading dimension)
};
// Binds `example` to `transform` (may be null), runs it (no grad, the
// caller's RNG stream kept) and binds its output to `model.<method>`.
// Errors name the program and where the values came from.
Expected<BoundExample> bind_example(const torch::jit::Module& model, const std::vector<IValue>& example,
                                    const torch::jit::Module* transform, const std::string& method);

// The pricing `options` ask for at example batch `batch`; fills the
// report's pricing fields (trainer device, priced batch, link and its source,
// host-to-device figure).
Pricing pricing_for(const SplitOptions& options, int64_t batch, SplitReport* r);

// The stateless top-level nodes of an analysis in program order, and their
// indices: a cut's `moved` flags are indexed so.
struct StatelessNodes {
  std::vector<Node*> nodes;
  std::unordered_map<Node*, int> index;
};
StatelessNodes stateless_nodes(const Analysis& a);

// The stateless region priced for the trainer: the cut problem over its
// nodes and values, and the values of the example's run (the report's shapes).
struct PricedRegion {
  StatelessNodes stateless;
  CutProblem problem;
  Probe probe;             // at the example's batch
  std::string node_costs;  // how the nodes were priced (the report's node_costs)
};
// Runs the stateless region of `a` on the example at its batch and at
// twice it (and on the GPU for a GPU trainer when libtorch sees one), fits
// each node's and value's figures as fixed + per-sample and prices them at
// the job's batch.
Expected<PricedRegion> price_region(const Analysis& a, const BoundExample& bound, const Pricing& pricing,
                                    const SplitOptions& options);

// Why value `v` (of TorchScript type `type`, as on the example) may not
// cross the cut; "" if it may.
std::string why_not_shippable(const IValue& v, const c10::TypePtr& type, const SplitOptions& options);

// Fills the report's inputs, cut, kept nodes and node counts for the nodes
// in `moved` of analysis `a`, whose stateless region ran as `probe`.
void describe_cut(const Analysis& a, const Probe& probe, const std::vector<Node*>& moved,
                  const std::vector<Value*>& cut, const BoundExample& bound, const SplitOptions& options,
                  SplitReport* r);

// The cuts the mode allows, cheapest first (extended: split::candidate_cuts;
// dataset and max: that one cut), listed in the report with their
// predicted costs ("not tried" yet), and the time the cheapest is
// predicted to save against dataset mode.
std::vector<NamedCut> list_candidates(const PricedRegion& region, const Pricing& pricing,
                                      const SplitOptions& options, SplitReport* r);

// The chosen cut's two programs.
struct ChosenSplit {
  torch::jit::Module worker;
  torch::jit::Module trainer;
};
// Extracts the cheapest of `candidates` (from list_candidates) and, where
// the trainer's own measurement can check it (a CPU trainer, extended mode,
// measuring on), falls back to the next while it does not beat dataset mode
// by options.keep_margin. Consumes `a`'s graph; fills the report's cut,
// measurements, candidates' outcomes and chosen_because, and adds the
// extractions' time to r->split_ms.
Expected<ChosenSplit> choose_cut(const torch::jit::Module& model, const BoundExample& bound, Analysis* a,
                                 const PricedRegion& region, const std::vector<NamedCut>& candidates,
                                 const Pricing& pricing, const SplitOptions& options, SplitReport* r);

// `ms` with three decimals, as the report's texts give times.
std::string ms_text(double ms);

}  // namespace goldminer::split

#endif  // GOLDMINER_TW_LIB_SPLIT_SPLIT_STEPS_H_
