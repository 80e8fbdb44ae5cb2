#include "sim/simulator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <random>

#include "gmcore/autosizer.h"
#include "gmcore/dw_allocation.h"
#include "gmcore/placement.h"

namespace goldminer::sim {
namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

// GPU-time integrals, in milli-GPU seconds, over the whole run and over the
// time during which some GPU job waits in the queue.
struct Usage {
  double gpu_time = 0, effective_time = 0;
  double contended_time = 0, contended_gpu_time = 0, contended_effective_time = 0;
};

struct Job {
  const TracePod* pod = nullptr;
  double arrival = 0;
  int64_t gpu = 0;          // milli-GPU
  int64_t cpu_request = 0;  // milli-CPU as in the trace
  int64_t cpu_on_node = 0;  // what the job holds on its node under the policy
  int64_t pre_cpu = 0;      // pre-processing moved to data workers (goldminer)
  double work = 0;          // seconds at full speed
  double remaining = 0;
  double speed = 1;
  int workers = 0;
  std::unique_ptr<Autosizer> autosizer;
  int node = -1;
  double start = -1, finish = -1;
  bool blocked_by_cpu = false;
  double cpu_short_wait = 0;
};

class Simulation {
 public:
  Simulation(const std::vector<TraceNode>& nodes, const SimOptions& options)
      : options_(options) {
    placement_.cpus_per_gpu = options.model.trainer_cpus_per_gpu;
    for (const auto& n : nodes) {
      NodeResources r;
      r.cpu_total = r.cpu_free = n.cpu_milli;
      r.gpu_total = r.gpu_free = int64_t{n.gpus} * 1000;
      all_nodes_.push_back(static_cast<int>(nodes_.size()));
      nodes_.push_back(r);
      total_gpu_ += r.gpu_total;
    }
    dirty_.assign(nodes_.size(), 0);
    dw_cpu_ = static_cast<int64_t>(std::llround(options.model.cpus_per_dw * 1000));
  }

  bool goldminer() const { return options_.policy != Policy::kBundled; }

  // Adds the pods that ran in the trace and fit some node, at the offered
  // load the options ask for (see SimOptions::load).
  void add_jobs(const std::vector<TracePod>& pods, SimResult* result) {
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
      gpu_work += static_cast<double>(p->gpu_total_milli()) * work_of(*p);
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
      const int whole = static_cast<int>(std::floor(copies));
      const double partial = copies - whole;
      const int layers = whole + (partial > 0 ? 1 : 0);
      std::mt19937_64 rng(options_.seed);
      auto uniform = [&rng] { return static_cast<double>(rng() >> 11) * 0x1p-53; };
      for (int k = 0; k < layers; ++k) {
        const double shift = k == 0 ? 0 : span * uniform();
        for (const TracePod* p : admitted) {
          if (k == whole && uniform() >= partial) continue;
          double t = std::fmod(static_cast<double>(p->creation_time - first) + shift, span);
          jobs_.push_back(make_job(*p, t));
        }
      }
      gpu_work = 0;
      for (const Job& j : jobs_) gpu_work += static_cast<double>(j.gpu) * j.work;
      result->offered_load = gpu_work / (static_cast<double>(total_gpu_) * span);
    }
    std::stable_sort(jobs_.begin(), jobs_.end(),
                     [](const Job& a, const Job& b) { return a.arrival < b.arrival; });
  }

  Expected<SimResult> run(SimResult result) {
    size_t next_arrival = 0;
    Usage usage;
    double decision_s = 0;
    bool gpu_job_waiting = false;
    size_t first_new = 0;
    while (next_arrival < jobs_.size() || !running_.empty()) {
      double t_arrival = next_arrival < jobs_.size() ? jobs_[next_arrival].arrival : kNever;
      double t_finish = kNever;
      for (int i : running_)
        if (jobs_[i].speed > 0) t_finish = std::min(t_finish, now_ + jobs_[i].remaining / jobs_[i].speed);
      double t = std::min(t_arrival, t_finish);
      if (t == kNever)
        return Status::error("goldminer-sim: stalled at t=" + std::to_string(now_) +
                             ": running jobs make no progress and nothing arrives");
      // Advance every running job to t.
      double dt = t - now_;
      double held = 0, effective = 0;
      for (int i : running_) {
        Job& j = jobs_[i];
        j.remaining -= j.speed * dt;
        held += static_cast<double>(j.gpu);
        effective += static_cast<double>(j.gpu) * j.speed;
      }
      usage.gpu_time += held * dt;
      usage.effective_time += effective * dt;
      if (gpu_job_waiting) {
        usage.contended_time += dt;
        usage.contended_gpu_time += held * dt;
        usage.contended_effective_time += effective * dt;
      }
      for (int i : queue_)
        if (jobs_[i].blocked_by_cpu) jobs_[i].cpu_short_wait += dt;
      now_ = t;

      // Completions (tolerance: a job due now within float error).
      for (size_t k = 0; k < running_.size();) {
        Job& j = jobs_[running_[k]];
        if (j.remaining <= 1e-6 * j.work) {
          j.finish = now_;
          release(j);
          running_[k] = running_.back();
          running_.pop_back();
        } else {
          ++k;
        }
      }
      first_new = queue_.size();
      while (next_arrival < jobs_.size() && jobs_[next_arrival].arrival <= now_)
        queue_.push_back(static_cast<int>(next_arrival++));

      auto t0 = std::chrono::steady_clock::now();
      schedule(first_new);
      if (goldminer()) allocate_data_workers();
      decision_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      ++result.events;

      double now_held = 0;
      for (int i : running_) now_held += static_cast<double>(jobs_[i].gpu);
      result.timeline.push_back({now_, now_held / static_cast<double>(total_gpu_)});
      gpu_job_waiting = false;
      for (int i : queue_) gpu_job_waiting |= jobs_[i].gpu > 0;
    }
    if (!queue_.empty())
      return Status::error("goldminer-sim: stalled: " + std::to_string(queue_.size()) +
                           " queued jobs can never start");
    summarize(usage, decision_s, &result);
    return result;
  }

