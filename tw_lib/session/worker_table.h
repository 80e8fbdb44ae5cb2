// The trainer session's record of every connection its loop thread has:
// data workers through their handshake (hello, auth) to ready, those rank
// 0 of data-parallel ranks holds or sent on, and other ranks' links; with
// each worker's lease requests, credits and queued batches, and the credit
// granting that keeps the session's queue bounded.
//
// Owned by the loop thread (tw_lib/session/session_loop.cc), which alone
// reads and changes it: no lock. What other threads see of the workers is
// in SessionCounters::per_worker (session_counters.h), under the session's
// lock.
#ifndef GOLDMINER_TW_LIB_SESSION_WORKER_TABLE_H_
#define GOLDMINER_TW_LIB_SESSION_WORKER_TABLE_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "gmcore/auth.h"
#include "goldminer/session.h"
#include "mpi_transport/transport.h"

namespace goldminer {

// kParked: rank 0 of a data-parallel job holds an authenticated worker
// until every rank has joined, then keeps it (kReady) or sends it to
// another rank (kRedirected, until it closes). kRank: another rank's
// session (session_ranks.cc).
enum class WorkerPhase { kHello, kAuth, kReady, kParked, kRedirected, kRank };

struct WorkerRecord {
  WorkerPhase phase = WorkerPhase::kHello;
  wire::PeerRole role = wire::PeerRole::kWorker;
  auth::Handshake handshake;  // its nonces and the address it dialed (gmcore/peer_auth.h)
  std::string id;
  std::chrono::steady_clock::time_point connected = std::chrono::steady_clock::now();
  uint32_t wants = 0;        // lease requests not yet granted
  uint32_t credits = 0;      // batches it may send that have not come yet
  uint32_t queued = 0;       // its batches in the queue
  bool draining = false;
  bool asked_to_drain = false;  // by this session (shrinking), not on its own

  // Ready and not draining: it may take splits.
  bool takes_splits() const { return phase == WorkerPhase::kReady && !draining; }
};

class WorkerTable {
 public:
  using PeerId = transport::PeerId;
  using Map = std::map<PeerId, WorkerRecord>;

  // A new connection (its handshake begins).
  void connected(PeerId peer) { workers_[peer] = WorkerRecord{}; }
  WorkerRecord* find(PeerId peer);
  WorkerRecord& at(PeerId peer) { return workers_.at(peer); }
  void erase(PeerId peer) { workers_.erase(peer); }
  Map::iterator begin() { return workers_.begin(); }
  Map::iterator end() { return workers_.end(); }

  size_t count(WorkerPhase phase) const;
  // The workers that may take splits, in the session's order.
  std::vector<PeerId> taking_splits() const;
  // The same, with their ids: those a shrink may drain.
  std::vector<std::pair<PeerId, std::string>> drainable() const;
  // The connections in one of `phases`.
  std::vector<PeerId> in_phases(std::initializer_list<WorkerPhase> phases) const;
  // Connections still in their handshake (or redirected and not closed)
  // after `timeout_s`.
  std::vector<PeerId> slow_handshakes(double timeout_s) const;

  // The consumer took batches these workers sent: room in the queue again.
  void consumed(const std::vector<PeerId>& from);
  // `peer` sent a batch: a credit spent.
  void spend_credit(PeerId peer);
  // A batch of `bytes` was queued: the recent batch size (a moving
  // average) that sizes the credits.
  void note_batch_bytes(uint64_t bytes) { batch_bytes_ = batch_bytes_ == 0 ? bytes : (7 * batch_bytes_ + bytes) / 8; }
  // Credits for the room the queue has, given to the ready workers' records
  // (worker_table.cc says how the room is shared); returns them, to be
  // sent.
  std::vector<std::pair<PeerId, uint32_t>> grant_credits(const SessionOptions& o);

 private:
  Map workers_;
  uint64_t batch_bytes_ = 0;  // recent batch frame size (moving average); 0: none yet
};

}  // namespace goldminer

#endif  // GOLDMINER_TW_LIB_SESSION_WORKER_TABLE_H_
