#include "sim/simulation.h"

namespace goldminer::sim::internal {

// Changes a node's free resources, keeping the aggregates in step.
void Simulation::change_node(int i, int64_t gpu_delta, int64_t cpu_delta) {
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

void Simulation::set_speed(int i, double speed) {
  Job& j = jobs_[i];
  if (j.stamp != 0 && j.speed == speed) return;  // its finish event stays valid
  j.remaining = remaining_now(j);
  j.updated = now_;
  effective_gpu_ += static_cast<double>(j.gpu) * (speed - j.speed);
  j.speed = speed;
  ++j.stamp;
  if (speed > 0) finishes_.push({now_ + j.remaining / speed, i, j.stamp});
}

void Simulation::drop_stale_finishes() {
  while (!finishes_.empty()) {
    const FinishEvent& e = finishes_.top();
    const Job& j = jobs_[e.job];
    if (e.stamp == j.stamp && j.finish < 0) return;
    finishes_.pop();
  }
}

void Simulation::start(int i, int node) {
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
    j.noise = SplitMix64(splitmix64(options_.seed ^ 0x4e4f495345ULL) + static_cast<uint64_t>(i));  // "NOISE"
    if (measured_policy()) start_measuring(i);
    if (cachew_policy()) start_cachew(i);
  } else {
    set_speed(i, speed_of(j));
    if (now_ < j.ready_at) wakeups_.push({j.ready_at, i});
  }
}

// Gives job i `n` workers. Added ones deliver worker_start_s after they
// are allocated, and not before the job is ready (its companion job is
// submitted when the job starts); removed ones are the starting ones
// first (cancelled), then delivering ones (drained at once).
void Simulation::set_workers(int i, int n) {
  Job& j = jobs_[i];
  held_workers_ += n - j.workers;
  wasted_workers_ -= wasted_workers(j);
  unpaying_workers_ -= unpaying_workers(j);
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
  wasted_workers_ += wasted_workers(j);
  unpaying_workers_ += unpaying_workers(j);
  // Workers on their way: the job's windows measure them as they come.
  if (measured_policy() && !j.starting.empty() && j.scaling) schedule_window(i);
}

// A job became ready, or some of its workers began to deliver.
void Simulation::wake(int i) {
  Job& j = jobs_[i];
  if (j.start < 0 || j.finish >= 0) return;
  while (!j.starting.empty() && j.starting.front().first <= now_) {
    j.active += j.starting.front().second;
    j.starting.pop_front();
  }
  set_speed(i, speed_of(j));
}

void Simulation::finish(int i) {
  Job& j = jobs_[i];
  j.finish = now_;
  j.remaining = 0;
  if (j.scaling && j.scaling->knee() > j.useful) ++knees_above_useful_;
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
  held_workers_ -= j.workers;
  wasted_workers_ -= wasted_workers(j);
  unpaying_workers_ -= unpaying_workers(j);
  j.workers = j.active = 0;
  j.starting.clear();
  ++j.window_stamp;  // its scheduled window is stale
  j.window_due = false;
}

// Best fit among `candidates` (node indices): the node left with the
// fewest free GPUs, then the fewest CPUs; -1 if none fits.
int Simulation::choose_node(const Job& j, const std::vector<int>& candidates) const {
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
void Simulation::schedule(const std::vector<int>& arrivals) {
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

int Simulation::class_of(const Job& j) {
  auto [it, added] = class_index_.emplace(std::make_pair(j.gpu, j.cpu_on_node), classes_.size());
  if (added) classes_.push_back({});
  return static_cast<int>(it->second);
}

void Simulation::enqueue(int i, int c) {
  if (classes_[c].jobs.empty()) waiting_classes_.insert(c);
  classes_[c].jobs.push_back(i);
  ++queued_;
  if (jobs_[i].gpu > 0) ++queued_gpu_[jobs_[i].gpu];
}

void Simulation::dequeue_head(int c) {
  int i = classes_[c].jobs.front();
  classes_[c].jobs.pop_front();
  if (classes_[c].jobs.empty()) waiting_classes_.erase(c);
  --queued_;
  if (jobs_[i].gpu > 0) {
    auto it = queued_gpu_.find(jobs_[i].gpu);
    if (--it->second == 0) queued_gpu_.erase(it);
  }
}

void Simulation::allocate_data_workers() {
  reallocate_ = false;
  std::vector<int> fresh;
  fresh.swap(new_elastic_);
  // Enough worker CPUs for every job at full speed, and every job that
  // was here before already at full speed: only the new ones change
  // (goldminer's model claims; the autosizer's while speeds are linear).
  const bool linear = options_.model.speed_curve == SpeedCurveModel::kLinear;
  const bool model_saturates = options_.policy == Policy::kGoldminer ||
                               ((options_.policy == Policy::kGoldminerJobLevel || options_.policy == Policy::kOracle) &&
                                linear);
  if (model_saturates && all_saturated_ && total_want_ <= worker_capacity_) {
    for (int i : fresh) {
      Job& j = jobs_[i];
      if (options_.policy == Policy::kGoldminerJobLevel) converge_autosizer(j, j.saturating);
      set_workers(i, j.saturating);
      set_speed(i, speed_of(j));
    }
    return;
  }
  std::vector<int> counts(elastic_.size(), 0);
  if (measured_policy()) {
    counts = allocate_measured();
  } else if (options_.policy == Policy::kGoldminer || options_.policy == Policy::kOracle) {
    std::vector<DwClaim> claims;
    claims.reserve(elastic_.size());
    for (int i : elastic_) {
      claims.push_back(claim_of(jobs_[i]));
      if (options_.policy == Policy::kOracle) {
        // Its true curve, up to its last worker that adds something.
        claims.back().measured = true_points(jobs_[i]);
        claims.back().cap = std::max(1, jobs_[i].useful);
      }
    }
    counts = allocate_workers(claims, worker_capacity_);
  } else if (cachew_policy()) {
    counts = allocate_cachew();
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
    const bool changed = counts[k] != j.workers;
    set_workers(elastic_[k], counts[k]);
    if (measured_policy() && changed) schedule_window(elastic_[k]);  // the new count is to be measured
    if (cachew_policy() && changed) schedule_cachew_window(elastic_[k]);
    all_saturated_ &= j.workers >= j.saturating;
    set_speed(elastic_[k], speed_of(j));
  }
}

// What one observation window of job j with `workers` reads now: one
// worker makes g (per_worker_rate); the workers deliver d(k) into the
// queue, the trainer takes min(1, d(k)) and waits the rest of the window;
// the queue is full when they deliver more than it takes. With
// measure_noise > 0 the delivered and taken rates read x (1 + noise x Z),
// one draw per window. Rates are in units of full speed (samples/s too:
// 1000 at full speed).
QueueMetrics Simulation::window_metrics(Job& j, int workers) {
  const double noise = options_.model.measure_noise;
  const double z = noise > 0 ? measured(1.0, noise, &j.noise) : 1.0;
  QueueMetrics m;
  m.workers = workers;
  m.per_worker_rate = gain_per_worker(j);
  m.arrival_rate = j.curve.delivered(workers) * z;
  m.consumption_rate = std::min(1.0, j.curve.delivered(workers)) * z;
  m.trainer_wait_fraction = std::clamp(1.0 - m.consumption_rate, 0.0, 1.0);
  m.queue_fill = j.curve.delivered(workers) > 1.0 ? 1.0 : 0.0;
  m.samples_per_s = 1000 * m.consumption_rate;
  return m;
}

// The autosizer observes every few seconds and queue metrics settle in
// seconds, while jobs run for minutes: it may converge at each event (up
// to 4 observations of the metrics). Returns the workers granted, at most
// `available`.
int Simulation::converge_autosizer(Job& j, int available) {
  int workers = std::min(j.workers, available);
  for (int round = 0; round < 4; ++round) {
    QueueMetrics m = window_metrics(j, workers);
    int wanted = std::max(0, workers + j.autosizer->observe(m));
    int granted = std::min(wanted, available);
    if (granted == workers) break;
    workers = granted;
  }
  return workers;
}

}  // namespace goldminer::sim::internal
