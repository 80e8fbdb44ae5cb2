// Which data-parallel rank (a DDP trainer process) reads which records in
// an epoch, so that every sample goes to exactly one rank and every rank
// takes the same number of batches (DDP's ranks step together: one more
// batch on one rank hangs the others in their all-reduce).
//
// Every rank computes the same deal from what it already has (the epoch's
// split order, seeded; the splits' record counts; the batch size), so no
// rank or worker coordinates the deal: a rank that dies takes nothing of
// the others' with it.
//
// Plain functions; thread-safe.
#ifndef GOLDMINER_GMCORE_RANK_SHARE_H_
#define GOLDMINER_GMCORE_RANK_SHARE_H_

#include <cstdint>
#include <vector>

#include "gmcore/status.h"

namespace goldminer {

// The records of one split that one rank reads: `records` records after
// the split's first `skip`, cut into `batches` batches (batch_size_at).
struct RankPiece {
  size_t split = 0;  // index into the records given to deal_splits
  uint32_t owner = 0;
  uint64_t skip = 0, records = 0, batches = 0;
};

struct RankDeal {
  std::vector<RankPiece> pieces;  // in the order of the splits; one per (split, rank) at most
  uint64_t batches_per_rank = 0;
};

// What ranks do with records that do not divide evenly among them.
enum class RankTail {
  kSmallerBatches,  // every record read once; a rank short of batches cuts smaller ones
  kDropLast,        // as many batches as the rank with the fewest; the others leave some out
  kPad,             // every rank as many records (a rank short of one reads another's again), then as default
};

// Deals the splits of `records[i]` records (in the epoch's order) to
// `world_size` ranks with batches of at most `batch_size`:
// - the splits, one after another, are cut into world_size consecutive
//   ranges of equal records (one more on the first ranks where they do not
//   divide): rank r reads the r-th, so a split may be read by two ranks,
//   each its own part;
// - each part is cut into batches of the batch size, its last smaller;
// - by default a rank with fewer batches than another cuts some of its
//   parts into more, smaller batches (from their ends), so every sample is
//   read once and every rank takes as many batches as the rank with the
//   most; an error where a rank has fewer records than that (batch size
//   1, or nearly as many ranks as records);
// - kDropLast: every rank takes as many batches as the rank with the
//   fewest: the others leave out their last parts' last batches (as
//   torch's DistributedSampler(drop_last=True) drops the tail that does
//   not divide);
// - kPad: the k-th rank with a record fewer than the others also reads
//   record k of the first split (in the epoch's order) it does not read
//   otherwise, as DistributedSampler(drop_last=False) repeats the first
//   indices; then batches as by default. An error where a rank reads a
//   part of every split.
Expected<RankDeal> deal_splits(const std::vector<uint64_t>& records, uint32_t batch_size, uint32_t world_size,
                               RankTail tail);

// The size of batch `sequence` of `records` records cut into `batches`
// batches of at most `batch_size` (batches == 0: as many as the batch size
// makes): full batches first, then, where there are more batches than
// that, what is left shared evenly so that none is empty; 0 past the end.
uint64_t batch_size_at(uint64_t records, uint64_t batches, uint32_t batch_size, uint64_t sequence);

}  // namespace goldminer

#endif  // GOLDMINER_GMCORE_RANK_SHARE_H_
