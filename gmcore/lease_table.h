// Which data worker processes which input split, so that every batch of an
// epoch reaches the trainer exactly once while workers join, leave, crash
// or are preempted (the first piece of the trainer session).
//
// Exactly once without buffering: a split's batches are delivered as they
// arrive, numbered 0, 1, 2, ... Its samples and random transforms are
// seeded per (seed, epoch, split), so a split re-run by another worker
// yields the same batches in the same order; the table remembers how many
// of a split's batches were delivered and drops the first ones of a re-run.
// A batch from a worker that no longer holds the split's lease is stale and
// dropped. state() is that bookkeeping; a table resumed from it delivers
// exactly what the epoch had left.
//
// Thread-compatible, not thread-safe: the session's event loop owns it.
#ifndef GOLDMINER_GMCORE_LEASE_TABLE_H_
#define GOLDMINER_GMCORE_LEASE_TABLE_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "gmcore/rank_share.h"
#include "gmcore/status.h"

namespace goldminer {

struct InputSplit {
  uint64_t id = 0;
  std::string file;
  uint64_t begin = 0, end = 0;  // record range [begin, end)
  uint32_t file_index = 0;      // index of `file` in the dataset's file list
  uint64_t offset = 0;          // byte offset of record `begin`, per the reader
};

struct LeaseConfig {
  uint64_t seed = 0;
  double lease_timeout_s = 30;     // a lease not renewed for this long expires
  // Grants follow the epoch's order (Lease::rank): a split that becomes
  // pending again (given back, its worker lost) takes its place in that
  // order instead of going first or last.
  bool deterministic_order = false;
  // False: every epoch takes the splits in plan order (the records' own
  // order is the epoch's: goldminer.DataLoader's sampler positions).
  bool shuffle_splits = true;
  // Data-parallel ranks (rank_share.h): each epoch this table leases only
  // the parts of splits dealt to `trainer_rank` of `world_size`, cut into
  // the batches the deal gives them; `batch_size` is what it counts in.
  uint32_t trainer_rank = 0, world_size = 1;
  uint32_t batch_size = 0;  // needed when world_size > 1
  RankTail tail = RankTail::kSmallerBatches;
};

struct Lease {
  InputSplit split;
  uint32_t epoch = 0;
  uint64_t split_seed = 0;  // seeds the split's shuffle buffer and transforms
  uint64_t skip_batches = 0;  // already delivered: the worker may skip them
  uint64_t rank = 0;  // the split's place in the epoch's order (epoch_order())
  uint64_t batches = 0;  // to cut the split into (a rank's share); 0: as the batch size makes
  // Records of the split before this rank's part (split.begin and
  // split.offset stay the split's; split.end is the part's end).
  uint64_t skip = 0;
};

enum class BatchVerdict {
  kDeliver,    // new: hand it to the training loop
  kDuplicate,  // a re-run split's batch that was delivered before: drop
  kStale,      // the sender no longer holds the split's lease: drop
};

// The data position: enough to resume an epoch exactly.
struct LeasePosition {
  uint32_t epoch = 0;
  uint64_t seed = 0;
  std::vector<uint64_t> done;  // split ids finished this epoch
  std::vector<std::pair<uint64_t, uint64_t>> partial;  // split id -> batches delivered
  // Fingerprint of what split ids and batch counts refer to (files, record
  // ranges, batch size, shuffle buffer), set by the trainer session; a
  // position is refused by a session with another plan. 0: not recorded.
  uint64_t plan = 0;
  // Corrupt records skipped (max_bad_records) in what was delivered this
  // epoch: a resumed session counts its budget and its skips from here.
  uint64_t bad_records = 0;
};

class LeaseTable {
 public:
  // Split ids must be unique. Errors: ranks that cannot take the same
  // number of batches (deal_splits).
  static Expected<LeaseTable> create(std::vector<InputSplit> splits, LeaseConfig config);

  // Begins `epoch`: every split pending, in the epoch's order (shuffled
  // with the seed and the epoch: the same order on every machine); with
  // ranks, every split of this rank's share.
  Status start_epoch(uint32_t epoch);
  // Resumes from a position taken with state() on the same splits (and,
  // with ranks, by the same rank: a split of another rank's share is an
  // error).
  Status resume(const LeasePosition& position);

