// The simulation state behind simulate() (simulator.h), internal to sim/:
// the event loop and job admission (simulator.cc), placement, queueing and
// data workers (sim_scheduling.cc), and the GPU-time accounting and summary
// (sim_accounting.cc), and goldminer-measured's windows (sim_measured.cc).
#ifndef GOLDMINER_SIM_SIMULATION_H_
#define GOLDMINER_SIM_SIMULATION_H_

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <queue>
#include <set>
#include <tuple>

#include "sched/autosizer.h"
#include "sched/dw_allocation.h"
#include "sched/placement.h"
#include "sched/scaling_policy.h"
#include "sched/session_report.h"
#include "sim/cachew.h"
#include "sim/simulator.h"

namespace goldminer::sim::internal {

constexpr double kNever = std::numeric_limits<double>::infinity();
constexpr double kMaxJobs = 2e7;  // --load replicas beyond this would exhaust memory

// GPU-time integrals, in milli-GPU seconds, over the whole run and over the
// time during which some GPU job waits in the queue.
struct Usage {
  double gpu_time = 0, effective_time = 0;
  double contended_time = 0, contended_gpu_time = 0, contended_effective_time = 0;
  double cpu_short_wait = 0;  // GPU-job seconds queued while GPUs were free
  double gpu_wait = 0;        // GPU-job seconds queued
  double worker_cpu = 0;      // milli-CPU seconds held by data workers
  double wasted_worker_cpu = 0;  // of those, by workers that added nothing
  double unpaying_worker_cpu = 0;  // by workers that did not pay (SimResult)
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
  SpeedCurve curve;         // its true speed with k data workers
  int useful = 0;           // workers that add something (SpeedCurve::useful)
  int paying = 0;           // workers that pay (SpeedCurve::paying)
  SplitMix64 noise{0};      // its measurements' noise draws
  // goldminer-measured (sim_measured.cc): the job's policy, its last
  // window's end and the stamp of its scheduled window (older ones are
  // stale).
  std::unique_ptr<ScalingPolicy> scaling;
  // cachew: its scaler and the count it asks for.
  std::unique_ptr<CachewScaler> cachew;
  int cachew_want = 0;
  double last_window = 0;
  uint32_t window_stamp = 0;
  bool window_due = false;
  double window_at = 0;     // when its due window is
  int observed = -1;        // workers its last window saw
  QueueMetrics last_metrics;  // what that window read
  // Whether its policy holds growth after that window (holds_growth): -1
  // not asked yet (asked only when the cap would let it grow: it reads a
  // median).
  int holds_growth = -1;
  int cap = -1;             // the cap its last claim carried
  // Its trainer's estimate of one worker's rate (sched/session_report.h).
  WorkerRateEstimate worker_rate;
  // What its session reports to goldminer-ctld, built after each window
  // (reading the curve's medians is most of the replay's time); the
  // knee, probe and ceiling are set again at each allocation.
  SessionReport report;
  uint64_t report_version = 0;  // bumped with each window's report
  // oracle and cachew: its true curve's points, up to its last useful
  // worker (Simulation::true_points), read once.
  std::vector<std::pair<int, double>> true_points;
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
  bool measured_policy() const { return options_.policy == Policy::kGoldminerMeasured; }
  bool cachew_policy() const { return options_.policy == Policy::kCachew; }

  // Adds the pods that ran in the trace and fit some node, at the offered
  // load the options ask for (see SimOptions::load).
  void add_jobs(const std::vector<TracePod>& pods, SimResult* result);

  Expected<SimResult> run(SimResult result);

 private:
  // Seconds the pod ran in the trace (at least 1): the GPU time it offers.
  static double trace_time(const TracePod& p) { return std::max<double>(1.0, static_cast<double>(p.run_time())); }

  // Seconds of work at full speed: the trace's run time at the speed the
  // trace's allocation gave the job.
  double work_of(const TracePod& p) const { return trace_time(p) * bundled_speed(p); }

  // CPUs a GPU job's trainer needs next to its GPUs (0 for CPU-only jobs).
  int64_t trainer_cpu(const TracePod& p) const;

  bool calibrated() const { return options_.model.demand_model == DemandModel::kCalibrated; }

  // milli-CPUs a GPU job needs in all for full speed, its trainer's
  // included (calibrated model).
  int64_t total_cpu_need(const TracePod& p) const;

  // CPUs of pre-processing a GPU job needs to run at full speed: under the
  // calibrated model its whole need minus its trainer's; under the request
  // model what its request left after the trainer, times cpu_demand_factor.
  int64_t pre_cpu_need(const TracePod& p) const;

  // The job's speed with the CPUs it asked for, all on its node (bundled):
  // the speed at which the trace saw it run.
  double bundled_speed(const TracePod& p) const;

  // CPUs the job holds on its own node under the policy.
  int64_t cpu_on_node(const TracePod& p) const;

  // Some node could hold the pod when empty (CPU-only pods outside the
  // reserve under the goldminer policies).
  bool placeable(const TracePod& p) const;

  double gain_per_worker(const Job& j) const {
    return static_cast<double>(dw_cpu_) * options_.model.remote_efficiency /
           static_cast<double>(j.pre_cpu);
  }

  Job make_job(const TracePod& p, double arrival) const;

  DwClaim claim_of(const Job& j) const;

  double remaining_now(const Job& j) const {
    return j.start < 0 ? j.remaining : j.remaining - j.speed * (now_ - j.updated);
  }

  // Whole data workers that fit in a node's spare CPUs, in milli-CPU.
  int64_t worker_cpu_on(const NodeResources& n) const { return spare_cpu(n, placement_) / dw_cpu_ * dw_cpu_; }

