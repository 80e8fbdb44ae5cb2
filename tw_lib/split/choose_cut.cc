// The split's choice of cut (split_steps.h): the candidates the mode
// allows, priced; the cheapest extracted into its two programs; and the
// never-lose check, which measures it and falls back to the next while the
// trainer's own measurement says it is not faster than dataset mode.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>

#include "tw_lib/split/measure.h"
#include "tw_lib/split/split_steps.h"

namespace goldminer::split {
namespace {

using Clock = std::chrono::steady_clock;

// Model nodes the worker runs with `moved` (nested blocks counted).
int model_nodes_moved(const std::vector<Node*>& stateless, const std::vector<bool>& moved) {
  int n = 0;
  for (size_t i = 0; i < stateless.size(); ++i)
    if (moved[i]) {
      n += 1;
      for (auto* b : stateless[i]->blocks()) n += count_nodes(b);
    }
  return n;
}

// Extracts candidate cuts one after another. The first extraction edits
// the priced analysis's graph in place (no copy); as that consumes it,
// each later one analyses the model again and reruns the example through
// the new graph (values only, for the report). Thread-compatible.
class CutExtractor {
 public:
  CutExtractor(const torch::jit::Module& model, const BoundExample& bound, Analysis* a, const PricedRegion& region,
               const SplitOptions& options)
      : model_(model), bound_(bound), first_(a), region_(region), options_(options) {}

  // The programs moving the stateless nodes flagged in `moved` (indexed
  // as region.stateless); fills the report's cut and kept nodes.
  Expected<Extraction> extract(const std::vector<bool>& moved_flags, SplitReport* r) {
    std::optional<Analysis> fresh;
    std::optional<Probe> fresh_probe;
    Analysis* an = first_;
    const Probe* pr = &region_.probe;
    if (consumed_) {
      auto again = analyse_method(model_, options_.method);
      if (!again.ok()) return Status::error("model " + again.status().message());
      fresh.emplace(std::move(*again));
      auto values_again = probe_stateless(*fresh, bound_.model_inputs, /*time_nodes=*/false);
      if (!values_again.ok()) return values_again.status();
      fresh_probe.emplace(std::move(*values_again));
      an = &*fresh;
      pr = &*fresh_probe;
    }
    const StatelessNodes nodes = stateless_nodes(*an);
    if (nodes.nodes.size() != region_.stateless.nodes.size())
      return Status::error("split failed: the model's analysis differs between runs");
    std::vector<Node*> moved;
    for (size_t i = 0; i < nodes.nodes.size(); ++i)
      if (moved_flags[i]) moved.push_back(nodes.nodes[i]);
    const std::vector<Value*> cut = cut_values(*an, moved);
    describe_cut(*an, *pr, moved, cut, bound_, options_, r);
    const auto start = Clock::now();
    const TransformCall transform{bound_.programs.transform ? &*bound_.programs.transform : nullptr,
                                  bound_.programs.unpack};
    auto extraction = extract_programs(an, moved, cut, model_, transform, bound_.worker_types, bound_.worker_names);
    if (!extraction.ok()) return extraction.status();
    consumed_ = true;
    r->split_ms += std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    return extraction;
  }

