// What the trainer session counts (tw_lib/session/session_counters.h).
#include "tw_lib/session/session_counters.h"

#include <algorithm>

namespace goldminer {

void SessionCounters::start_epoch() {
  epoch_started = Clock::now();
  arrived_batches = 0;
  consumed_batches = 0;
  wait_seconds = 0;
  bad_records = 0;
}

const WorkerMetrics& SessionCounters::count_arrival(transport::PeerId peer, uint64_t bytes, uint64_t bad,
                                                    double seconds_connected) {
  bad_records += bad;  // the budget is checked where the trainer takes the batch (next)
  WorkerMetrics& pw = per_worker[peer];
  ++pw.batches;
  pw.bytes += bytes;
  if (seconds_connected >= 0) pw.batches_per_s = pw.batches / std::max(1e-9, seconds_connected);
  ++arrived_batches;
  ++arrived_total;
  return pw;
}

int SessionCounters::kept_workers(size_t drain_requests) const {
  int draining = static_cast<int>(drain_requests);
  for (const auto& [peer, w] : per_worker) draining += w.draining;
  return std::max(0, job_workers() - draining);
}

void SessionCounters::fill_metrics(SessionMetrics* m) const {
  const double wall =
      std::max(1e-9, std::chrono::duration<double>(Clock::now() - epoch_started).count());
  m->arrival_rate = static_cast<double>(arrived_batches) / wall;
  m->consumption_rate = static_cast<double>(consumed_batches) / wall;
  m->trainer_wait_fraction = std::min(1.0, wait_seconds / wall);
  m->workers = per_worker.size();
  m->workers_lost = workers_lost;
  m->workers_rejected = workers_rejected;
  m->bad_records = bad_records;
  m->duplicates_dropped = duplicates_dropped;
  m->splits_failed = splits_failed;
  m->scaling_window_s = scaling_window_s, m->scaling_window_batches = scaling_window_batches;
  for (const auto& [peer, w] : per_worker) m->per_worker.push_back(w);
}

}  // namespace goldminer
