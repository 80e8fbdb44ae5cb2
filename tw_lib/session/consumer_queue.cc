// The trainer session's queue between its loop thread and the consumer
// (tw_lib/session/consumer_queue.h).
#include "tw_lib/session/consumer_queue.h"

#include <algorithm>

namespace goldminer {

ConsumerQueue::ConsumerQueue(const SessionOptions& o, uint32_t epoch, const std::vector<uint64_t>& epoch_order)
    : deterministic_(o.deterministic),
      queue_batches_(o.queue_batches),
      queue_bytes_(o.queue_bytes),
      credits_per_worker_(o.credits_per_worker),
      consumer_epoch_(epoch) {
  if (o.resume) {
    for (uint64_t id : o.resume->done) consumed_done_.insert(id);
    for (auto [id, n] : o.resume->partial) consumed_[id] = n;
    consumed_bad_ = o.resume->bad_records;
  }
  if (deterministic_) reorder_.start(epoch_order, consumed_done_, {consumed_.begin(), consumed_.end()});
}

Status ConsumerQueue::push(QueuedBatch item) {
  bytes_ += item.bytes;
  Status s;
  if (!deterministic_) {
    queue_.push_back(std::move(item));
  } else {
    // Held until the batches before it in the epoch's order are queued;
    // it counts against its worker's share of the queue meanwhile.
    const uint64_t split = item.batch.split_id;
    const uint64_t sequence = item.batch.sequence;
    const bool last = item.last_of_split;
    auto ready = reorder_.add(split, sequence, last, std::move(item));
    if (!ready.ok()) {
      s = ready.status();
    } else {
      for (QueuedBatch& r : *ready) queue_.push_back(std::move(r));
    }
  }
  max_queued_ = std::max(max_queued_, queue_.size() + reorder_.held());
  return s;
}

void ConsumerQueue::push_end_of_epoch() {
  QueuedBatch end;
  end.end_of_epoch = true;
  queue_.push_back(std::move(end));
}

bool ConsumerQueue::begin_wanted_epoch() {
  if (!want_next_epoch_) return false;
  want_next_epoch_ = false;
  start_next_epoch_ = true;
  ++consumer_epoch_;
  consumed_.clear();
  consumed_done_.clear();
  max_queued_ = queue_.size() + reorder_.held();
  consumed_bad_ = 0;
  return true;
}

std::optional<QueuedBatch> ConsumerQueue::take(size_t workers, double* fill_found) {
  if (queue_.empty()) return std::nullopt;
  QueuedBatch item = std::move(queue_.front());
  queue_.pop_front();
  if (item.end_of_epoch) {
    want_next_epoch_ = true;
    return item;
  }
  *fill_found = fill(workers);  // its bytes still counted, as the trainer found them
  bytes_ -= item.bytes;
  consumed_bad_ += item.bad_records;
  return item;
}

void ConsumerQueue::count_consumed(const QueuedBatch& item) {
  consumed_from_.push_back(item.from);
  uint64_t& n = consumed_[item.batch.split_id];
  ++n;
  if (item.last_of_split) {
    consumed_done_.insert(item.batch.split_id);
    consumed_.erase(item.batch.split_id);
  }
}

void ConsumerQueue::position(LeasePosition* p) const {
  p->epoch = position_epoch();
  if (want_next_epoch_) return;  // nothing of the next epoch taken yet
  p->done.assign(consumed_done_.begin(), consumed_done_.end());
  for (auto [id, n] : consumed_) p->partial.emplace_back(id, n);
  p->bad_records = consumed_bad_;
}

double ConsumerQueue::fill(size_t workers) const {
  const uint64_t per_worker = deterministic_ ? queue_batches_ : credits_per_worker_;
  const uint64_t room =
      std::max<uint64_t>(1, std::min<uint64_t>(queue_batches_, std::max<size_t>(1, workers) * per_worker));
  // Held batches count: workers that are ahead of the awaited split are
  // not what the trainer waits for.
  return std::min(1.0, std::max(static_cast<double>(queue_.size() + reorder_.held()) / room,
                                static_cast<double>(bytes_) / std::max<uint64_t>(1, queue_bytes_)));
}

}  // namespace goldminer
