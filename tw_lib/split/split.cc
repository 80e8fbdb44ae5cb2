// The split (split.h) as its steps (split_steps.h): the analysis, binding
// the example, pricing the stateless nodes, listing the candidate cuts and
// choosing one, which extracts the two programs; and the same over
// serialized programs. Measurement is measure.cc, verification verify.cc.
// Torch exceptions stop here.
#include <chrono>
#include <optional>

#include "goldminer/split.h"
#include "tw_lib/split/program_util.h"
#include "tw_lib/split/split_steps.h"

namespace goldminer {
namespace {

using Clock = std::chrono::steady_clock;

double since_ms(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
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

    auto bound = split::bind_example(model, example, transform, options.method);
    if (!bound.ok()) return bound.status();
    const split::Pricing pricing = split::pricing_for(options, bound->batch, &r);
    auto region = split::price_region(*analysis, *bound, pricing, options);
    if (!region.ok()) return region.status();
    r.node_costs = region->node_costs;
    const auto candidates = split::list_candidates(*region, pricing, options, &r);
    r.split_ms = since_ms(start);

    auto chosen = split::choose_cut(model, *bound, &*analysis, *region, candidates, pricing, options, &r);
    if (!chosen.ok()) return chosen.status();
    result.worker = std::make_shared<torch::jit::Module>(chosen->worker);
    result.trainer = std::make_shared<torch::jit::Module>(chosen->trainer);
    return result;
  } catch (const std::exception& e) {
    return Status::error("split failed: " + split::torch_error_text(e));
  }
}

Expected<SerializedSplit> split_serialized(const SplitInputs& in, const SplitOptions& options) {
  try {
    auto model = split::load_module(in.model, in.model_name);
    if (!model.ok()) return model.status();
    std::optional<torch::jit::Module> transform;
    if (!in.transform.empty()) {
      auto t = split::load_module(in.transform, in.transform_name);
      if (!t.ok()) return t.status();
      transform = *t;
    }
    auto example = split::load_example(in.example, in.example_name);
    if (!example.ok()) return example.status();
    auto program = split_module(*model, *example, transform ? &*transform : nullptr, options);
    if (!program.ok()) return program.status();
    SerializedSplit out;
    out.worker = split::save_bytes(*program->worker);
    out.trainer = split::save_bytes(*program->trainer);
    out.report = program->report;
    return out;
  } catch (const std::exception& e) {
    return Status::error("split failed: " + split::torch_error_text(e));
  }
}

}  // namespace goldminer
