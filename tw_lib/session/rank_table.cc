// Rank 0's table of the other ranks (tw_lib/session/rank_table.h).
#include "tw_lib/session/rank_table.h"

#include <algorithm>

namespace goldminer {

std::string RankTable::missing() const {
  std::string out;
  for (uint32_t r = 1; r < world_size_; ++r)
    if (!ranks_.count(r)) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

std::optional<transport::PeerId> RankTable::earlier_link(uint32_t rank, PeerId peer) const {
  auto it = ranks_.find(rank);
  if (it == ranks_.end() || it->second.peer == peer) return std::nullopt;
  return it->second.peer;
}

std::optional<uint32_t> RankTable::forget(PeerId peer) {
  for (auto it = ranks_.begin(); it != ranks_.end(); ++it) {
    if (it->second.peer != peer) continue;
    const uint32_t rank = it->first;
    ranks_.erase(it);
    return rank;
  }
  return std::nullopt;
}

RankTable::Sums RankTable::status(PeerId peer, uint32_t workers, uint64_t arrived, uint32_t left_unasked) {
  Sums sums;
  for (auto& [r, rp] : ranks_) {
    if (rp.peer == peer) {
      rp.workers = workers;
      rp.arrived = arrived;
      rp.left_unasked = left_unasked;
    }
    sums.workers += rp.workers;
    sums.arrived += rp.arrived;
    sums.left_unasked += static_cast<int>(rp.left_unasked);
  }
  return sums;
}

// Another rank's load is the workers sent to it less those it lost: its
// status lags the redirects (workers on their way to it would not count,
// and it could get more than its share).
uint32_t RankTable::fewest_workers(size_t own) const {
  uint32_t to = 0;
  size_t fewest = own;
  for (const auto& [r, rp] : ranks_) {
    const size_t load = rp.sent - std::min(rp.sent, rp.left_unasked);
    if (load < fewest) {
      to = r;
      fewest = load;
    }
  }
  return to;
}

const std::string& RankTable::send_to(uint32_t rank) {
  Rank& rp = ranks_[rank];
  ++rp.sent;
  return rp.address;
}

}  // namespace goldminer
