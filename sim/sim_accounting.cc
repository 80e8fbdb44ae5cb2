#include "sim/simulation.h"

namespace goldminer::sim::internal {

// Integrates the GPU-time and waiting-time sums over `dt` of unchanged state.
void Simulation::account(double dt) {
  if (dt <= 0) return;
  usage_.gpu_time += held_gpu_ * dt;
  usage_.effective_time += effective_gpu_ * dt;
  usage_.worker_cpu += static_cast<double>(held_workers_ * dw_cpu_) * dt;
  usage_.wasted_worker_cpu += static_cast<double>(wasted_workers_ * dw_cpu_) * dt;
  usage_.unpaying_worker_cpu += static_cast<double>(unpaying_workers_ * dw_cpu_) * dt;
  // A GPU job being dispatched waits too (as a live run measures it:
  // submitted, not yet started), though not for CPUs.
  if (!queued_gpu_.empty() || dispatching_gpu_ > 0) {
    usage_.contended_time += dt;
    usage_.contended_gpu_time += held_gpu_ * dt;
    usage_.contended_effective_time += effective_gpu_ * dt;
    // GPU jobs waiting although some node has enough GPUs free: for CPUs.
    int64_t max_free = gpu_free_.empty() ? 0 : *gpu_free_.rbegin();
    int blocked = 0, queued = dispatching_gpu_;
    for (const auto& [size, count] : queued_gpu_) {
      queued += count;
      if (size <= max_free) blocked += count;
    }
    usage_.cpu_short_wait += blocked * dt;
    usage_.gpu_wait += queued * dt;
  }
}

JobRecord Simulation::record_of(const Job& j) const {
  const TracePod& p = *j.pod;
  JobRecord r;
  r.name = p.name;
  r.gpus = static_cast<double>(p.gpu_total_milli()) / 1000.0;
  r.cpus_requested = static_cast<double>(p.cpu_milli) / 1000.0;
  r.cpus_trainer = static_cast<double>(trainer_cpu(p)) / 1000.0;
  r.cpus_needed = p.gpu_total_milli() == 0 ? r.cpus_requested
                  : calibrated()           ? static_cast<double>(total_cpu_need(p)) / 1000.0
                                           : r.cpus_trainer + static_cast<double>(pre_cpu_need(p)) / 1000.0;
  r.work_s = j.work;
  r.bundled_speed = bundled_speed(p);
  r.arrival_s = j.arrival;
  r.start_s = j.start;
  r.finish_s = j.finish;
  return r;
}

void Simulation::summarize(double decision_s, SimResult* r) {
  std::vector<double> jct;
  double queue_sum = 0, gpu_jct = 0;
  double first = kNever, last = 0;
  int starved = 0;
  for (const Job& j : jobs_) {
    r->job_records.push_back(record_of(j));
    jct.push_back(j.finish - j.arrival);
    queue_sum += j.start - j.arrival;
    first = std::min(first, j.arrival);
    last = std::max(last, j.finish);
    if (j.gpu > 0) {
      ++r->gpu_jobs;
      gpu_jct += j.finish - j.arrival;
      starved += bundled_speed(*j.pod) < 1.0;
    }
  }
  r->jobs = static_cast<int>(jobs_.size());
  r->gpus = static_cast<double>(total_gpu_) / 1000.0;
  r->cpu_starved_share = r->gpu_jobs ? static_cast<double>(starved) / r->gpu_jobs : 0;
  r->worker_cpu_s = usage_.worker_cpu / 1000.0;
  r->wasted_worker_cpu_s = usage_.wasted_worker_cpu / 1000.0;
  r->unpaying_worker_cpu_s = usage_.unpaying_worker_cpu / 1000.0;
  r->undone_growths = undone_growths_;
  r->knees_above_useful = knees_above_useful_;
  if (jct.empty()) return;
  std::sort(jct.begin(), jct.end());
  auto pct = [&](double p) {
    size_t idx = static_cast<size_t>(std::ceil(p * static_cast<double>(jct.size()))) - 1;
    return jct[std::min(idx, jct.size() - 1)];
  };
  double sum = 0;
  for (double v : jct) sum += v;
  r->avg_jct_s = sum / static_cast<double>(jct.size());
  r->p50_jct_s = pct(0.50);
  r->p95_jct_s = pct(0.95);
  r->p99_jct_s = pct(0.99);
  r->avg_queue_s = queue_sum / static_cast<double>(jct.size());
  r->avg_jct_gpu_s = r->gpu_jobs ? gpu_jct / r->gpu_jobs : 0;
  r->cpu_short_wait_s = r->gpu_jobs ? usage_.cpu_short_wait / r->gpu_jobs : 0;
  r->gpu_wait_cpu_short_fraction = usage_.gpu_wait > 0 ? usage_.cpu_short_wait / usage_.gpu_wait : 0;
  r->makespan_s = last - first;
  // Allocation while GPU jobs wait is what stranding costs; a run in which
  // none ever waits is measured over its whole makespan.
  const double total = static_cast<double>(total_gpu_);
  if (usage_.contended_time > 0) {
    r->gpu_alloc_rate = usage_.contended_gpu_time / (total * usage_.contended_time);
    r->gpu_effective_rate = usage_.contended_effective_time / (total * usage_.contended_time);
  } else {
    double capacity_time = total * std::max(1e-9, r->makespan_s);
    r->gpu_alloc_rate = usage_.gpu_time / capacity_time;
    r->gpu_effective_rate = usage_.effective_time / capacity_time;
  }
  r->contended_share = r->makespan_s > 0 ? usage_.contended_time / r->makespan_s : 0;
  r->decision_us_per_event = r->events ? decision_s * 1e6 / static_cast<double>(r->events) : 0;
}

}  // namespace goldminer::sim::internal
