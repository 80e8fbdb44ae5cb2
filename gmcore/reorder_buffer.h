// Deterministic delivery order (SessionOptions::deterministic): batches
// leave in the epoch's split order, each split's in sequence order, however
// the workers' batches interleave on arrival.
//
// The lease table already admits each split's batches in sequence order
// (0, 1, 2, ..., a re-run's delivered ones dropped), so within a split
// arrival order is delivery order; only splits interleave. The buffer holds
// the batches of splits after the head (the first split in the order not
// yet wholly delivered) and releases them when the head reaches them.
// Splits are wholly delivered when their last batch (last_of_split) leaves.
//
// What it holds is bounded by the session's credits (a worker's buffered
// batches count against its share of the queue), not here. Header-only;
// thread-compatible.
#ifndef GOLDMINER_GMCORE_REORDER_BUFFER_H_
#define GOLDMINER_GMCORE_REORDER_BUFFER_H_

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gmcore/status.h"

namespace goldminer {

template <typename T>
class ReorderBuffer {
 public:
  // Begins an epoch whose splits are delivered in `order`; the splits in
  // `done` were wholly delivered already and `partial` gives how many
  // batches of others were (a resumed position).
  void start(std::vector<uint64_t> order, const std::set<uint64_t>& done = {},
             const std::map<uint64_t, uint64_t>& partial = {}) {
    order_.clear();
    undelivered_.clear();
    for (uint64_t id : order)
      if (done.count(id) == 0 && undelivered_.insert(id).second) order_.push_back(id);
    next_.clear();
    for (const auto& [id, n] : partial) next_[id] = n;
    held_.clear();
    held_count_ = 0;
  }

  // A batch admitted by the lease table. Returns, in delivery order, the
  // batches that may leave now (this one among them if it is the head's
  // next). An error for a batch of a split not in the order (or already
  // delivered) or out of its split's sequence.
  Expected<std::vector<T>> add(uint64_t split, uint64_t sequence, bool last, T item) {
    if (undelivered_.count(split) == 0)
      return Status::error("reorder: split " + std::to_string(split) + " is not to be delivered this epoch");
    auto& held = held_[split];
    const uint64_t expected = next_[split] + held.size();
    if (sequence != expected)
      return Status::error("reorder: split " + std::to_string(split) + ": batch " + std::to_string(sequence) +
                           " where batch " + std::to_string(expected) + " was next");
    if (!held.empty() && held.back().last)
      return Status::error("reorder: split " + std::to_string(split) + ": batch after its last");
    held.push_back(Held{std::move(item), last});
    ++held_count_;
    std::vector<T> out;
    // Release from the head while its next batch is here.
    while (!order_.empty()) {
      auto it = held_.find(order_.front());
      if (it == held_.end() || it->second.empty()) break;
      Held h = std::move(it->second.front());
      it->second.pop_front();
      --held_count_;
      ++next_[order_.front()];
      out.push_back(std::move(h.item));
      if (h.last) {
        next_.erase(order_.front());
        undelivered_.erase(order_.front());
        held_.erase(it);
        order_.pop_front();
      }
    }
    return out;
  }

  // The split whose next batch is awaited; nothing once all are delivered.
  std::optional<uint64_t> head() const {
    if (order_.empty()) return std::nullopt;
    return order_.front();
  }
  size_t held() const { return held_count_; }

 private:
  struct Held {
    T item;
    bool last = false;
  };
  std::deque<uint64_t> order_;           // splits not wholly delivered, in delivery order
  std::set<uint64_t> undelivered_;       // the same, as a set
  std::map<uint64_t, uint64_t> next_;    // split -> batches delivered
  std::map<uint64_t, std::deque<Held>> held_;
  size_t held_count_ = 0;
};

}  // namespace goldminer

#endif  // GOLDMINER_GMCORE_REORDER_BUFFER_H_