 private:
  static double work_of(const TracePod& p) { return std::max<double>(1.0, static_cast<double>(p.run_time())); }

  // CPUs the job holds on its own node under the policy.
  int64_t cpu_on_node(const TracePod& p) const {
    if (!goldminer() || p.gpu_total_milli() == 0) return p.cpu_milli;
    int64_t trainer = static_cast<int64_t>(
        std::ceil(static_cast<double>(p.gpu_total_milli()) * options_.model.trainer_cpus_per_gpu));
    return std::min(p.cpu_milli, trainer);
  }

  // Some node could hold the pod when empty (CPU-only pods outside the
  // reserve under the goldminer policies).
  bool placeable(const TracePod& p) const {
    for (const auto& n : nodes_) {
      if (n.gpu_total < p.gpu_total_milli()) continue;
      NodeResources empty{n.cpu_total, n.cpu_total, n.gpu_total, n.gpu_total};
      int64_t usable = goldminer() && p.gpu_total_milli() == 0 ? spare_cpu(empty, placement_) : n.cpu_total;
      if (usable >= cpu_on_node(p)) return true;
    }
    return false;
  }

  Job make_job(const TracePod& p, double arrival) const {
    Job j;
    j.pod = &p;
    j.arrival = arrival;
    j.gpu = p.gpu_total_milli();
    j.cpu_request = p.cpu_milli;
    j.work = work_of(p);
    j.remaining = j.work;
    j.cpu_on_node = cpu_on_node(p);
    j.pre_cpu = j.cpu_request - j.cpu_on_node;
    if (options_.policy == Policy::kGoldminerJobLevel && j.pre_cpu > 0) {
      AutosizerConfig c;
      c.min_workers = 0;
      c.max_workers = options_.model.dw_max;
      c.patience = 1;  // the simulator's metrics are exact, not noisy
      j.autosizer = std::make_unique<Autosizer>(c);
    }
    return j;
  }

  // CPUs a job may take on `n` under the policy: CPU-only jobs respect the
  // reserve under goldminer; GPU jobs use the reserve (it is theirs).
  int64_t usable_cpu(const NodeResources& n, const Job& j) const {
    if (goldminer() && j.gpu == 0) return spare_cpu(n, placement_);
    return n.cpu_free;
  }

  // Best fit among `candidates` (node indices): the node left with the
  // fewest free GPUs, then the fewest CPUs; -1 if none fits.
  int choose_node(const Job& j, const std::vector<int>& candidates) const {
    int best = -1;
    int64_t best_gpu = 0, best_cpu = 0;
    for (int i : candidates) {
      const NodeResources& n = nodes_[i];
      if (n.gpu_free < j.gpu || usable_cpu(n, j) < j.cpu_on_node) continue;
      int64_t gpu_left = n.gpu_free - j.gpu, cpu_left = n.cpu_free - j.cpu_on_node;
      if (best < 0 || gpu_left < best_gpu || (gpu_left == best_gpu && cpu_left < best_cpu)) {
        best = i;
        best_gpu = gpu_left;
        best_cpu = cpu_left;
      }
    }
    return best;
  }

