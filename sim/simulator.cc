#include "sim/simulator.h"

#include <chrono>
#include <random>

#include "sched/dw_allocation.h"
#include "sim/random.h"
#include "sim/simulation.h"

namespace goldminer::sim::internal {

// Adds the pods that ran in the trace and fit some node, at the offered
// load the options ask for (see SimOptions::load).
void Simulation::add_jobs(const std::vector<TracePod>& pods, SimResult* result) {
  std::vector<const TracePod*> admitted;
  for (const auto& p : pods) {
    if (!p.scheduled) {
      ++result->never_ran;
    } else if (!placeable(p)) {
      ++result->unplaceable;
    } else {
      admitted.push_back(&p);
    }
  }
  if (admitted.empty()) return;
  int64_t first = admitted.front()->creation_time, last = first;
  double gpu_work = 0;
  for (const TracePod* p : admitted) {
    first = std::min(first, p->creation_time);
    last = std::max(last, p->creation_time);
    gpu_work += static_cast<double>(p->gpu_total_milli()) * trace_time(*p);
  }
  const double span = std::max<double>(1.0, static_cast<double>(last - first));
  const double natural = gpu_work / (static_cast<double>(total_gpu_) * span);
  result->offered_load = natural;
  if (options_.load <= 0 || natural <= 0) {
    for (const TracePod* p : admitted)
      jobs_.push_back(make_job(*p, static_cast<double>(p->creation_time - first)));
  } else {
    // Overlay copies of the trace, each shifted by a seeded uniform offset
    // and wrapped into its span, until the offered load is reached; the
    // last copy is partial (each pod kept with the fractional
    // probability). Random offsets keep arrivals bursty, as they are.
    const double copies = options_.load / natural;
    if (copies * static_cast<double>(admitted.size()) > kMaxJobs) {
      error_ = "goldminer-sim: --load " + std::to_string(options_.load) + " needs " +
               std::to_string(copies) + " copies of " + std::to_string(admitted.size()) +
               " jobs, more than " + std::to_string(static_cast<int64_t>(kMaxJobs)) +
               " jobs in all (offered load of the trace as it is: " + std::to_string(natural) + ")";
      return;
    }
    const int whole = static_cast<int>(std::floor(copies));
    const double partial = copies - whole;
    const int layers = whole + (partial > 0 ? 1 : 0);
    std::mt19937_64 rng(options_.seed);
    for (int k = 0; k < layers; ++k) {
      const double shift = k == 0 ? 0 : span * uniform01(rng);
      for (const TracePod* p : admitted) {
        if (k == whole && uniform01(rng) >= partial) continue;
        double t = static_cast<double>(p->creation_time - first);
        if (shift > 0) t = std::fmod(t + shift, span);
        jobs_.push_back(make_job(*p, t));
      }
    }
    gpu_work = 0;
    for (const Job& j : jobs_) gpu_work += static_cast<double>(j.gpu) * trace_time(*j.pod);
    result->offered_load = gpu_work / (static_cast<double>(total_gpu_) * span);
  }
  std::stable_sort(jobs_.begin(), jobs_.end(),
                   [](const Job& a, const Job& b) { return a.arrival < b.arrival; });
}

Expected<SimResult> Simulation::run(SimResult result) {
  if (!error_.empty()) return Status::error(error_);
  // A job is submitted at its arrival and may start dispatch_s later
  // (the same for every job, so both keep arrival order).
  const double dispatch = options_.model.dispatch_s;
  size_t next_submit = 0, next_arrival = 0;
  double decision_s = 0;
  while (next_arrival < jobs_.size() || running_ > 0) {
    double t_submit = next_submit < jobs_.size() ? jobs_[next_submit].arrival : kNever;
    double t_arrival = next_arrival < jobs_.size() ? jobs_[next_arrival].arrival + dispatch : kNever;
    drop_stale_finishes();
    double t_finish = finishes_.empty() ? kNever : finishes_.top().time;
    double t_wakeup = wakeups_.empty() ? kNever : wakeups_.top().first;
    double t_window = windows_.empty() ? kNever : windows_.top().time;
    double t = std::min({t_submit, t_arrival, t_finish, t_wakeup, t_window});
    if (t == kNever)
      return Status::error("goldminer-sim: stalled at t=" + std::to_string(now_) +
                           ": running jobs make no progress and nothing arrives");
    account(t - now_);
    now_ = t;

    bool finished = false;
    while (!finishes_.empty() && finishes_.top().time <= now_) {
      FinishEvent e = finishes_.top();
      finishes_.pop();
      if (e.stamp == jobs_[e.job].stamp && jobs_[e.job].finish < 0) {
        finish(e.job);
        finished = true;
      }
    }
    while (!wakeups_.empty() && wakeups_.top().first <= now_) {
      const int i = wakeups_.top().second;
      wakeups_.pop();
      wake(i);
    }
    while (!windows_.empty() && windows_.top().time <= now_) {
      const WindowEvent e = windows_.top();
      windows_.pop();
      if (e.stamp == jobs_[e.job].window_stamp && jobs_[e.job].finish < 0) window_event(e.job);
    }
    for (; next_submit < jobs_.size() && jobs_[next_submit].arrival <= now_; ++next_submit)
      dispatching_gpu_ += jobs_[next_submit].gpu > 0;
    std::vector<int> arrivals;
    for (; next_arrival < jobs_.size() && jobs_[next_arrival].arrival + dispatch <= now_; ++next_arrival) {
      arrivals.push_back(static_cast<int>(next_arrival));
      dispatching_gpu_ -= jobs_[next_arrival].gpu > 0;
    }

    // A job or worker that began to deliver frees and asks for nothing.
    if (finished || !arrivals.empty() || reallocate_) {
      auto t0 = std::chrono::steady_clock::now();
      schedule(arrivals);
      if (goldminer()) allocate_data_workers();
      decision_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    ++result.events;
    result.timeline.push_back({now_, held_gpu_ / static_cast<double>(total_gpu_)});
  }
  if (queued_ > 0)
    return Status::error("goldminer-sim: stalled: " + std::to_string(queued_) +
                         " queued jobs can never start");
  summarize(decision_s, &result);
  return result;
}

// CPUs a GPU job's trainer needs next to its GPUs (0 for CPU-only jobs).
int64_t Simulation::trainer_cpu(const TracePod& p) const {
  if (p.gpu_total_milli() == 0) return 0;
  int64_t t = static_cast<int64_t>(
      std::ceil(static_cast<double>(p.gpu_total_milli()) * options_.model.trainer_cpus_per_gpu));
  return std::min(p.cpu_milli, t);
}

// milli-CPUs a GPU job needs in all for full speed, its trainer's
// included (calibrated model).
int64_t Simulation::total_cpu_need(const TracePod& p) const {
  double d = calibrated_cpus_per_gpu(p, options_.model.calibrated, options_.seed);
  d = std::max(d, options_.model.trainer_cpus_per_gpu);
  return static_cast<int64_t>(std::llround(d * static_cast<double>(p.gpu_total_milli())));
}

// CPUs of pre-processing a GPU job needs to run at full speed: under the
// calibrated model its whole need minus its trainer's; under the request
// model what its request left after the trainer, times cpu_demand_factor.
int64_t Simulation::pre_cpu_need(const TracePod& p) const {
  if (p.gpu_total_milli() == 0) return 0;
  if (calibrated()) return std::max<int64_t>(0, total_cpu_need(p) - trainer_cpu(p));
  double given = static_cast<double>(p.cpu_milli - trainer_cpu(p));
  return static_cast<int64_t>(std::llround(options_.model.cpu_demand_factor * given));
}

// The job's speed with the CPUs it asked for, all on its node (bundled):
// the speed at which the trace saw it run.
double Simulation::bundled_speed(const TracePod& p) const {
  if (p.gpu_total_milli() == 0) return 1.0;
  if (calibrated())
    return std::min(1.0, static_cast<double>(p.cpu_milli) / static_cast<double>(total_cpu_need(p)));
  int64_t need = pre_cpu_need(p);
  if (need == 0) return 1.0;
  return std::min(1.0, static_cast<double>(p.cpu_milli - trainer_cpu(p)) / static_cast<double>(need));
}

// CPUs the job holds on its own node under the policy.
int64_t Simulation::cpu_on_node(const TracePod& p) const {
  return goldminer() && p.gpu_total_milli() > 0 ? trainer_cpu(p) : p.cpu_milli;
}

// Some node could hold the pod when empty (CPU-only pods outside the
// reserve under the goldminer policies).
bool Simulation::placeable(const TracePod& p) const {
  for (const auto& n : nodes_) {
    if (n.gpu_total < p.gpu_total_milli()) continue;
    NodeResources empty{n.cpu_total, n.cpu_total, n.gpu_total, n.gpu_total};
    int64_t usable = goldminer() && p.gpu_total_milli() == 0 ? spare_cpu(empty, placement_) : n.cpu_total;
    if (usable >= cpu_on_node(p)) return true;
  }
  return false;
}

Job Simulation::make_job(const TracePod& p, double arrival) const {
  Job j;
  j.pod = &p;
  j.arrival = arrival;
  j.gpu = p.gpu_total_milli();
  j.work = work_of(p);
  j.remaining = j.work;
  j.cpu_on_node = cpu_on_node(p);
  j.pre_cpu = goldminer() ? pre_cpu_need(p) : 0;
  j.fixed_speed = goldminer() ? 1.0 : bundled_speed(p);
  if (j.pre_cpu > 0) {
    DwClaim c = claim_of(j);
    j.saturating = saturating_workers(c);
    j.curve = draw_speed_curve(options_.model.speed_curve, options_.model.concave, p, gain_per_worker(j),
                               options_.seed);
    j.useful = j.curve.useful(options_.model.dw_max);
    j.paying = j.curve.paying(options_.model.dw_max, AutosizerConfig().pay_fraction);
  }
  if (options_.policy == Policy::kGoldminerJobLevel && j.pre_cpu > 0) {
    AutosizerConfig c;
    c.min_workers = 0;
    c.max_workers = options_.model.dw_max;
    // Exact metrics: one observation is enough; noisy ones: its default.
    if (options_.model.measure_noise <= 0) c.patience = 1;
    j.autosizer = std::make_unique<Autosizer>(c);
  }
  return j;
}

DwClaim Simulation::claim_of(const Job& j) const {
  DwClaim c;
  c.remaining_work = std::max(0.0, remaining_now(j));
  c.base_speed = 0;
  c.gain_per_worker = gain_per_worker(j);
  c.cpu_per_worker = dw_cpu_;
  c.min_workers = options_.model.dw_floor;
  c.max_workers = options_.model.dw_max;
  return c;
}

}  // namespace goldminer::sim::internal
namespace goldminer::sim {

using internal::Simulation;

Expected<SimResult> simulate(const std::vector<TracePod>& pods, const std::vector<TraceNode>& nodes,
                             const SimOptions& options) {
  if (nodes.empty()) return Status::error("goldminer-sim: no nodes to simulate");
  bool any_gpu = false;
  for (const auto& n : nodes) any_gpu |= n.gpus > 0;
  if (!any_gpu) return Status::error("goldminer-sim: the node table has no GPUs");
  if (std::llround(options.model.cpus_per_dw * 1000) < 1)
    return Status::error("goldminer-sim: --cpus-per-dw: invalid value: expected at least 0.001");
  if (options.model.cpus_per_dw <= 0 || options.model.remote_efficiency <= 0 ||
      options.model.trainer_cpus_per_gpu < 0)
    return Status::error("goldminer-sim: job model parameters must be positive");
  if (!(options.model.measure_noise >= 0) || !(options.model.window_s > 0))
    return Status::error("goldminer-sim: --measure-noise must be >= 0 and --window-s > 0");
  if (!(options.model.job_start_s >= 0) || !(options.model.worker_start_s >= 0) || !(options.model.dispatch_s >= 0))
    return Status::error("goldminer-sim: --job-start-s, --worker-start-s and --dispatch-s: invalid value: "
                         "expected >= 0");
  SimResult result;
  result.policy = policy_name(options.policy);
  Simulation sim(nodes, options);
  sim.add_jobs(pods, &result);
  return sim.run(std::move(result));
}

}  // namespace goldminer::sim
