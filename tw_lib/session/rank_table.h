// Rank 0's table of the other ranks of a data-parallel job that joined it
// (SessionOptions::rank0; tw_lib/session/session_ranks.cc): where each
// listens, the workers and batches it last said it has (RankStatus), and
// the workers rank 0 sent it; which rank a worker goes to.
//
// Owned by rank 0's loop thread, which alone reads and changes it: no
// lock. The sums the elastic thread reads go to SessionCounters
// (session_counters.h) under the session's lock.
#ifndef GOLDMINER_TW_LIB_SESSION_RANK_TABLE_H_
#define GOLDMINER_TW_LIB_SESSION_RANK_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "mpi_transport/transport.h"

namespace goldminer {

class RankTable {
 public:
  using PeerId = transport::PeerId;

  explicit RankTable(uint32_t world_size) : world_size_(world_size) {}

  // Every other rank has joined.
  bool all_joined() const { return ranks_.size() + 1 >= world_size_; }
  // Ranks joined, this one included.
  size_t joined() const { return ranks_.size() + 1; }
  // The ranks that have not joined: "1, 3".
  std::string missing() const;
  // The connection of an earlier link of `rank`, if it is not `peer`: a
  // rank that joins again replaces it.
  std::optional<PeerId> earlier_link(uint32_t rank, PeerId peer) const;
  // `rank` joined on connection `peer`, listening at `address`.
  void join(uint32_t rank, PeerId peer, std::string address) { ranks_[rank] = Rank{peer, std::move(address)}; }
  // The connection `peer` went away: the rank it was, if any.
  std::optional<uint32_t> forget(PeerId peer);

  // The other ranks' sums as they last said.
  struct Sums {
    uint32_t workers = 0;
    uint64_t arrived = 0;  // batches
    int left_unasked = 0;  // workers lost
  };
  // The rank on connection `peer` said it has `workers`, had `arrived`
  // batches and lost `left_unasked` workers; returns the sums over all.
  Sums status(PeerId peer, uint32_t workers, uint64_t arrived, uint32_t left_unasked);

  // Where the next worker goes: the rank with the fewest workers, rank 0
  // (which has `own`) first on a tie; 0 for rank 0.
  uint32_t fewest_workers(size_t own) const;
  // A worker is sent to `rank` (not 0): where that rank listens.
  const std::string& send_to(uint32_t rank);

 private:
  struct Rank {
    PeerId peer = 0;
    std::string address;
    uint32_t workers = 0;       // as it last said (RankStatus)
    uint64_t arrived = 0;       // batches, as it last said
    uint32_t left_unasked = 0;  // workers lost, as it last said
    uint32_t sent = 0;          // workers sent to it in all
  };

  const uint32_t world_size_;
  std::map<uint32_t, Rank> ranks_;  // by rank
};

}  // namespace goldminer

#endif  // GOLDMINER_TW_LIB_SESSION_RANK_TABLE_H_
