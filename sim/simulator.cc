#include "sim/simulator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <deque>
#include <map>
#include <memory>
#include <queue>
#include <random>
#include <set>

#include "sched/autosizer.h"
#include "sched/dw_allocation.h"
#include "sched/placement.h"
#include "sim/random.h"

namespace goldminer::sim {
namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();
constexpr double kMaxJobs = 2e7;  // --load replicas beyond this would exhaust memory

// GPU-time integrals, in milli-GPU seconds, over the whole run and over the
// time during which some GPU job waits in the queue.
struct Usage {
  double gpu_time = 0, effective_time = 0;
  double contended_time = 0, contended_gpu_time = 0, contended_effective_time = 0;
  double cpu_short_wait = 0;  // GPU-job seconds queued while GPUs were free
  double gpu_wait = 0;        // GPU-job seconds queued
};

struct Job {
  const TracePod* pod = nullptr;
  double arrival = 0;
  int64_t gpu = 0;          // milli-GPU
  int64_t cpu_on_node = 0;  // what the job holds on its node under the policy
  int64_t pre_cpu = 0;      // pre-processing moved to data workers (goldminer)
  double fixed_speed = 1;   // speed of a job without data workers
  double work = 0;          // seconds at full speed
  // Progress is lazy: `remaining` seconds of work were left at `updated`,
  // and the job has run at `speed` since.
  double remaining = 0;
  double updated = 0;
  double speed = 1;
  uint32_t stamp = 0;       // bumped when speed changes: older finish events are stale
  int workers = 0;          // allocated to it: delivering or starting
  int active = 0;           // of those, delivering
  std::deque<std::pair<double, int>> starting;  // (when they deliver, workers), in time order
  double ready_at = 0;      // start + job_start_s: from then on it makes progress
  int saturating = 0;       // workers that bring it to full speed
  int elastic_slot = -1;    // index in Simulation::elastic_, or -1
  std::unique_ptr<Autosizer> autosizer;
  int node = -1;
  double start = -1, finish = -1;
};

struct FinishEvent {
  double time;
  int job;
  uint32_t stamp;
  bool operator>(const FinishEvent& o) const { return time > o.time; }
};

class Simulation {
 public:
  Simulation(const std::vector<TraceNode>& nodes, const SimOptions& options)
      : options_(options) {
    placement_.cpus_per_gpu = options.model.trainer_cpus_per_gpu;
    dw_cpu_ = static_cast<int64_t>(std::llround(options.model.cpus_per_dw * 1000));
    for (const auto& n : nodes) {
      NodeResources r;
      r.cpu_total = r.cpu_free = n.cpu_milli;
      r.gpu_total = r.gpu_free = int64_t{n.gpus} * 1000;
      all_nodes_.push_back(static_cast<int>(nodes_.size()));
      nodes_.push_back(r);
      total_gpu_ += r.gpu_total;
      gpu_free_.insert(r.gpu_free);
      worker_capacity_ += worker_cpu_on(r);
    }
    dirty_flag_.assign(nodes_.size(), 0);
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

  Expected<SimResult> run(SimResult result) {
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
      double t = std::min({t_submit, t_arrival, t_finish, t_wakeup});
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
      for (; next_submit < jobs_.size() && jobs_[next_submit].arrival <= now_; ++next_submit)
        dispatching_gpu_ += jobs_[next_submit].gpu > 0;
      std::vector<int> arrivals;
      for (; next_arrival < jobs_.size() && jobs_[next_arrival].arrival + dispatch <= now_; ++next_arrival) {
        arrivals.push_back(static_cast<int>(next_arrival));
        dispatching_gpu_ -= jobs_[next_arrival].gpu > 0;
      }

      // A job or worker that began to deliver frees and asks for nothing.
      if (finished || !arrivals.empty()) {
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

 private:
  // Seconds the pod ran in the trace (at least 1): the GPU time it offers.
  static double trace_time(const TracePod& p) { return std::max<double>(1.0, static_cast<double>(p.run_time())); }

  // Seconds of work at full speed: the trace's run time at the speed the
  // trace's allocation gave the job.
  double work_of(const TracePod& p) const { return trace_time(p) * bundled_speed(p); }

  // CPUs a GPU job's trainer needs next to its GPUs (0 for CPU-only jobs).
  int64_t trainer_cpu(const TracePod& p) const {
    if (p.gpu_total_milli() == 0) return 0;
    int64_t t = static_cast<int64_t>(
        std::ceil(static_cast<double>(p.gpu_total_milli()) * options_.model.trainer_cpus_per_gpu));
    return std::min(p.cpu_milli, t);
  }

  bool calibrated() const { return options_.model.demand_model == DemandModel::kCalibrated; }

  // milli-CPUs a GPU job needs in all for full speed, its trainer's
  // included (calibrated model).
  int64_t total_cpu_need(const TracePod& p) const {
    double d = calibrated_cpus_per_gpu(p, options_.model.calibrated, options_.seed);
    d = std::max(d, options_.model.trainer_cpus_per_gpu);
    return static_cast<int64_t>(std::llround(d * static_cast<double>(p.gpu_total_milli())));
  }

  // CPUs of pre-processing a GPU job needs to run at full speed: under the
  // calibrated model its whole need minus its trainer's; under the request
  // model what its request left after the trainer, times cpu_demand_factor.
  int64_t pre_cpu_need(const TracePod& p) const {
    if (p.gpu_total_milli() == 0) return 0;
    if (calibrated()) return std::max<int64_t>(0, total_cpu_need(p) - trainer_cpu(p));
    double given = static_cast<double>(p.cpu_milli - trainer_cpu(p));
    return static_cast<int64_t>(std::llround(options_.model.cpu_demand_factor * given));
  }

  // The job's speed with the CPUs it asked for, all on its node (bundled):
  // the speed at which the trace saw it run.
  double bundled_speed(const TracePod& p) const {
    if (p.gpu_total_milli() == 0) return 1.0;
    if (calibrated())
      return std::min(1.0, static_cast<double>(p.cpu_milli) / static_cast<double>(total_cpu_need(p)));
    int64_t need = pre_cpu_need(p);
    if (need == 0) return 1.0;
    return std::min(1.0, static_cast<double>(p.cpu_milli - trainer_cpu(p)) / static_cast<double>(need));
  }

  // CPUs the job holds on its own node under the policy.
  int64_t cpu_on_node(const TracePod& p) const {
    return goldminer() && p.gpu_total_milli() > 0 ? trainer_cpu(p) : p.cpu_milli;
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

  double gain_per_worker(const Job& j) const {
    return static_cast<double>(dw_cpu_) * options_.model.remote_efficiency /
           static_cast<double>(j.pre_cpu);
  }

  Job make_job(const TracePod& p, double arrival) const {
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
    }
    if (options_.policy == Policy::kGoldminerJobLevel && j.pre_cpu > 0) {
      AutosizerConfig c;
      c.min_workers = 0;
      c.max_workers = options_.model.dw_max;
      c.patience = 1;  // the simulator's metrics are exact, not noisy
      j.autosizer = std::make_unique<Autosizer>(c);
    }
    return j;
  }

  DwClaim claim_of(const Job& j) const {
    DwClaim c;
    c.remaining_work = std::max(0.0, remaining_now(j));
    c.base_speed = 0;
    c.gain_per_worker = gain_per_worker(j);
    c.cpu_per_worker = dw_cpu_;
    c.min_workers = options_.model.dw_floor;
    c.max_workers = options_.model.dw_max;
    return c;
  }

  double remaining_now(const Job& j) const {
    return j.start < 0 ? j.remaining : j.remaining - j.speed * (now_ - j.updated);
  }

  // Whole data workers that fit in a node's spare CPUs, in milli-CPU.
  int64_t worker_cpu_on(const NodeResources& n) const { return spare_cpu(n, placement_) / dw_cpu_ * dw_cpu_; }

  // Changes a node's free resources, keeping the aggregates in step.
  void change_node(int i, int64_t gpu_delta, int64_t cpu_delta) {
    NodeResources& n = nodes_[i];
    const int64_t spare_before = spare_cpu(n, placement_);
    worker_capacity_ -= worker_cpu_on(n);
    gpu_free_.erase(gpu_free_.find(n.gpu_free));
    n.gpu_free += gpu_delta;
    n.cpu_free += cpu_delta;
    gpu_free_.insert(n.gpu_free);
    worker_capacity_ += worker_cpu_on(n);
    // Queued jobs may fit now: more free GPUs or CPUs, or (goldminer) more
    // CPUs beyond the reserve, which a GPU job with few CPUs can cause by
    // shrinking the reserve more than it takes.
    if (gpu_delta > 0 || cpu_delta > 0 || spare_cpu(n, placement_) > spare_before) {
      if (!dirty_flag_[i]) dirty_.push_back(i);
      dirty_flag_[i] = 1;
    }
  }

  void set_speed(int i, double speed) {
    Job& j = jobs_[i];
    if (j.stamp != 0 && j.speed == speed) return;  // its finish event stays valid
    j.remaining = remaining_now(j);
    j.updated = now_;
    effective_gpu_ += static_cast<double>(j.gpu) * (speed - j.speed);
    j.speed = speed;
    ++j.stamp;
    if (speed > 0) finishes_.push({now_ + j.remaining / speed, i, j.stamp});
  }

  // Integrates the GPU-time and waiting-time sums over `dt` of unchanged state.
  void account(double dt) {
    if (dt <= 0) return;
    usage_.gpu_time += held_gpu_ * dt;
    usage_.effective_time += effective_gpu_ * dt;
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

  void drop_stale_finishes() {
    while (!finishes_.empty()) {
      const FinishEvent& e = finishes_.top();
      const Job& j = jobs_[e.job];
      if (e.stamp == j.stamp && j.finish < 0) return;
      finishes_.pop();
    }
  }

  void start(int i, int node) {
    Job& j = jobs_[i];
    change_node(node, -j.gpu, -j.cpu_on_node);
    j.node = node;
    j.start = now_;
    j.ready_at = now_ + options_.model.job_start_s;
    j.updated = now_;
    j.speed = 0;
    ++running_;
    held_gpu_ += static_cast<double>(j.gpu);
    if (j.pre_cpu > 0) {
      // Its speed comes from the worker allocation of this event.
      j.elastic_slot = static_cast<int>(elastic_.size());
      elastic_.push_back(i);
      total_want_ += int64_t{j.saturating} * dw_cpu_;
      new_elastic_.push_back(i);
    } else {
      set_speed(i, speed_of(j));
      if (now_ < j.ready_at) wakeups_.push({j.ready_at, i});
    }
  }

  // What the job runs at now: nothing before it is ready; then its fixed
  // speed, or (data workers) what its delivering workers give it.
  double speed_of(const Job& j) const {
    if (now_ < j.ready_at) return 0;
    if (j.pre_cpu == 0) return j.fixed_speed;
    return std::min(1.0, j.active * gain_per_worker(j));
  }

  // Gives job i `n` workers. Added ones deliver worker_start_s after they
  // are allocated, and not before the job is ready (its companion job is
  // submitted when the job starts); removed ones are the starting ones
  // first (cancelled), then delivering ones (drained at once).
  void set_workers(int i, int n) {
    Job& j = jobs_[i];
    if (n > j.workers) {
      const double at = std::max(now_, j.ready_at) + options_.model.worker_start_s;
      if (at <= now_) {
        j.active += n - j.workers;
      } else {
        j.starting.push_back({at, n - j.workers});
        wakeups_.push({at, i});
      }
    } else {
      int drop = j.workers - n;
      while (drop > 0 && !j.starting.empty()) {
        const int k = std::min(drop, j.starting.back().second);
        drop -= k;
        if ((j.starting.back().second -= k) == 0) j.starting.pop_back();
      }
      j.active -= drop;
    }
    j.workers = n;
  }

  // A job became ready, or some of its workers began to deliver.
  void wake(int i) {
    Job& j = jobs_[i];
    if (j.start < 0 || j.finish >= 0) return;
    while (!j.starting.empty() && j.starting.front().first <= now_) {
      j.active += j.starting.front().second;
      j.starting.pop_front();
    }
    set_speed(i, speed_of(j));
  }

  void finish(int i) {
    Job& j = jobs_[i];
    j.finish = now_;
    j.remaining = 0;
    change_node(j.node, j.gpu, j.cpu_on_node);
    --running_;
    held_gpu_ -= static_cast<double>(j.gpu);
    effective_gpu_ -= static_cast<double>(j.gpu) * j.speed;
    if (j.elastic_slot >= 0) {
      int last = elastic_.back();
      elastic_[j.elastic_slot] = last;
      jobs_[last].elastic_slot = j.elastic_slot;
      elastic_.pop_back();
      j.elastic_slot = -1;
      total_want_ -= int64_t{j.saturating} * dw_cpu_;
    }
    j.workers = j.active = 0;
    j.starting.clear();
  }

  // Best fit among `candidates` (node indices): the node left with the
  // fewest free GPUs, then the fewest CPUs; -1 if none fits.
  int choose_node(const Job& j, const std::vector<int>& candidates) const {
    int best = -1;
    int64_t best_gpu = 0, best_cpu = 0;
    for (int i : candidates) {
      const NodeResources& n = nodes_[i];
      int64_t usable = goldminer() && j.gpu == 0 ? spare_cpu(n, placement_) : n.cpu_free;
      if (n.gpu_free < j.gpu || usable < j.cpu_on_node) continue;
      int64_t gpu_left = n.gpu_free - j.gpu, cpu_left = n.cpu_free - j.cpu_on_node;
      if (best < 0 || gpu_left < best_gpu || (gpu_left == best_gpu && cpu_left < best_cpu)) {
        best = i;
        best_gpu = gpu_left;
        best_cpu = cpu_left;
      }
    }
    return best;
  }

  // Starts queued jobs in arrival order, passing over those that do not fit.
  // Jobs with the same needs (a class) fit the same nodes, so the queue is
  // kept per class: when one fails, the later ones of its class fail too.
  // Waiting jobs were tried on every node when they arrived or last had a
  // chance; only nodes that released resources since (dirty) can take them
  // now. New arrivals go after them, each tried on every node unless an
  // earlier job of its class is waiting (it would fail as that one did).
  void schedule(const std::vector<int>& arrivals) {
    std::vector<int> dirty;
    dirty.swap(dirty_);
    for (int i : dirty) dirty_flag_[i] = 0;
    if (!dirty.empty()) {
      // Class heads in arrival order: (job index, class) min-heap.
      using Head = std::pair<int, int>;
      std::priority_queue<Head, std::vector<Head>, std::greater<Head>> heads;
      for (int c : waiting_classes_) heads.push({classes_[c].jobs.front(), c});
      while (!heads.empty()) {
        auto [i, c] = heads.top();
        heads.pop();
        int node = choose_node(jobs_[i], dirty);
        if (node < 0) continue;  // the rest of this class cannot fit either
        start(i, node);
        dequeue_head(c);
        if (!classes_[c].jobs.empty()) heads.push({classes_[c].jobs.front(), c});
      }
    }
    for (int i : arrivals) {
      int c = class_of(jobs_[i]);
      int node = classes_[c].jobs.empty() ? choose_node(jobs_[i], all_nodes_) : -1;
      if (node >= 0) {
        start(i, node);
      } else {
        enqueue(i, c);
      }
    }
  }

  int class_of(const Job& j) {
    auto [it, added] = class_index_.emplace(std::make_pair(j.gpu, j.cpu_on_node), classes_.size());
    if (added) classes_.push_back({});
    return static_cast<int>(it->second);
  }

  void enqueue(int i, int c) {
    if (classes_[c].jobs.empty()) waiting_classes_.insert(c);
    classes_[c].jobs.push_back(i);
    ++queued_;
    if (jobs_[i].gpu > 0) ++queued_gpu_[jobs_[i].gpu];
  }

  void dequeue_head(int c) {
    int i = classes_[c].jobs.front();
    classes_[c].jobs.pop_front();
    if (classes_[c].jobs.empty()) waiting_classes_.erase(c);
    --queued_;
    if (jobs_[i].gpu > 0) {
      auto it = queued_gpu_.find(jobs_[i].gpu);
      if (--it->second == 0) queued_gpu_.erase(it);
    }
  }

  void allocate_data_workers() {
    std::vector<int> fresh;
    fresh.swap(new_elastic_);
    // Enough worker CPUs for every job at full speed, and every job that
    // was here before already at full speed: only the new ones change.
    if (all_saturated_ && total_want_ <= worker_capacity_) {
      for (int i : fresh) {
        Job& j = jobs_[i];
        if (options_.policy == Policy::kGoldminerJobLevel) converge_autosizer(j, j.saturating);
        set_workers(i, j.saturating);
        set_speed(i, speed_of(j));
      }
      return;
    }
    std::vector<int> counts(elastic_.size(), 0);
    if (options_.policy == Policy::kGoldminer) {
      std::vector<DwClaim> claims;
      claims.reserve(elastic_.size());
      for (int i : elastic_) claims.push_back(claim_of(jobs_[i]));
      counts = allocate_workers(claims, worker_capacity_);
    } else {
      // Job level: each job's autosizer asks, earlier-started jobs first.
      std::vector<size_t> order(elastic_.size());
      for (size_t k = 0; k < order.size(); ++k) order[k] = k;
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return jobs_[elastic_[a]].start < jobs_[elastic_[b]].start;
      });
      int64_t left = worker_capacity_;
      for (size_t k : order) {
        Job& j = jobs_[elastic_[k]];
        counts[k] = converge_autosizer(j, static_cast<int>(left / dw_cpu_));
        left -= counts[k] * dw_cpu_;
      }
    }
    all_saturated_ = true;
    for (size_t k = 0; k < elastic_.size(); ++k) {
      Job& j = jobs_[elastic_[k]];
      set_workers(elastic_[k], counts[k]);
      all_saturated_ &= j.workers >= j.saturating;
      set_speed(elastic_[k], speed_of(j));
    }
  }

  // The autosizer observes every few seconds and queue metrics settle in
  // seconds, while jobs run for minutes: it may converge at each event (up
  // to 4 observations of the exact metrics). Returns the workers granted,
  // at most `available`.
  int converge_autosizer(Job& j, int available) {
    const double g = gain_per_worker(j);
    int workers = std::min(j.workers, available);
    for (int round = 0; round < 4; ++round) {
      QueueMetrics m;
      m.workers = workers;
      m.per_worker_rate = g;
      m.arrival_rate = workers * g;
      m.consumption_rate = std::min(1.0, m.arrival_rate);
      m.trainer_wait_fraction = 1.0 - m.consumption_rate;
      m.queue_fill = m.arrival_rate > 1.0 ? 1.0 : 0.0;
      int wanted = std::max(0, workers + j.autosizer->observe(m));
      int granted = std::min(wanted, available);
      if (granted == workers) break;
      workers = granted;
    }
    return workers;
  }

  JobRecord record_of(const Job& j) const {
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

  void summarize(double decision_s, SimResult* r) {
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

  SimOptions options_;
  std::string error_;  // from add_jobs
  PlacementConfig placement_;
  double now_ = 0;
  int64_t dw_cpu_ = 1000;

  std::vector<NodeResources> nodes_;
  std::vector<int> all_nodes_;         // 0 .. nodes_.size() - 1
  std::vector<int> dirty_;             // nodes that released resources since the last schedule
  std::vector<char> dirty_flag_;
  std::multiset<int64_t> gpu_free_;    // every node's free milli-GPU
  int64_t total_gpu_ = 0;
  int64_t worker_capacity_ = 0;        // milli-CPU in whole workers beyond the reserves

  std::vector<Job> jobs_;
  struct JobClass {
    std::deque<int> jobs;  // waiting, arrival order
  };
  std::vector<JobClass> classes_;      // by (milli-GPU, milli-CPU on node)
  std::map<std::pair<int64_t, int64_t>, size_t> class_index_;
  std::set<int> waiting_classes_;      // classes with waiting jobs
  int64_t queued_ = 0;
  std::map<int64_t, int> queued_gpu_;  // queued GPU jobs by milli-GPU size
  int dispatching_gpu_ = 0;            // GPU jobs submitted, not yet able to start (dispatch_s)
  int running_ = 0;
  std::vector<int> elastic_;           // running jobs with data workers
  std::vector<int> new_elastic_;       // started this event
  int64_t total_want_ = 0;             // milli-CPU to bring every elastic job to full speed
  bool all_saturated_ = true;
  std::priority_queue<FinishEvent, std::vector<FinishEvent>, std::greater<FinishEvent>> finishes_;
  // (time, job): the job becomes ready, or workers of it begin to deliver
  // (stale ones, of finished jobs, are ignored).
  using Wakeup = std::pair<double, int>;
  std::priority_queue<Wakeup, std::vector<Wakeup>, std::greater<Wakeup>> wakeups_;
  double held_gpu_ = 0, effective_gpu_ = 0;  // milli-GPU held; weighted by speed
  Usage usage_;
};

}  // namespace

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
