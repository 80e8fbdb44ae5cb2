#include "gmcore/lease_table.h"

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "gmcore/rank_share.h"
#include "gmcore/splitmix.h"

namespace goldminer {
namespace {

std::string split_name(uint64_t id) { return "lease table: split " + std::to_string(id); }

}  // namespace

uint64_t LeaseTable::split_seed(uint64_t seed, uint32_t epoch, uint64_t split_id) {
  return splitmix64(splitmix64(splitmix64(seed) ^ epoch) ^ split_id);
}

LeaseTable::LeaseTable(std::vector<InputSplit> splits, LeaseConfig config) : config_(config) {
  for (auto& s : splits) {
    index_[s.id] = splits_.size();
    splits_.push_back(Entry{std::move(s)});
  }
}

Expected<LeaseTable> LeaseTable::create(std::vector<InputSplit> splits, LeaseConfig config) {
  std::set<uint64_t> ids;
  for (const auto& s : splits)
    if (!ids.insert(s.id).second) return Status::error(split_name(s.id) + ": id given twice");
  if (config.world_size == 0 || config.trainer_rank >= config.world_size)
    return Status::error("lease table: rank " + std::to_string(config.trainer_rank) + " of world size " +
                         std::to_string(config.world_size));
  if (config.world_size > 1 && config.batch_size == 0)
    return Status::error("lease table: ranks need the batch size");
  LeaseTable t(std::move(splits), config);
  Status s = t.start_epoch(0);
  if (!s.ok()) return s;
  return t;
}

Status LeaseTable::start_epoch(uint32_t epoch) {
  epoch_ = epoch;
  done_count_ = 0;
  pending_.clear();
  std::vector<size_t> order(splits_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  // Fisher-Yates with an explicit draw: the same order on every machine.
  std::mt19937_64 rng(split_seed(config_.seed, epoch, UINT64_MAX));
  if (config_.shuffle_splits)
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng() % i]);
  epoch_order_.clear();
  share_count_ = 0;
  epoch_batches_ = 0;
  epoch_records_ = 0;
  auto add = [&](size_t i, uint64_t skip, uint64_t keep, uint64_t batches) {
    Entry& e = splits_[i];
    e.phase = Phase::kPending;
    e.skip = skip;
    e.keep = keep;
    e.batches = batches;
    e.rank = epoch_order_.size();
    pending_.push_back(i);
    epoch_order_.push_back(e.split.id);
    ++share_count_;
    epoch_records_ += keep;
    epoch_batches_ += batches != 0 || config_.batch_size == 0 ? batches : (keep + config_.batch_size - 1) / config_.batch_size;
  };
  for (Entry& e : splits_) {
    e.delivered = 0;
    e.phase = Phase::kOtherRank;
    e.failed_on.clear();
    e.causes.clear();
  }
  if (config_.world_size <= 1) {
    for (size_t i : order) add(i, 0, splits_[i].split.end - splits_[i].split.begin, 0);
    return Status();
  }
  // Every rank deals the same order the same way (rank_share.h).
  std::vector<uint64_t> records;
  for (size_t i : order) records.push_back(splits_[i].split.end - splits_[i].split.begin);
  auto deal = deal_splits(records, config_.batch_size, config_.world_size, config_.tail);
  if (!deal.ok()) return Status::error("lease table: epoch " + std::to_string(epoch) + ": " + deal.status().message());
  for (const RankPiece& p : deal->pieces)
    if (p.owner == config_.trainer_rank) add(order[p.split], p.skip, p.records, p.batches);
  return Status();
}

std::optional<uint64_t> LeaseTable::holder(uint64_t split_id) const {
  auto i = find(split_id);
  if (!i.ok() || splits_[*i].phase != Phase::kLeased) return std::nullopt;
  return splits_[*i].worker;
}

bool LeaseTable::is_pending(uint64_t split_id) const {
  auto i = find(split_id);
  return i.ok() && splits_[*i].phase == Phase::kPending;
}

