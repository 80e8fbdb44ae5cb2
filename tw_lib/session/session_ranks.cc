// The ranks of a data-parallel job sharing the job's data workers
// (SessionOptions::rank0; docs/ARCHITECTURE-dataplane.md, "Data-parallel ranks").
//
// Rank 0 listens where the job's workers connect (under Slurm the address
// the SPANK plugin gave the job). Every other rank listens on an address
// of its own and joins rank 0 as a peer of role kRank: it authenticates as
// a worker would, says where it listens (RankJoin) and, every second, how
// many workers it has (RankStatus). Rank 0 holds the workers that
// authenticate (kParked) until every rank has joined, then keeps each or
// sends it to the rank with the fewest (Redirect), counting its own; a
// worker that joins later is placed at once. Workers stay with the rank
// they were sent to: the ranks' lease tables are each their own, so rank 0
// is on no batch's path, and a rank that dies takes only its own share
// (DDP ends the job then anyway).
//
// Here, rank 0's side, on its loop thread, with its table of the other
// ranks (rank_table.h); the other ranks' side is their link to it
// (rank_link.h).
#include <algorithm>

#include "gmcore/log.h"
#include "tw_lib/session/session_impl.h"

namespace goldminer {
namespace {

// How long rank 0 holds workers for ranks that have not joined: then it
// places them over the ranks there are.
constexpr double kRankWaitS = 60;

}  // namespace

void Session::Impl::place_worker(PeerId peer, Worker* w) {
  if (!shares_workers_with_ranks()) return admit(peer, w);
  w->phase = Phase::kParked;
  place_parked();
}

void Session::Impl::place_parked() {
  if (!shares_workers_with_ranks()) return;
  const bool waited = seconds_since(created_) > kRankWaitS;
  if (!ranks_.all_joined() && !waited) return;
  bool said = false;
  size_t own = workers_.count(Phase::kReady);  // rank 0's workers
  for (auto& [peer, w] : workers_) {
    if (w.phase != Phase::kParked) continue;
    if (!ranks_.all_joined() && !said) {
      said = true;
      log::error("goldminer: session: ranks " + ranks_.missing() + " have not joined rank 0 within " +
                 std::to_string(static_cast<int>(kRankWaitS)) + " s: its workers go to the ranks that have");
    }
    const uint32_t to = ranks_.fewest_workers(own);
    if (to == 0) {
      admit(peer, &w);
      ++own;
      continue;
    }
    const std::string& address = ranks_.send_to(to);
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++counters_.redirected_total;
    }
    w.phase = Phase::kRedirected;
    w.connected = Clock::now();  // it has the handshake timeout to close
    send(peer, wire::Redirect{address});
    log::info("goldminer: session: worker " + w.id + " sent to rank " + std::to_string(to) + " at " + address);
  }
}

void Session::Impl::on_rank_message(PeerId peer, Worker* w, const wire::Message& m) {
  if (auto* j = std::get_if<wire::RankJoin>(&m)) {
    if (j->world_size != o_.world_size || j->rank == 0)
      return drop(peer,
                  "rank " + std::to_string(j->rank) + " of world size " + std::to_string(j->world_size) +
                      " joined rank 0 of world size " + std::to_string(o_.world_size),
                  true);
    if (std::optional<PeerId> old = ranks_.earlier_link(j->rank, peer))
      drop(*old, "rank " + std::to_string(j->rank) + " joined again", false);
    ranks_.join(j->rank, peer, j->address);
    w->id = "rank " + std::to_string(j->rank);
    log::info("goldminer: session: rank " + std::to_string(j->rank) + " joined, listening on " + j->address + " (" +
              std::to_string(ranks_.joined()) + " of " + std::to_string(o_.world_size) + " ranks)");
    place_parked();
  } else if (auto* st = std::get_if<wire::RankStatus>(&m)) {
    const RankTable::Sums sums = ranks_.status(peer, st->workers, st->batches_arrived, st->left_unasked);
    std::lock_guard<std::mutex> lock(mu_);
    counters_.other_ranks_workers = sums.workers;
    // A rank that left keeps its count.
    counters_.other_ranks_arrived = std::max(counters_.other_ranks_arrived, sums.arrived);
    if (sums.left_unasked > counters_.other_ranks_left) {
      counters_.other_ranks_left = sums.left_unasked;
      elastic_cv_.notify_all();  // replaced at once, as rank 0's own (the new one goes where fewest are)
    }
  } else if (auto* e = std::get_if<wire::Error>(&m)) {
    log::error("goldminer: session: " + w->id + ": " + e->message);
  } else if (!std::get_if<wire::Heartbeat>(&m)) {
    drop(peer, std::string("unexpected ") + wire::type_name(static_cast<wire::MessageType>(m.index() + 1)) +
                   " from another rank",
         true);
  }
}

void Session::Impl::forget_rank(PeerId peer) {
  if (std::optional<uint32_t> rank = ranks_.forget(peer))
    log::error("goldminer: session: rank " + std::to_string(*rank) + " went away");
}

}  // namespace goldminer