  // The next pending split for `worker`, or nothing when none is pending.
  // `others`: the workers that may take splits now (`worker` among them
  // or not); a split that failed on `worker` this epoch (fail()) is left
  // to them while one of them has not failed on it too.
  std::optional<Lease> grant(uint64_t worker, double now, const std::vector<uint64_t>& others = {});
  // A batch `sequence` of `split_id` from `worker` (renews its lease).
  // Errors: unknown split, or a sequence beyond the next expected one.
  Expected<BatchVerdict> accept_batch(uint64_t worker, uint64_t split_id, uint64_t sequence, double now);
  // `worker` says `split_id` ended after `batches` batches.
  Status complete(uint64_t worker, uint64_t split_id, uint64_t batches);
  // `worker` gives a split back (SIGTERM drain): pending again, first in line.
  Status give_back(uint64_t worker, uint64_t split_id);
  // `worker` is gone (connection lost, kill -9): its splits become pending.
  // Returns their ids.
  std::vector<uint64_t> drop_worker(uint64_t worker);
  // `worker` failed on `split_id` through its environment (`cause`: its
  // Python process killed, a read error) and goes on: the split is pending
  // again, first in line, as when a worker is lost (its delivered batches
  // stay delivered), and the failure is counted. Returns the split's
  // failures this epoch (the caller bounds them).
  Expected<uint32_t> fail(uint64_t worker, uint64_t split_id, const std::string& cause);
  // The causes fail() was given for `split_id` this epoch, oldest first.
  std::vector<std::string> failures(uint64_t split_id) const;
  // Whether `split_id` failed on `worker` this epoch.
  bool failed_on(uint64_t split_id, uint64_t worker) const;
  // The split `split_id` as planned; nothing if unknown.
  std::optional<InputSplit> split(uint64_t split_id) const;
  // Renews every lease `worker` holds.
  void heartbeat(uint64_t worker, double now);
  // Leases not renewed since now - timeout become pending; returns the
  // workers that lost them (the session should disconnect those).
  std::vector<uint64_t> expire(double now);

  // The worker holding `split_id`'s lease; nothing if it is pending, done
  // or unknown.
  std::optional<uint64_t> holder(uint64_t split_id) const;
  bool is_pending(uint64_t split_id) const;
  // The split ids of this epoch in the order start_epoch() gave them.
  const std::vector<uint64_t>& epoch_order() const { return epoch_order_; }

  bool epoch_done() const { return done_count_ == share_count_; }
  // This rank's batches and records this epoch (all of them without ranks;
  // batches: 0 unless the table was given the batch size).
  uint64_t epoch_batches() const { return epoch_batches_; }
  uint64_t epoch_records() const { return epoch_records_; }
  uint32_t epoch() const { return epoch_; }
  size_t pending() const { return pending_.size(); }
  LeasePosition state() const;

  // The seed of a split's randomness in an epoch (SplitMix64 of the three).
  static uint64_t split_seed(uint64_t seed, uint32_t epoch, uint64_t split_id);

 private:
  enum class Phase { kPending, kLeased, kDone, kOtherRank };
  struct Entry {
    InputSplit split;
    Phase phase = Phase::kPending;
    uint64_t worker = 0;
    double renewed = 0;
    uint64_t delivered = 0;  // batches delivered this epoch
    uint64_t rank = 0;       // place in this epoch's order
    uint64_t batches = 0;    // this epoch's cut (rank_share.h); 0: natural
    uint64_t skip = 0;       // records before this rank's part of the split
    uint64_t keep = 0;       // records of that part
    // This epoch's failures (fail()): the workers it failed on, the causes.
    std::vector<uint64_t> failed_on{};
    std::vector<std::string> causes{};
  };

  LeaseTable(std::vector<InputSplit> splits, LeaseConfig config);
  Expected<size_t> find(uint64_t split_id) const;
  void make_pending(size_t i, bool first);

  std::vector<Entry> splits_;
  std::unordered_map<uint64_t, size_t> index_;  // split id -> splits_ index
  LeaseConfig config_;
  uint32_t epoch_ = 0;
  std::deque<size_t> pending_;  // indices into splits_, grant order
  std::vector<uint64_t> epoch_order_;
  size_t done_count_ = 0;
  size_t share_count_ = 0;  // splits of this rank this epoch
  uint64_t epoch_batches_ = 0, epoch_records_ = 0;
};

}  // namespace goldminer

#endif  // GOLDMINER_GMCORE_LEASE_TABLE_H_
