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
  // re-probes above it); -1: no cap but max_workers.
  int cap = -1;
};

// Workers that bring a claim to full speed (or to max_workers).
int saturating_workers(const DwClaim& claim);

// Seconds saved by the (k+1)-th worker of `claim`, per milli-CPU.
double marginal_value(const DwClaim& claim, int k);

// Worker counts per claim (same order) using at most `cpu_capacity`
// milli-CPU. Floors come first, in order of the value of each job's first
// worker; the rest goes by marginal value per milli-CPU. No job gets more
// than its saturating count. Runs in O(J log(1/eps)) for J claims.
std::vector<int> allocate_workers(const std::vector<DwClaim>& claims, int64_t cpu_capacity);

}  // namespace goldminer

#endif  // GOLDMINER_SCHED_DW_ALLOCATION_H_