  // Starts queued jobs in arrival order. Jobs queued before this event were
  // tried on every node when they arrived or last had a chance, and only
  // nodes that released resources since (dirty) can hold them now; new
  // arrivals (from queue_[first_new] on) are tried on every node.
  void schedule(size_t first_new) {
    std::vector<int> dirty;
    for (int i = 0; i < static_cast<int>(nodes_.size()); ++i)
      if (dirty_[i]) dirty.push_back(i), dirty_[i] = 0;
    std::vector<int> still;
    still.reserve(queue_.size());
    for (size_t k = 0; k < queue_.size(); ++k) {
      int i = queue_[k];
      Job& j = jobs_[i];
      int node = choose_node(j, k < first_new ? dirty : all_nodes_);
      if (node < 0) {
        still.push_back(i);
        continue;
      }
      NodeResources& n = nodes_[node];
      n.gpu_free -= j.gpu;
      n.cpu_free -= j.cpu_on_node;
      j.node = node;
      j.start = now_;
      j.speed = j.pre_cpu > 0 ? 0 : 1;  // set by the worker allocation below
      running_.push_back(i);
    }
    queue_.swap(still);
    // A GPU job still queued while some node has its GPUs free waits for CPUs.
    int64_t max_gpu_free = 0;
    for (const auto& n : nodes_) max_gpu_free = std::max(max_gpu_free, n.gpu_free);
    for (int i : queue_) jobs_[i].blocked_by_cpu = jobs_[i].gpu > 0 && jobs_[i].gpu <= max_gpu_free;
  }

  void release(Job& j) {
    dirty_[j.node] = 1;
    NodeResources& n = nodes_[j.node];
    n.gpu_free += j.gpu;
    n.cpu_free += j.cpu_on_node;
    j.workers = 0;
  }

  // Data-worker slots: whole workers that fit in each node's spare CPUs.
  int64_t worker_capacity_cpu() const {
    int64_t total = 0;
    for (const auto& n : nodes_) total += spare_cpu(n, placement_) / dw_cpu_ * dw_cpu_;
    return total;
  }

  double gain_per_worker(const Job& j) const {
    return static_cast<double>(dw_cpu_) * options_.model.remote_efficiency /
           static_cast<double>(j.pre_cpu);
  }

  void allocate_data_workers() {
    std::vector<int> elastic;
    for (int i : running_)
      if (jobs_[i].pre_cpu > 0) elastic.push_back(i);
    int64_t capacity = worker_capacity_cpu();
    std::vector<int> counts(elastic.size(), 0);
    if (options_.policy == Policy::kGoldminer) {
      std::vector<DwClaim> claims;
      claims.reserve(elastic.size());
      for (int i : elastic) {
        const Job& j = jobs_[i];
        DwClaim c;
        c.remaining_work = std::max(0.0, j.remaining);
        c.base_speed = 0;
        c.gain_per_worker = gain_per_worker(j);
        c.cpu_per_worker = dw_cpu_;
        c.min_workers = options_.model.dw_floor;
        c.max_workers = options_.model.dw_max;
        claims.push_back(c);
      }
      counts = allocate_workers(claims, capacity);
    } else {
      // Job level: each job's autosizer asks, earlier-started jobs first.
      // The autosizer observes every few seconds and queue metrics settle
      // in seconds, while jobs run for minutes or more: it may converge at
      // each event (a few observations of the exact metrics).
      std::stable_sort(elastic.begin(), elastic.end(),
                       [&](int a, int b) { return jobs_[a].start < jobs_[b].start; });
      int64_t left = capacity;
      for (size_t k = 0; k < elastic.size(); ++k) {
        Job& j = jobs_[elastic[k]];
        const double g = gain_per_worker(j);
        int workers = std::min<int64_t>(j.workers, left / dw_cpu_);
        for (int round = 0; round < 4; ++round) {
          QueueMetrics m;
          m.workers = workers;
          m.per_worker_rate = g;
          m.arrival_rate = workers * g;
          m.consumption_rate = std::min(1.0, m.arrival_rate);
          m.trainer_wait_fraction = 1.0 - m.consumption_rate;
          m.queue_fill = m.arrival_rate > 1.0 ? 1.0 : 0.0;
          int wanted = std::max(0, workers + j.autosizer->observe(m));
          int granted = static_cast<int>(std::min<int64_t>(wanted, left / dw_cpu_));
          if (granted == workers) break;
          workers = granted;
        }
        counts[k] = workers;
        left -= workers * dw_cpu_;
      }
    }
    for (size_t k = 0; k < elastic.size(); ++k) {
      Job& j = jobs_[elastic[k]];
      j.workers = counts[k];
      j.speed = std::min(1.0, j.workers * gain_per_worker(j));
    }
  }