Status LeaseTable::resume(const LeasePosition& position) {
  if (position.seed != config_.seed)
    return Status::error("lease table: resume: position has seed " + std::to_string(position.seed) +
                         ", this table " + std::to_string(config_.seed));
  // A position names each split at most once: a split counted twice as done
  // would end the epoch before another split was delivered.
  std::set<uint64_t> named;
  std::vector<uint64_t> ids = position.done;
  for (const auto& p : position.partial) ids.push_back(p.first);
  for (uint64_t id : ids)
    if (!named.insert(id).second)
      return Status::error("lease table: resume: position names split " + std::to_string(id) +
                           " twice (in done or partial)");
  Status started = start_epoch(position.epoch);
  if (!started.ok()) return started;
  auto ours = [&](uint64_t id) -> Expected<size_t> {
    auto i = find(id);
    if (!i.ok()) return Status::error("lease table: resume: " + i.status().message());
    if (splits_[*i].phase == Phase::kOtherRank)
      return Status::error("lease table: resume: split " + std::to_string(id) + " is not rank " +
                           std::to_string(config_.trainer_rank) + "'s in epoch " + std::to_string(epoch_) +
                           " (a position of another rank?)");
    return i;
  };
  for (uint64_t id : position.done) {
    auto i = ours(id);
    if (!i.ok()) return i.status();
    splits_[*i].phase = Phase::kDone;
    ++done_count_;
  }
  for (const auto& [id, delivered] : position.partial) {
    auto i = ours(id);
    if (!i.ok()) return i.status();
    splits_[*i].delivered = delivered;
  }
  pending_.erase(std::remove_if(pending_.begin(), pending_.end(),
                                [&](size_t i) { return splits_[i].phase == Phase::kDone; }),
                 pending_.end());
  return Status();
}

Expected<size_t> LeaseTable::find(uint64_t split_id) const {
  auto it = index_.find(split_id);
  if (it == index_.end()) return Status::error(split_name(split_id) + ": unknown");
  return it->second;
}

void LeaseTable::make_pending(size_t i, bool first) {
  splits_[i].phase = Phase::kPending;
  if (config_.deterministic_order) {
    auto at = std::lower_bound(pending_.begin(), pending_.end(), i,
                               [&](size_t a, size_t b) { return splits_[a].rank < splits_[b].rank; });
    pending_.insert(at, i);
  } else if (first) {
    pending_.push_front(i);
  } else {
    pending_.push_back(i);
  }
}

std::optional<Lease> LeaseTable::grant(uint64_t worker, double now, const std::vector<uint64_t>& others) {
  auto next = std::find_if(pending_.begin(), pending_.end(), [&](size_t i) {
    const auto& on = splits_[i].failed_on;
    auto failed = [&](uint64_t w) { return std::find(on.begin(), on.end(), w) != on.end(); };
    return on.empty() || !failed(worker) ||
           std::all_of(others.begin(), others.end(), [&](uint64_t w) { return w == worker || failed(w); });
  });
  if (next == pending_.end()) return std::nullopt;
  size_t i = *next;
  pending_.erase(next);
  Entry& e = splits_[i];
  e.phase = Phase::kLeased;
  e.worker = worker;
  e.renewed = now;
  Lease lease{e.split, epoch_, split_seed(config_.seed, epoch_, e.split.id), e.delivered, e.rank, e.batches, e.skip};
  lease.split.end = lease.split.begin + e.skip + e.keep;
  return lease;
}

Expected<BatchVerdict> LeaseTable::accept_batch(uint64_t worker, uint64_t split_id, uint64_t sequence,
                                                double now) {
  auto i = find(split_id);
  if (!i.ok()) return i.status();
  Entry& e = splits_[*i];
  if (e.phase != Phase::kLeased || e.worker != worker) return BatchVerdict::kStale;
  e.renewed = now;
  if (sequence < e.delivered) return BatchVerdict::kDuplicate;
  if (sequence > e.delivered)
    return Status::error(split_name(split_id) + ": batch " + std::to_string(sequence) + " from worker " +
                         std::to_string(worker) + " before batch " + std::to_string(e.delivered));
  ++e.delivered;
  return BatchVerdict::kDeliver;
}

