// Cluster-level data-worker allocation: shares the CPUs available to data
// workers among running jobs so that the sum of their remaining times (and
// so the average job completion time) falls the most.
//
// Job model the allocation assumes (the same the simulator uses): a job's
// speed with k data workers is s(k) = min(1, base + k * gain), where 1 is
// the speed its GPUs allow and `gain` what one worker adds; its remaining
// time is remaining_work / s(k). The marginal value of worker k+1 is
// R/s(k) - R/s(k+1) seconds, per milli-CPU it holds. Values fall with k, so
// giving CPUs to the highest marginal values first (water-filling) is
// optimal for this separable convex objective.
//
// A claim with measured speeds (`measured`, from the job's scaling curve)
// is valued by them instead: s(k) runs piecewise-linearly through
// (0, base_speed) and the measured points, each capped at 1; above the
// largest measured count it rises with the smaller of the last measured
// segment's slope and gain_per_worker (never below 0, never above 1). Such
// a curve may be flat, fall, or rise again after a flat stretch, so its
// marginal values need not fall with k: allocate_workers gives a measured
// claim its workers by the upper concave hull of -R/s(k), one hull
// segment at a time (a stretch that pays only as a whole, e.g. a flat one
// before a rise, is granted whole or not at all, so it never stops in a
// dip); CPUs left over after that go one worker at a time to the highest
// exact marginal value above 0.
#ifndef GOLDMINER_SCHED_DW_ALLOCATION_H_
#define GOLDMINER_SCHED_DW_ALLOCATION_H_

#include <cstdint>
#include <utility>
#include <vector>

namespace goldminer {

struct DwClaim {
  double remaining_work = 0;  // seconds left at full speed
  double base_speed = 0;      // speed with no data worker, in [0, 1]
  double gain_per_worker = 0; // speed one data worker adds, > 0
  int64_t cpu_per_worker = 1000;  // milli-CPU of one data worker
  int min_workers = 0;  // floor: granted before any job gets more
  int max_workers = 0;  // the job's dw-max
  // The job's measured speeds, (workers, speed) in base_speed's units
  // (1: what its GPUs allow), ascending by workers; empty before any
  // measurement: the model above alone.
  std::vector<std::pair<int, double>> measured;
  // No more workers than this (its measured knee, one more while it
  // re-probes above it); -1: no cap but max_workers. Workers above it
  // have marginal value 0 and are never granted (model claims too).
  int cap = -1;
  // Of `cap`, the workers of a probe above the job's knee (its report's
  // `probing`): they come only from slack, CPUs left once every claim has
  // what it gets up to its cap less its probe, so that a probe never
  // takes a CPU from a measured gain. 0: none. A probe's workers the job
  // holds already (`held`) stay while the probe is judged.
  int probe = 0;
  int held = 0;  // workers the job has now (connected or on their way)
};

// Workers that bring a claim to full speed (or to max_workers, or cap);
// for a measured claim, the fewest workers at which s(k) is highest.
int saturating_workers(const DwClaim& claim);

// Seconds saved by the (k+1)-th worker of `claim`, per milli-CPU; 0 from
// saturating_workers on, and for a measured worker that does not speed
// the job up.
double marginal_value(const DwClaim& claim, int k);

// Worker counts per claim (same order) using at most `cpu_capacity`
// milli-CPU. Floors come first, in order of the value of each job's first
// worker; the rest goes by marginal value per milli-CPU; probes (`probe`)
// last, from what is left. No job gets more
// than its saturating count. Runs in O(J log(1/eps)) for J model claims;
// a measured claim adds O(its saturating count) per bisection step.
std::vector<int> allocate_workers(const std::vector<DwClaim>& claims, int64_t cpu_capacity);

}  // namespace goldminer

#endif  // GOLDMINER_SCHED_DW_ALLOCATION_H_
