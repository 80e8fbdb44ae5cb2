// goldminer-sim's discrete-event simulator: replays a pod trace on a node
// table under one scheduling policy and reports job completion times and
// GPU allocation. The policies call the same gmcore code that the select
// plugin and controller will use: the CPU reserve (placement.h),
// allocate_workers (dw_allocation.h) and the Autosizer. Which node each
// worker lands on is not simulated: workers take whole spare CPUs anywhere,
// so only their number matters to job speed.
//
// Job model (one default for every trace; stated in goldminer-sim(1)):
// - A pod is a job; it holds num_gpu * gpu_milli milli-GPU and asks for
//   cpu_milli CPUs; run time in the trace (deletion - scheduled) is its work
//   W at full speed. Memory is not modelled.
// - A GPU job's pre-processing demand (CPUs for full speed) comes from the
//   demand model: calibrated (default; per GPU, a seeded draw from a
//   log-normal fitted to the published observations, see DemandModel) or
//   request (the request minus the trainer's, times cpu_demand_factor).
//   The trace's run time is the job's run time at the speed its request
//   gave it: W = run time x that speed.
// - bundled (Slurm cons_tres today): a GPU job starts only on a node that
//   has its GPUs and all its CPUs free, and runs at the speed its request
//   gives it (the trace's run time).
// - goldminer: a GPU job keeps trainer_cpus_per_gpu CPUs per GPU on its GPU
//   node; the rest of its CPU request, P, is pre-processing done by data
//   workers anywhere (spare CPUs beyond each node's reserve). k workers of
//   w CPUs run it at speed min(1, k*w*remote_efficiency/P). CPUs are shared
//   by dw_allocation (marginal JCT per CPU, with a floor per job). A worker
//   delivers worker_start_s after it is allocated (after the job's own
//   start for those it starts with); until then it holds its CPUs.
// - Every job may start dispatch_s after it arrives at the earliest
//   (waiting meanwhile), and makes no progress for job_start_s after it
//   starts (both 0 for traces: their run times include the launch).
// - goldminer-joblevel: the same split, but each job sizes its workers with
//   its own Autosizer and gets them first come, first served.
// - goldminer-measured: goldminer's allocation with measured claims: each
//   job's ScalingPolicy (sched/scaling_policy.h) observes a window every
//   window_s seconds (sim_measured.cc), judges every growth and sets its
//   knee; the claim carries the measured speeds and the cap (the knee, or
//   while none is known a cap that doubles whenever the job has been
//   measured at it).
// - oracle (a bound, not a policy one could ship): goldminer's allocation
//   on each job's true speed curve, read exactly (no noise, no learning),
//   up to its last worker that adds something (SpeedCurve::useful).
// - cachew (a baseline): each job scales its own workers as Cachew does
//   (sim/cachew.h: one worker more while it raises the rate by over 7 %,
//   then fewer while a removal costs under 3 %, re-scaling on a 10 % shift
//   of its rate), from noisy windows every window_s, and gets them first
//   come, first served, as goldminer-joblevel.
// - goldminer is the shipped allocation with the model alone (no
//   measurement).
// - Speed curves (speed_curve.h): linear to saturation (default) or
//   concave with a knee drawn per job; measurements read the true speed
//   with seeded noise (measure_noise).
// - CPU-only pods are ordinary jobs in every policy; under the goldminer
//   policies they respect each node's CPU reserve. Data workers are
//   preemptible: ordinary jobs see their CPUs as free.
// - Queue: arrival order; a job that does not fit is passed over by later
//   ones that do (no reservations), the same for every policy.
#ifndef GOLDMINER_SIM_SIMULATOR_H_
#define GOLDMINER_SIM_SIMULATOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "gmcore/status.h"
#include "sim/demand_model.h"
#include "sim/speed_curve.h"
#include "sim/trace.h"