Status LeaseTable::complete(uint64_t worker, uint64_t split_id, uint64_t batches) {
  auto i = find(split_id);
  if (!i.ok()) return i.status();
  Entry& e = splits_[*i];
  if (e.phase != Phase::kLeased || e.worker != worker)
    return Status::error(split_name(split_id) + ": worker " + std::to_string(worker) + " does not hold its lease");
  if (batches != e.delivered)
    return Status::error(split_name(split_id) + ": worker " + std::to_string(worker) + " ended it after " +
                         std::to_string(batches) + " batches, " + std::to_string(e.delivered) + " were delivered");
  e.phase = Phase::kDone;
  ++done_count_;
  return Status();
}

Status LeaseTable::give_back(uint64_t worker, uint64_t split_id) {
  auto i = find(split_id);
  if (!i.ok()) return i.status();
  Entry& e = splits_[*i];
  if (e.phase != Phase::kLeased || e.worker != worker)
    return Status::error(split_name(split_id) + ": worker " + std::to_string(worker) + " does not hold its lease");
  make_pending(*i, true);
  return Status();
}

std::vector<uint64_t> LeaseTable::drop_worker(uint64_t worker) {
  std::vector<uint64_t> ids;
  for (size_t i = 0; i < splits_.size(); ++i)
    if (splits_[i].phase == Phase::kLeased && splits_[i].worker == worker) {
      make_pending(i, true);
      ids.push_back(splits_[i].split.id);
    }
  return ids;
}

Expected<uint32_t> LeaseTable::fail(uint64_t worker, uint64_t split_id, const std::string& cause) {
  auto i = find(split_id);
  if (!i.ok()) return i.status();
  Entry& e = splits_[*i];
  if (e.phase != Phase::kLeased || e.worker != worker)
    return Status::error(split_name(split_id) + ": worker " + std::to_string(worker) + " does not hold its lease");
  e.failed_on.push_back(worker);
  e.causes.push_back(cause);
  make_pending(*i, true);
  return static_cast<uint32_t>(e.causes.size());
}

std::vector<std::string> LeaseTable::failures(uint64_t split_id) const {
  auto i = find(split_id);
  return i.ok() ? splits_[*i].causes : std::vector<std::string>();
}

bool LeaseTable::failed_on(uint64_t split_id, uint64_t worker) const {
  auto i = find(split_id);
  if (!i.ok()) return false;
  const auto& on = splits_[*i].failed_on;
  return std::find(on.begin(), on.end(), worker) != on.end();
}

std::optional<InputSplit> LeaseTable::split(uint64_t split_id) const {
  auto i = find(split_id);
  if (!i.ok()) return std::nullopt;
  return splits_[*i].split;
}

void LeaseTable::heartbeat(uint64_t worker, double now) {
  for (auto& e : splits_)
    if (e.phase == Phase::kLeased && e.worker == worker) e.renewed = now;
}

std::vector<uint64_t> LeaseTable::expire(double now) {
  std::vector<uint64_t> lost;
  for (size_t i = 0; i < splits_.size(); ++i) {
    Entry& e = splits_[i];
    if (e.phase == Phase::kLeased && now - e.renewed > config_.lease_timeout_s) {
      if (std::find(lost.begin(), lost.end(), e.worker) == lost.end()) lost.push_back(e.worker);
      make_pending(i, true);
    }
  }
  return lost;
}

LeasePosition LeaseTable::state() const {
  LeasePosition p;
  p.epoch = epoch_;
  p.seed = config_.seed;
  for (const auto& e : splits_) {
    if (e.phase == Phase::kDone) p.done.push_back(e.split.id);
    else if (e.delivered > 0) p.partial.emplace_back(e.split.id, e.delivered);
  }
  return p;
}

}  // namespace goldminer