  // Changes a node's free resources, keeping the aggregates in step.
  void change_node(int i, int64_t gpu_delta, int64_t cpu_delta);

  void set_speed(int i, double speed);

  // Integrates the GPU-time and waiting-time sums over `dt` of unchanged state.
  void account(double dt);

  void drop_stale_finishes();

  void start(int i, int node);

  // What the job runs at now: nothing before it is ready; then its fixed
  // speed, or (data workers) what its delivering workers give it.
  double speed_of(const Job& j) const {
    if (now_ < j.ready_at) return 0;
    if (j.pre_cpu == 0) return j.fixed_speed;
    return j.curve.speed(j.active);
  }

  // Workers of job j that add nothing (speed_curve.h).
  static int wasted_workers(const Job& j) { return std::max(0, j.workers - j.useful); }
  static int unpaying_workers(const Job& j) { return std::max(0, j.workers - j.paying); }

  // What one observation window of job j reads now (noisy when
  // measure_noise > 0), its metrics in units of full speed.
  QueueMetrics window_metrics(Job& j, int workers);

  // oracle: job j's true speeds, (k, s(k)) for k = 1 up to its useful
  // workers (its claim's cap: none that adds nothing); read once per job.
  const std::vector<std::pair<int, double>>& true_points(Job& j);
  // A scaler's settings (CachewConfig, AutosizerConfig) with the model's
  // worker bounds: dw_floor (at least one) to dw_max.
  template <class ScalerConfig>
  ScalerConfig with_worker_bounds(ScalerConfig c) const {
    c.min_workers = std::max(1, options_.model.dw_floor);
    c.max_workers = options_.model.dw_max;
    return c;
  }
  // cachew (sim_cachew.cc): the job's scaler, its windows and the counts
  // it asks for, granted first come, first served.
  void start_cachew(int i);
  void cachew_window(int i);
  void schedule_cachew_window(int i);
  std::vector<int> allocate_cachew();
  // goldminer-measured (sim_measured.cc).
  void start_measuring(int i);
  // Feeds job i's policy the windows that ended since its last, up to now.
  void catch_up(int i);
  // One window of job i ending at `t` (not after now).
  void observe_window(int i, double t);
  // The ceiling job j's report carries at `t`: its policy's, no more than
  // it holds while its growth is held (ScalingPolicy::report_ceiling, as
  // ElasticController::report_ceiling under goldminer-ctld).
  int measured_cap(Job& j, double t);
  // A scheduled window of job i.
  void window_event(int i);
  // Schedules job i's next window while it has something to measure.
  void schedule_window(int i);
  // Job i's claim into claims_[slot] (its place in elastic_).
  void measured_claim_of(int i, size_t slot);
  // What job i's session tells goldminer-ctld of its settings.
  ReportedJob reported_job(int i) const;
  std::vector<int> allocate_measured();

  // Gives job i `n` workers. Added ones deliver worker_start_s after they
  // are allocated, and not before the job is ready (its companion job is
  // submitted when the job starts); removed ones are the starting ones
  // first (cancelled), then delivering ones (drained at once).
  void set_workers(int i, int n);

  // A job became ready, or some of its workers began to deliver.
  void wake(int i);

  void finish(int i);

  // Best fit among `candidates` (node indices): the node left with the
  // fewest free GPUs, then the fewest CPUs; -1 if none fits.
  int choose_node(const Job& j, const std::vector<int>& candidates) const;

  // Starts queued jobs in arrival order, passing over those that do not fit.
  // Jobs with the same needs (a class) fit the same nodes, so the queue is
  // kept per class: when one fails, the later ones of its class fail too.
  // Waiting jobs were tried on every node when they arrived or last had a
  // chance; only nodes that released resources since (dirty) can take them
  // now. New arrivals go after them, each tried on every node unless an
  // earlier job of its class is waiting (it would fail as that one did).
  void schedule(const std::vector<int>& arrivals);

  int class_of(const Job& j);

  void enqueue(int i, int c);

  void dequeue_head(int c);

  void allocate_data_workers();

  // The autosizer observes every few seconds and queue metrics settle in
  // seconds, while jobs run for minutes: it may converge at each event (up
  // to 4 observations of the exact metrics). Returns the workers granted,
  // at most `available`.
  int converge_autosizer(Job& j, int available);

  JobRecord record_of(const Job& j) const;

  void summarize(double decision_s, SimResult* r);

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
  // (time, job, stamp): a goldminer-measured job's observation window ends.
  struct WindowEvent {
    double time;
    int job;
    uint32_t stamp;
    bool operator>(const WindowEvent& o) const { return time > o.time; }
  };
  std::priority_queue<WindowEvent, std::vector<WindowEvent>, std::greater<WindowEvent>> windows_;
  // goldminer-measured: the claims of the last allocation, one per slot of
  // elastic_, and of which job, report version and probe each slot's
  // measured points are.
  std::vector<DwClaim> claims_;
  std::vector<std::tuple<int, uint64_t, int>> claim_source_;
  bool reallocate_ = false;       // a measured job's cap changed
  int undone_growths_ = 0;
  int knees_above_useful_ = 0;
  int64_t held_workers_ = 0;      // data workers held by running jobs
  int64_t unpaying_workers_ = 0;  // of those, workers that do not pay
  int64_t wasted_workers_ = 0;    // of those, workers that add nothing
  double held_gpu_ = 0, effective_gpu_ = 0;  // milli-GPU held; weighted by speed
  Usage usage_;
};

}  // namespace goldminer::sim::internal

#endif  // GOLDMINER_SIM_SIMULATION_H_