  void summarize(const Usage& usage, double decision_s, SimResult* r) {
    std::vector<double> jct;
    double queue_sum = 0, gpu_jct = 0, short_wait = 0;
    double first = kNever, last = 0;
    for (const Job& j : jobs_) {
      jct.push_back(j.finish - j.arrival);
      queue_sum += j.start - j.arrival;
      first = std::min(first, j.arrival);
      last = std::max(last, j.finish);
      if (j.gpu > 0) {
        ++r->gpu_jobs;
        gpu_jct += j.finish - j.arrival;
        short_wait += j.cpu_short_wait;
      }
    }
    r->jobs = static_cast<int>(jobs_.size());
    r->gpus = static_cast<double>(total_gpu_) / 1000.0;
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
    r->cpu_short_wait_s = r->gpu_jobs ? short_wait / r->gpu_jobs : 0;
    r->makespan_s = last - first;
    // Allocation while GPU jobs wait is what stranding costs; a run in which
    // none ever waits is measured over its whole makespan.
    const double total = static_cast<double>(total_gpu_);
    if (usage.contended_time > 0) {
      r->gpu_alloc_rate = usage.contended_gpu_time / (total * usage.contended_time);
      r->gpu_effective_rate = usage.contended_effective_time / (total * usage.contended_time);
    } else {
      double capacity_time = total * std::max(1e-9, r->makespan_s);
      r->gpu_alloc_rate = usage.gpu_time / capacity_time;
      r->gpu_effective_rate = usage.effective_time / capacity_time;
    }
    r->contended_share = r->makespan_s > 0 ? usage.contended_time / r->makespan_s : 0;
    r->decision_us_per_event = r->events ? decision_s * 1e6 / static_cast<double>(r->events) : 0;
  }

 private:
  SimOptions options_;
  double now_ = 0;
  PlacementConfig placement_;
  std::vector<NodeResources> nodes_;
  std::vector<int> all_nodes_;  // 0 .. nodes_.size() - 1
  std::vector<char> dirty_;     // released resources since the last schedule
  std::vector<Job> jobs_;
  std::vector<int> queue_;    // indices into jobs_, arrival order
  std::vector<int> running_;  // indices into jobs_
  int64_t total_gpu_ = 0;
  int64_t dw_cpu_ = 1000;
};

}  // namespace

Expected<Policy> parse_policy(const std::string& name) {
  if (name == "bundled") return Policy::kBundled;
  if (name == "goldminer") return Policy::kGoldminer;
  if (name == "goldminer-joblevel") return Policy::kGoldminerJobLevel;
  return Status::error("goldminer-sim: --policy: invalid value '" + name +
                       "': expected one of bundled, goldminer, goldminer-joblevel");
}

const char* policy_name(Policy policy) {
  switch (policy) {
    case Policy::kBundled: return "bundled";
    case Policy::kGoldminer: return "goldminer";
    case Policy::kGoldminerJobLevel: return "goldminer-joblevel";
  }
  return "unknown";
}

Expected<SimResult> simulate(const std::vector<TracePod>& pods, const std::vector<TraceNode>& nodes,
                             const SimOptions& options) {
  if (nodes.empty()) return Status::error("goldminer-sim: no nodes to simulate");
  if (options.model.cpus_per_dw <= 0 || options.model.remote_efficiency <= 0 ||
      options.model.trainer_cpus_per_gpu < 0)
    return Status::error("goldminer-sim: job model parameters must be positive");
  SimResult result;
  result.policy = policy_name(options.policy);
  Simulation sim(nodes, options);
  sim.add_jobs(pods, &result);
  return sim.run(std::move(result));
}

std::string to_json(const SimResult& r) {
  char buf[2048];
  std::snprintf(buf, sizeof(buf),
                "{\"policy\": \"%s\", \"jobs\": %d, \"gpus\": %.0f, \"avg_jct_s\": %.1f, "
                "\"p50_jct_s\": %.1f, \"p95_jct_s\": %.1f, \"p99_jct_s\": %.1f, "
                "\"avg_queue_s\": %.1f, \"gpu_alloc_rate\": %.4f, \"gpu_effective_rate\": %.4f, "
                "\"cpu_short_wait_s\": %.1f, \"makespan_s\": %.1f, \"gpu_jobs\": %d, "
                "\"avg_jct_gpu_s\": %.1f, \"offered_load\": %.4f, \"unplaceable_jobs\": %d, "
                "\"never_ran_jobs\": %d, \"contended_share\": %.4f, \"events\": %lld, "
                "\"decision_us_per_event\": %.2f}",
                r.policy.c_str(), r.jobs, r.gpus, r.avg_jct_s, r.p50_jct_s, r.p95_jct_s,
                r.p99_jct_s, r.avg_queue_s, r.gpu_alloc_rate, r.gpu_effective_rate,
                r.cpu_short_wait_s, r.makespan_s, r.gpu_jobs, r.avg_jct_gpu_s, r.offered_load,
                r.unplaceable, r.never_ran, r.contended_share, static_cast<long long>(r.events),
                r.decision_us_per_event);
  return buf;
}

}  // namespace goldminer::sim
