// Measurement of a split (measure.h): the worker and trainer programs, and
// the model in dataset mode, timed on the example.
#include "tw_lib/split/measure.h"

#include <time.h>

#include <algorithm>
#include <optional>
#include <sstream>

#include "tw_lib/split/program_util.h"

namespace goldminer::split {
namespace {

double cpu_ms() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
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

}  // namespace

void measure(const std::string& worker_bytes, const std::string& trainer_bytes, const std::string& method,
             const std::vector<IValue>& example, int repeat, bool cut_only, SplitReport* r) {
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
  if (!cut_only) {
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
  }
  // Dataset mode's trainer and this split's, run by turns so that a change
  // of load on the machine weighs on both (the never-lose check compares them).
  const std::vector<IValue> cut = cut_of(clone_all(example));
  std::vector<double> dataset_ms, split_ms;
  for (int i = 0; i < repeat + 3; ++i) {  // three warm-up runs each, as time_cpu
    std::vector<IValue> in = clone_all(transformed);
    double t = cpu_ms();
    train_step_loss(model_method(in));
    zero_grads(p.model);
    const double dataset = cpu_ms() - t;
    in = clone_all(cut);
    t = cpu_ms();
    train_step_loss(trainer.forward(in));
    zero_grads(trainer);
    const double mine = cpu_ms() - t;
    if (i >= 3) {
      dataset_ms.push_back(dataset);
      split_ms.push_back(mine);
    }
  }
  r->trainer_ms_dataset = median(dataset_ms);
  r->trainer_ms = median(split_ms);
  r->worker_ms = time_cpu(repeat, prepare_x, [&](std::vector<IValue>& x) { cut_of(x); });
  r->trainer_ms_saved_per_batch = r->trainer_ms_local - r->trainer_ms;
  r->measured = true;
}

}  // namespace goldminer::split