namespace goldminer::sim {

enum class Policy { kBundled, kGoldminer, kGoldminerJobLevel, kGoldminerMeasured, kOracle, kCachew };

Expected<Policy> parse_policy(const std::string& name);
const char* policy_name(Policy policy);

struct JobModel {
  double trainer_cpus_per_gpu = 1.0;  // also the placement reserve per free GPU
  double remote_efficiency = 0.9;     // a worker CPU's pre-processing vs a local CPU's
  double cpus_per_dw = 1.0;           // size of one data worker
  int dw_floor = 1;                   // workers each job gets before any gets more
  int dw_max = 256;                   // workers per job at most
  // Seconds from a job's submission to when it may start at the earliest:
  // the scheduler's cycle and the launch, during which it waits holding
  // nothing. 0 for a trace (it is replayed at its arrival); the live
  // replay measures it (submission to the job script's start).
  double dispatch_s = 0;
  // Seconds from a job's start (its resources allocated) to its first
  // progress: Slurm's launch and the program's own start-up. 0 for a trace,
  // whose run times include them; the live replay measures it.
  double job_start_s = 0;
  // Seconds from a data worker's allocation to its first batch (companion
  // job scheduled and launched, goldminer-dw and libtorch started), counted
  // from the job's first progress for the workers it starts with. 2: the
  // devcluster's P7 (bench/worker_latency.sh: p50 1.2-1.6 s, p95 1.8-3.2 s;
  // docs/SIMULATION.md).
  double worker_start_s = 2.0;
  DemandModel demand_model = DemandModel::kCalibrated;
  CalibratedDemand calibrated;
  // kRequest: CPUs a GPU job's pre-processing needs for full speed / CPUs
  // its request gave it (the request minus the trainer's). 1: the request
  // was right. Above 1, jobs were CPU-starved in the trace: bundled runs
  // them at 1 / factor, as the trace saw, and goldminer can give them the
  // rest.
  double cpu_demand_factor = 1.0;
  // How a GPU job's speed rises with its data workers (speed_curve.h):
  // linear to saturation, as the goldminer policy's allocation assumes, or
  // concave with a knee drawn per job from `concave`.
  SpeedCurveModel speed_curve = SpeedCurveModel::kLinear;
  ConcaveCurves concave;
  // Relative standard deviation of one window's measured rate (the
  // policies that measure see only that): 0 = exact.
  double measure_noise = 0;
  // Seconds of one observation window (goldminer-measured; the trainer
  // session's interval).
  double window_s = 5;
};

struct SimOptions {
  Policy policy = Policy::kBundled;
  JobModel model;
  // 0: replay the trace as it is. Otherwise overlay copies of the trace,
  // each shifted by a seeded random offset and wrapped into its arrival span, until offered
  // GPU work / (GPUs x span) equals this value: a small sample of a trace
  // holds too few jobs to ever fill its GPUs, however its arrivals are
  // compressed.
  double load = 0;
  uint64_t seed = 1;  // the copies' offsets and the partial last copy
};

struct TimelinePoint {
  double t = 0;
  double gpu_allocated = 0;  // fraction of the cluster's GPUs held by jobs
};

// One replayed job as the model saw it (goldminer-sim --jobs-csv): what
// the live replay (bench/replay) gives each real job, and what the
// simulation made of it.
struct JobRecord {
  std::string name;
  double gpus = 0;            // GPUs it holds (fractions of shared ones)
  double cpus_requested = 0;  // its request
  double cpus_needed = 0;     // CPUs for full speed, its trainer's included (= request for CPU-only jobs)
  double cpus_trainer = 0;    // of those, the trainer's next to its GPUs
  double work_s = 0;          // seconds of work at full speed
  double bundled_speed = 1;   // the speed its request gives it on its own node
  double arrival_s = 0, start_s = 0, finish_s = 0;
};

struct SimResult {
  std::string policy;
  int jobs = 0;          // jobs replayed (pods that ran in the trace and fit a node)
  int gpu_jobs = 0;
  int unplaceable = 0;   // pods no node could ever hold (skipped)
  int never_ran = 0;     // pods the trace never scheduled (no run time; skipped)
  double gpus = 0;
  double avg_jct_s = 0, p50_jct_s = 0, p95_jct_s = 0, p99_jct_s = 0;
  double avg_jct_gpu_s = 0;
  double avg_queue_s = 0;
  // Time-average share of GPUs allocated while some GPU job waits (over the
  // whole makespan when none ever waits), and the same weighted by speed.
  double gpu_alloc_rate = 0;
  double gpu_effective_rate = 0;
  double contended_share = 0;     // share of the makespan with a GPU job waiting
  double cpu_short_wait_s = 0;    // per GPU job: queued while GPUs were free somewhere
  // Share of GPU jobs' queueing time spent while some node had enough GPUs
  // free for the job (so it waited for CPUs); 0 when none waited.
  double gpu_wait_cpu_short_fraction = 0;
  double cpu_starved_share = 0;   // GPU jobs whose request runs them below full speed
  double makespan_s = 0;
  // CPU-seconds held by data workers in all, and by those that added
  // nothing (speed_curve.h: a job's workers above SpeedCurve::useful()),
  // starting ones included.
  double worker_cpu_s = 0;
  double wasted_worker_cpu_s = 0;
  // CPU-seconds held by workers that did not pay: a job's workers above
  // SpeedCurve::paying(), the count up to which each worker adds at least
  // pay_fraction (AutosizerConfig, 0.5) of what its first worker adds,
  // starting ones included.
  double unpaying_worker_cpu_s = 0;
  int undone_growths = 0;  // goldminer-measured: growths that did not pay
  // goldminer-measured: jobs that ended with their knee above their useful
  // workers (a growth past them was judged to have paid).
  int knees_above_useful = 0;
  double offered_load = 0;        // GPU work offered / (GPUs x arrival span)
  double decision_us_per_event = 0;
  int64_t events = 0;
  std::vector<TimelinePoint> timeline;
  std::vector<JobRecord> job_records;  // in arrival order
};

Expected<SimResult> simulate(const std::vector<TracePod>& pods, const std::vector<TraceNode>& nodes,
                             const SimOptions& options);

// The result as one JSON object (no timeline, no job records).
std::string to_json(const SimResult& result);

// The job records as CSV with a header line.
std::string job_records_csv(const SimResult& result);

}  // namespace goldminer::sim

#endif  // GOLDMINER_SIM_SIMULATOR_H_
