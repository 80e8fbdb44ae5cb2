// What the trainer session counts for metrics() and for its elastic
// thread: the batches that arrived and that the consumer took, its waits
// and how full it found the queue, this epoch and since creation; the
// workers (each one's figures, those that joined, were lost, left unasked
// or were sent to other ranks) and, on rank 0 of data-parallel ranks, the
// other ranks' workers and batches as they last said.
//
// Thread-compatible data, not thread-safe: the session's shared lock
// (Session::Impl::mu_, tw_lib/session/session_impl.h) guards it. The loop
// thread counts arrivals, workers and ranks; the consumer counts what it
// takes and its waits; the elastic thread reads windows of it and writes
// the scaling window; metrics() reads it with the queue (consumer_queue.h)
// as one snapshot.
#ifndef GOLDMINER_TW_LIB_SESSION_COUNTERS_H_
#define GOLDMINER_TW_LIB_SESSION_COUNTERS_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>

#include "goldminer/session.h"
#include "mpi_transport/transport.h"

namespace goldminer {

struct SessionCounters {
  using Clock = std::chrono::steady_clock;

  // This epoch (the consumer's): reset when it starts the next.
  Clock::time_point epoch_started = Clock::now();
  uint64_t arrived_batches = 0, consumed_batches = 0;
  double wait_seconds = 0;
  uint64_t bad_records = 0;  // skipped in the batches that arrived
  // Since creation, for the elastic thread's windows.
  uint64_t arrived_total = 0, consumed_total = 0, fill_samples = 0;
  double wait_total = 0, fill_sum = 0;
  uint64_t duplicates_dropped = 0, splits_failed = 0;
  // The last scaling window (the elastic thread): its seconds and batches.
  double scaling_window_s = 0;
  uint64_t scaling_window_batches = 0;

  // The workers that joined this rank and are connected, by connection.
  std::map<transport::PeerId, WorkerMetrics> per_worker;
  int joined_total = 0;
  uint64_t workers_lost = 0, workers_rejected = 0;
  int left_unasked = 0;  // ready workers that left without a drain asked by this session
  int redirected_total = 0;  // workers rank 0 sent to other ranks (joined the job, not this rank)
  // Rank 0: the other ranks' workers and batches as they last said, for
  // the elastic sizing of the job as a whole.
  uint32_t other_ranks_workers = 0;
  uint64_t other_ranks_arrived = 0;
  int other_ranks_left = 0;  // their workers that left unasked: rank 0 replaces them

  // The consumer starts an epoch: this epoch's rates start again.
  void start_epoch();
  // The consumer waited `seconds` for a batch.
  void add_wait(double seconds) {
    wait_seconds += seconds;
    wait_total += seconds;
  }
  // The consumer found the queue `fill` full as it took a batch.
  void count_fill(double fill) {
    fill_sum += fill;
    ++fill_samples;
  }
  // The consumer returned a batch it took.
  void count_consumed() {
    ++consumed_batches;
    ++consumed_total;
  }
  // A batch of `bytes` with `bad` skipped records came from `peer`, which
  // connected `seconds_connected` ago (negative: no longer known); returns
  // that worker's figures.
  const WorkerMetrics& count_arrival(transport::PeerId peer, uint64_t bytes, uint64_t bad, double seconds_connected);

  // Rank 0 of ranks that share the job's workers sizes them for the job:
  // its own and the other ranks' workers and batches (their RankStatus).
  int job_workers() const { return static_cast<int>(per_worker.size() + other_ranks_workers); }
  uint64_t job_arrived() const { return arrived_total + other_ranks_arrived; }
  // Workers that left unasked, this rank's and (rank 0) the other ranks'.
  int job_left() const { return left_unasked + other_ranks_left; }
  // Those the job keeps: workers asked to drain (`drain_requests` still to
  // be asked, or asked) are leaving.
  int kept_workers(size_t drain_requests) const;

  // The counted part of metrics(): rates over this epoch, totals, workers.
  void fill_metrics(SessionMetrics* m) const;
};

}  // namespace goldminer

#endif  // GOLDMINER_TW_LIB_SESSION_COUNTERS_H_
