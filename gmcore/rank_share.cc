#include "gmcore/rank_share.h"

#include <algorithm>
#include <string>

namespace goldminer {
namespace {

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

}  // namespace

uint64_t batch_size_at(uint64_t records, uint64_t batches, uint32_t batch_size, uint64_t sequence) {
  const uint64_t k = batches == 0 ? ceil_div(records, batch_size) : batches;
  if (sequence >= k || records == 0) return 0;
  // Full batches while what is left still has a record for each batch
  // after them, then the rest shared evenly (the first ones one larger).
  uint64_t full = k;
  if (batch_size > 1) full = records >= k ? std::min<uint64_t>(k, (records - k) / (batch_size - 1)) : 0;
  if (sequence < full) return batch_size;
  const uint64_t rest = records - std::min(records, full * batch_size), left = k - full;
  const uint64_t i = sequence - full;
  return rest / left + (i < rest % left ? 1 : 0);
}

Expected<RankDeal> deal_splits(const std::vector<uint64_t>& records, uint32_t batch_size, uint32_t world_size,
                               RankTail tail) {
  if (batch_size == 0) return Status::error("ranks: batch size is 0");
  if (world_size == 0) return Status::error("ranks: world size is 0");
  uint64_t total = 0;
  for (uint64_t n : records) total += n;
  RankDeal d;
  // Rank r reads records [start(r), start(r + 1)) of the splits laid end
  // to end.
  auto start = [&](uint64_t r) { return r * (total / world_size) + std::min<uint64_t>(r, total % world_size); };
  std::vector<uint64_t> rank_batches(world_size, 0), rank_records(world_size, 0);
  std::vector<std::vector<size_t>> of_rank(world_size);  // indices into d.pieces
  uint64_t at = 0;
  uint32_t rank = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    const uint64_t end = at + records[i];
    for (uint64_t from = at; from < end;) {
      while (rank + 1 < world_size && start(rank + 1) <= from) ++rank;
      const uint64_t to = rank + 1 < world_size ? std::min(end, start(rank + 1)) : end;
      RankPiece p{i, rank, from - at, to - from, ceil_div(to - from, batch_size)};
      rank_batches[rank] += p.batches;
      rank_records[rank] += p.records;
      of_rank[rank].push_back(d.pieces.size());
      d.pieces.push_back(p);
      from = to;
    }
    at = end;
  }
  if (tail == RankTail::kPad && total % world_size != 0) {
    // The k-th rank a record short repeats record k of the first split it
    // does not read (with more than k records): no record is read by more
    // than two ranks.
    uint64_t k = 0;
    for (uint32_t r = 0; r < world_size; ++r) {
      if (rank_records[r] == total / world_size + 1) continue;
      std::vector<bool> reads(records.size(), false);
      for (size_t j : of_rank[r]) reads[d.pieces[j].split] = true;
      size_t i = 0;
      while (i < records.size() && (reads[i] || records[i] <= k)) ++i;
      if (i == records.size())
        return Status::error("ranks: pad: rank " + std::to_string(r) + " reads a part of every split, so none is left " +
                             "to repeat a record of; use smaller splits or drop_last");
      RankPiece p{i, r, k++, 1, 1};
      ++rank_batches[r];
      ++rank_records[r];
      of_rank[r].push_back(d.pieces.size());
      d.pieces.push_back(p);
    }
  }
  const uint64_t most = *std::max_element(rank_batches.begin(), rank_batches.end());
  const uint64_t fewest = *std::min_element(rank_batches.begin(), rank_batches.end());
  if (tail == RankTail::kDropLast) {
    d.batches_per_rank = fewest;
    for (uint32_t r = 0; r < world_size; ++r) {
      uint64_t over = rank_batches[r] - fewest;
      for (auto it = of_rank[r].rbegin(); it != of_rank[r].rend() && over > 0; ++it) {
        RankPiece& p = d.pieces[*it];
        const uint64_t cut = std::min(over, p.batches);
        p.batches -= cut;
        p.records = std::min(p.records, p.batches * batch_size);
        over -= cut;
      }
    }
    d.pieces.erase(std::remove_if(d.pieces.begin(), d.pieces.end(), [](const RankPiece& p) { return p.batches == 0; }),
                   d.pieces.end());
    return d;
  }
  d.batches_per_rank = most;
  for (uint32_t r = 0; r < world_size; ++r) {
    if (rank_records[r] < most)
      return Status::error("ranks: " + std::to_string(world_size) + " ranks cannot take the same number of batches: " +
                           "rank " + std::to_string(r) + " has " + std::to_string(rank_records[r]) +
                           " records for the " + std::to_string(most) + " batches of another (batch size " +
                           std::to_string(batch_size) + "); use drop_last, pad, fewer ranks or a larger batch size");
    uint64_t short_by = most - rank_batches[r];
    // Its last parts give the extra batches, up to one per record.
    for (auto it = of_rank[r].rbegin(); it != of_rank[r].rend() && short_by > 0; ++it) {
      RankPiece& p = d.pieces[*it];
      const uint64_t more = std::min(short_by, p.records - p.batches);
      p.batches += more;
      short_by -= more;
    }
  }
  return d;
}

}  // namespace goldminer
