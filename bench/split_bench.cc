// split_bench: the two figures the split must show, from one run.
//   1. DLRM-style model (a): trainer CPU time per batch with the `dataset`
//      split (the trainer runs the feature transforms) against the
//      `extended` split (they run on data workers), and the ratio (goal >= 2x).
//   2. Analysis + split time of a ResNet-50-sized graph (goal < 50 ms).
// Driven by bench/split_bench.sh, which scripts the models and fixes the
// thread count; the assumptions are printed with the figures.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "goldminer/split.h"

using namespace goldminer;

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: split_bench DLRM.pt DLRM_EXAMPLE.pt RESNET50.pt RESNET50_EXAMPLE.pt [REPEAT]\n"
               "(bench/split_bench.sh writes the models and runs it)\n");
  return 2;
}

Expected<SplitReport> split(const SplitInputs& in, SplitMode mode, bool measure, int repeat) {
  SplitOptions options;
  options.mode = mode;
  options.measure = measure;
  options.repeat = repeat;
  // The figure is the trainer's CPU time: price for a CPU trainer, at the
  // fixed receive bandwidth the figure assumes.
  options.trainer_device = TrainerDevice::kCpu;
  options.transfer_gbps = 4.0;
  auto result = split_serialized(in, options);
  if (!result.ok()) return result.status();
  return result->report;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) return usage();
  const int repeat = argc > 5 ? std::max(1, std::atoi(argv[5])) : 20;
  SplitInputs dlrm, resnet;
  for (auto [in, model, example] : {std::make_tuple(&dlrm, argv[1], argv[2]), std::make_tuple(&resnet, argv[3], argv[4])}) {
    auto m = read_file_bytes(model);
    auto e = read_file_bytes(example);
    if (!m.ok() || !e.ok()) {
      std::fprintf(stderr, "split_bench: %s\n", (!m.ok() ? m.status() : e.status()).message().c_str());
      return 1;
    }
    in->model = *m;
    in->example = *e;
    in->model_name = model;
    in->example_name = example;
  }
  const char* threads = std::getenv("OMP_NUM_THREADS");
  std::printf("split_bench: assumptions: CPU time per batch = forward + backward of the trainer program, median of %d "
              "runs after 3 warm-ups; intra-op threads OMP_NUM_THREADS=%s; cut priced for a CPU trainer, transfer at 4 GB/s\n",
              repeat, threads ? threads : "(unset: torch default)");

  auto dataset = split(dlrm, SplitMode::kDataset, true, repeat);
  auto extended = split(dlrm, SplitMode::kExtended, true, repeat);
  auto max = split(dlrm, SplitMode::kMax, true, repeat);
  for (const auto* r : {&dataset, &extended, &max})
    if (!r->ok()) {
      std::fprintf(stderr, "split_bench: %s\n", r->status().message().c_str());
      return 1;
    }
  std::printf("\n(a) DLRM-style model, Criteo schema, batch %lld\n", static_cast<long long>(dataset->batch_size));
  std::printf("  %-9s %8s %10s %14s %14s %12s\n", "mode", "moved", "cut B/smp", "trainer ms", "worker ms",
              "transfer ms");
  for (const auto* r : {&dataset, &extended, &max})
    std::printf("  %-9s %8d %10.1f %14.3f %14.3f %12.3f\n", (*r)->mode.c_str(), (*r)->nodes_moved,
                (*r)->bytes_per_sample_after, (*r)->trainer_ms, (*r)->worker_ms, (*r)->transfer_ms);
  const double ratio = dataset->trainer_ms / extended->trainer_ms;
  const double ratio_with_transfer =
      (dataset->trainer_ms + dataset->transfer_ms) / (extended->trainer_ms + extended->transfer_ms);
  std::printf("  trainer CPU time per batch: dataset %.3f ms, extended %.3f ms, ratio %.2fx (goal >= 2x: %s)\n",
              dataset->trainer_ms, extended->trainer_ms, ratio, ratio >= 2 ? "met" : "NOT met");
  std::printf("  including the modelled receive cost of the cut: ratio %.2fx\n", ratio_with_transfer);

  // ResNet-50: analysis + split without measurement, median of runs.
  std::vector<double> total, analysis, wall;
  SplitReport last;
  for (int i = 0; i < std::max(5, repeat / 2); ++i) {
    auto start = std::chrono::steady_clock::now();
    auto r = split(resnet, SplitMode::kExtended, false, 1);
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (!r.ok()) {
      std::fprintf(stderr, "split_bench: %s\n", r.status().message().c_str());
      return 1;
    }
    total.push_back(r->analysis_ms + r->split_ms);
    analysis.push_back(r->analysis_ms);
    wall.push_back(ms);
    last = *r;
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const double m = median(total);
  std::printf("\n(b) ResNet-50 (torchvision), example batch %lld: %d nodes, %d stateless, %d moved\n",
              static_cast<long long>(last.batch_size), last.nodes_total, last.nodes_stateless, last.nodes_moved);
  std::printf("  analysis + split: %.2f ms median of %zu (analysis %.2f ms; goal < 50 ms: %s)\n", m, total.size(),
              median(analysis), m < 50 ? "met" : "NOT met");
  std::printf("  with loading the model bytes and saving both programs: %.2f ms\n", median(wall));
  return 0;
}
