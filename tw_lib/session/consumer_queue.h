// The trainer session's bounded queue between its two sides: the loop
// thread puts the batches workers delivered in it, and each end of an
// epoch; the consumer (the training loop, in Session::next()) takes them.
// It keeps what the consumer took this epoch (its resume position,
// LeasePosition) and, in deterministic order, the batches that came before
// those of earlier splits and wait for them (ReorderBuffer).
//
// Thread-compatible, not thread-safe: the session's shared lock
// (Session::Impl::mu_, tw_lib/session/session_impl.h) guards it, and every
// call is made with it held, except awaited_split(), which the loop
// thread, the only one that changes what it reads, may call without.
// The lock is the session's, not the queue's own: the loop changes the
// queue and the counters (session_counters.h) of one batch together, and
// metrics() and the elastic thread read both as one snapshot.
#ifndef GOLDMINER_TW_LIB_SESSION_CONSUMER_QUEUE_H_
#define GOLDMINER_TW_LIB_SESSION_CONSUMER_QUEUE_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "gmcore/lease_table.h"
#include "gmcore/reorder_buffer.h"
#include "goldminer/session.h"
#include "mpi_transport/transport.h"

namespace goldminer {

// An item of the queue: a delivered batch, or the end of an epoch.
struct QueuedBatch {
  bool end_of_epoch = false;
  transport::PeerId from = 0;
  uint64_t bad_records = 0;  // skipped while making this batch
  uint64_t bytes = 0;
  bool last_of_split = false;
  SessionBatch batch;
};

class ConsumerQueue {
 public:
  // The queue of a session with options `o` whose lease table begins at
  // `epoch` with its splits in `epoch_order`; o.resume, if any, gives what
  // the consumer took of that epoch already.
  ConsumerQueue(const SessionOptions& o, uint32_t epoch, const std::vector<uint64_t>& epoch_order);

  // Loop side.
  // Queues a delivered batch or, in deterministic order, holds it until
  // the batches before it in the epoch's order are queued. An error for a
  // batch the order does not expect (ReorderBuffer::add); the session
  // fails then.
  Status push(QueuedBatch item);
  void push_end_of_epoch();
  // Deterministic order: the loop's lease table began an epoch whose
  // splits are delivered in `order`.
  void start_epoch_order(std::vector<uint64_t> order) { reorder_.start(std::move(order)); }
  // Deterministic order: the split every later batch waits for; none
  // otherwise, or when all came.
  std::optional<uint64_t> awaited_split() const { return reorder_.head(); }
  // Who sent the batches the consumer took since the last call (a credit
  // each for their workers).
  std::vector<transport::PeerId> take_consumed_from() { return std::exchange(consumed_from_, {}); }
  // Whether the consumer asked for the next epoch since the last call.
  bool take_epoch_request() { return std::exchange(start_next_epoch_, false); }

  // Consumer side.
  // The consumer that saw the end of an epoch comes back for more: the
  // next epoch starts (and the loop is asked to deal it). False when it
  // had not seen one.
  bool begin_wanted_epoch();
  // The front item, taken; none while the queue is empty. An end of epoch
  // ends the consumer's epoch. For a batch, `fill_found` is how full the
  // queue was as the consumer found it, with `workers` connected.
  std::optional<QueuedBatch> take(size_t workers, double* fill_found);
  // The consumer returns `item` (taken, within the bad-records budget):
  // its worker gets a credit back and the position counts it.
  void count_consumed(const QueuedBatch& item);
  // Bad records of the batches taken this epoch.
  uint64_t consumed_bad_records() const { return consumed_bad_; }

  // Both sides (metrics, the elastic thread, credits).
  size_t queued() const { return queue_.size(); }
  size_t held() const { return reorder_.held(); }
  uint64_t bytes() const { return bytes_; }
  size_t max_queued() const { return max_queued_; }
  uint32_t consumer_epoch() const { return consumer_epoch_; }
  // The epoch of the consumer's position: the next one once it saw the
  // end of this one.
  uint32_t position_epoch() const { return consumer_epoch_ + (want_next_epoch_ ? 1 : 0); }
  // The consumer's position: its epoch, and what it took of it.
  void position(LeasePosition* p) const;
  // How full the queue is, 0..1, with `workers` connected: of the room
  // workers may use (queue_batches, or, not deterministic,
  // credits_per_worker per connected worker where that is less), and of
  // queue_bytes; deterministic order counts held batches too. 1: workers
  // wait for the trainer.
  double fill(size_t workers) const;

 private:
  // The options the queue's bounds come from (SessionOptions).
  const bool deterministic_;
  const uint64_t queue_batches_;
  const uint64_t queue_bytes_;
  const uint32_t credits_per_worker_;

  std::deque<QueuedBatch> queue_;
  uint64_t bytes_ = 0;
  size_t max_queued_ = 0;  // most batches queued and held at once this epoch
  // Deterministic order: batches held for earlier ones.
  ReorderBuffer<QueuedBatch> reorder_;
  std::vector<transport::PeerId> consumed_from_;  // who sent the batches next() took, for the loop
  bool want_next_epoch_ = false;   // the consumer saw the end of an epoch
  bool start_next_epoch_ = false;  // ... and asked for the next
  uint32_t consumer_epoch_ = 0;
  std::map<uint64_t, uint64_t> consumed_;  // split -> batches returned by next()
  std::set<uint64_t> consumed_done_;
  uint64_t consumed_bad_ = 0;  // bad records of the batches next() returned this epoch
};

}  // namespace goldminer

#endif  // GOLDMINER_TW_LIB_SESSION_CONSUMER_QUEUE_H_