 private:
  const torch::jit::Module& model_;
  const BoundExample& bound_;
  Analysis* first_;
  const PricedRegion& region_;
  const SplitOptions& options_;
  bool consumed_ = false;  // extraction consumes the analysis's graph
};

// Whether the candidate just measured (the report's figures) beats dataset
// mode by the margin; if not, says by how much in its outcome.
bool beats_dataset(const SplitReport& r, const Pricing& pricing, const SplitOptions& options, CandidateCut* cc) {
  const double b = static_cast<double>(r.batch_size);
  const double mine = r.trainer_ms + r.transfer_ms;
  const double reference = r.trainer_ms_dataset + transfer_ms(r.bytes_per_sample_before * b, pricing).total();
  if (mine <= reference * (1 - options.keep_margin)) return true;
  cc->outcome = "measured " + ms_text(mine) + " ms against dataset mode's " + ms_text(reference) +
                " ms per example batch (trainer CPU + transfer): not faster by " +
                std::to_string(static_cast<int>(options.keep_margin * 100 + 0.5)) + "%";
  return false;
}

// Why the report's chosen cut was chosen. `checked`: measurement could
// overrule the prediction; `overruled`: the first candidate it overruled.
std::string chosen_because(const SplitReport& r, const Pricing& pricing, const SplitOptions& options, bool checked,
                           const std::string& overruled) {
  if (options.mode != SplitMode::kExtended) return std::string("mode ") + r.mode + " asks for this cut";
  const auto chosen = std::find_if(r.candidates.begin(), r.candidates.end(),
                                   [](const CandidateCut& c) { return c.outcome == "chosen"; });
  if (r.fell_back)
    return "measurement overruled the predicted best: " + overruled + "; " + chosen->name +
           (chosen->name == "dataset" ? " (the reference) stands" : " measured faster");
  const CandidateCut& best = r.candidates.front();
  std::string because = "lowest predicted " + r.trainer_device + " trainer cost at batch " +
                        std::to_string(r.priced_batch_size) + ": " + ms_text(best.trainer_ms) +
                        " ms of stateless nodes + " + ms_text(best.network_ms) + " ms network" +
                        (pricing.device == TrainerDevice::kCuda
                             ? " + " + ms_text(best.host_to_device_ms) + " ms host-to-device"
                             : "") +
                        " per batch";
  if (r.candidates.size() > 1) {
    const CandidateCut& next = r.candidates[1];
    because += ", against " + ms_text(next.total_ms()) + " ms for " + next.name;
  }
  if (options.measure && !checked)
    because += "; not checked by measurement (the trainer is a GPU; the CPU timings here are not its own)";
  return because;
}

}  // namespace

std::string ms_text(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f", ms);
  return buf;
}

std::vector<NamedCut> list_candidates(const PricedRegion& region, const Pricing& pricing,
                                      const SplitOptions& options, SplitReport* r) {
  const CutProblem& problem = region.problem;
  std::vector<NamedCut> candidates;
  if (options.mode == SplitMode::kExtended) candidates = candidate_cuts(problem);
  const std::vector<bool> nothing(region.stateless.nodes.size(), false);
  if (options.mode == SplitMode::kDataset) candidates.push_back({"dataset", {nothing, cut_cost(problem, nothing)}});
  if (options.mode == SplitMode::kMax) candidates.push_back({"max", choose_max_cut(problem)});
  for (const auto& c : candidates) {
    CandidateCut cc;
    cc.name = c.name;
    cc.nodes_moved = model_nodes_moved(region.stateless.nodes, c.choice.moved);
    const double bytes = crossing_bytes(problem, c.choice.moved);
    cc.bytes_per_sample = bytes / pricing.batch;
    cc.trainer_ms = trainer_part(problem, c.choice.moved);
    const TransferMs t = transfer_ms(bytes, pricing);
    cc.network_ms = t.network;
    cc.host_to_device_ms = t.host_to_device;
    cc.outcome = "not tried";
    r->candidates.push_back(cc);
  }
  r->predicted_ms_saved_per_batch = cut_cost(problem, nothing) - cut_cost(problem, candidates.front().choice.moved);
  return candidates;
}

// Never lose: the cheapest candidate is extracted and measured; while the
// trainer's own measurement says it is not faster than dataset mode by the
// margin, the next one is (at most three measured, then dataset mode, the
// reference, which needs no measuring to stand).
Expected<ChosenSplit> choose_cut(const torch::jit::Module& model, const BoundExample& bound, Analysis* a,
                                 const PricedRegion& region, const std::vector<NamedCut>& candidates,
                                 const Pricing& pricing, const SplitOptions& options, SplitReport* r) {
  const bool check = options.measure && options.mode == SplitMode::kExtended &&
                     options.trainer_device == TrainerDevice::kCpu;
  const size_t dataset_at = static_cast<size_t>(
      std::find_if(candidates.begin(), candidates.end(), [](const NamedCut& c) { return c.name == "dataset"; }) -
      candidates.begin());
  CutExtractor extractor(model, bound, a, region, options);
  std::string overruled;
  int measured_tries = 0;
  for (size_t pick = 0;;) {
    auto extraction = extractor.extract(candidates[pick].choice.moved, r);
    if (!extraction.ok()) return extraction.status();
    ChosenSplit chosen{extraction->worker, extraction->trainer};
    if (options.measure) {
      try {
        measure(save_bytes(chosen.worker), save_bytes(chosen.trainer), options.method, bound.example,
                std::max(1, options.repeat), /*cut_only=*/measured_tries > 0, r);
      } catch (const std::exception& e) {
        return Status::error("the example does not run through the model: " + torch_error_text(e));
      }
      ++measured_tries;
    }
    r->transfer_ms = transfer_ms(r->bytes_per_sample_after * static_cast<double>(bound.batch), pricing).total();
    CandidateCut& cc = r->candidates[pick];
    if (options.measure) {
      cc.measured_trainer_ms = r->trainer_ms;
      cc.measured_dataset_ms = r->trainer_ms_dataset;
    }
    // Dataset mode is the reference: it needs no check.
    if (!check || pick >= dataset_at || beats_dataset(*r, pricing, options, &cc)) {
      cc.outcome = "chosen";
      r->chosen_because = chosen_because(*r, pricing, options, check, overruled);
      return chosen;
    }
    if (overruled.empty()) overruled = cc.name + " " + cc.outcome;
    r->fell_back = true;
    pick = measured_tries >= 3 ? dataset_at : pick + 1;
  }
}

}  // namespace goldminer::split
