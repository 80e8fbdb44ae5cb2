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
#include <algorithm>
#include <chrono>
#include <thread>

#include "gmcore/auth.h"
#include "gmcore/log.h"
#include "tw_lib/session/session_impl.h"

namespace goldminer {
namespace {

// How long rank 0 holds workers for ranks that have not joined: then it
// places them over the ranks there are.
constexpr double kRankWaitS = 60;

}  // namespace

void Session::Impl::place_worker(PeerId peer, Worker* w) {
  if (o_.world_size <= 1 || o_.rank != 0 || o_.rank0.empty()) return admit(peer, w);
  w->phase = Phase::kParked;
  place_parked();
}

void Session::Impl::place_parked() {
  if (o_.world_size <= 1 || o_.rank != 0 || o_.rank0.empty()) return;
  const bool waited = seconds_since(created_) > kRankWaitS;
  if (!ranks_all_joined() && !waited) return;
  bool said = false;
  size_t own = 0;  // rank 0's workers
  for (const auto& [p, x] : workers_)
    if (x.phase == Phase::kReady) ++own;
  for (auto& [peer, w] : workers_) {
    if (w.phase != Phase::kParked) continue;
    if (!ranks_all_joined() && !said) {
      said = true;
      std::string missing;
      for (uint32_t r = 1; r < o_.world_size; ++r)
        if (!ranks_.count(r)) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      log::error("goldminer: session: ranks " + missing + " have not joined rank 0 within " +
                 std::to_string(static_cast<int>(kRankWaitS)) + " s: its workers go to the ranks that have");
    }
    // The rank with the fewest workers, rank 0 first on a tie: its own as
    // they are, another rank's as sent to it less those it lost (its
    // status lags the redirects: workers on their way to it would not
    // count, and it could get more than its share).
    uint32_t to = 0;
    size_t fewest = own;
    for (const auto& [r, rp] : ranks_) {
      const size_t load = rp.sent - std::min(rp.sent, rp.left_unasked);
      if (load < fewest) {
        to = r;
        fewest = load;
      }
    }
    if (to == 0) {
      admit(peer, &w);
      ++own;
      continue;
    }
    RankPeer& rp = ranks_[to];
    ++rp.sent;
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++redirected_total_;
    }
    w.phase = Phase::kRedirected;
    w.connected = Clock::now();  // it has the handshake timeout to close
    send(peer, wire::Redirect{rp.address});
    log::info("goldminer: session: worker " + w.id + " sent to rank " + std::to_string(to) + " at " + rp.address);
  }
}

void Session::Impl::on_rank_message(PeerId peer, Worker* w, const wire::Message& m) {
  if (auto* j = std::get_if<wire::RankJoin>(&m)) {
    if (j->world_size != o_.world_size || j->rank == 0)
      return drop(peer,
                  "rank " + std::to_string(j->rank) + " of world size " + std::to_string(j->world_size) +
                      " joined rank 0 of world size " + std::to_string(o_.world_size),
                  true);
    if (auto old = ranks_.find(j->rank); old != ranks_.end() && old->second.peer != peer)
      drop(old->second.peer, "rank " + std::to_string(j->rank) + " joined again", false);
    ranks_[j->rank] = RankPeer{peer, j->address, 0, 0};
    w->id = "rank " + std::to_string(j->rank);
    log::info("goldminer: session: rank " + std::to_string(j->rank) + " joined, listening on " + j->address + " (" +
              std::to_string(ranks_.size() + 1) + " of " + std::to_string(o_.world_size) + " ranks)");
    place_parked();
  } else if (auto* st = std::get_if<wire::RankStatus>(&m)) {
    uint32_t workers = 0;
    uint64_t arrived = 0;
    int left = 0;
    for (auto& [r, rp] : ranks_) {
      if (rp.peer == peer) {
        rp.workers = st->workers;
        rp.arrived = st->batches_arrived;
        rp.left_unasked = st->left_unasked;
      }
      workers += rp.workers;
      arrived += rp.arrived;
      left += static_cast<int>(rp.left_unasked);
    }
    std::lock_guard<std::mutex> lock(mu_);
    other_ranks_workers_ = workers;
    other_ranks_arrived_ = std::max(other_ranks_arrived_, arrived);  // a rank that left keeps its count
    if (left > other_ranks_left_) {
      other_ranks_left_ = left;
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
  for (auto it = ranks_.begin(); it != ranks_.end(); ++it) {
    if (it->second.peer != peer) continue;
    log::error("goldminer: session: rank " + std::to_string(it->first) + " went away");
    ranks_.erase(it);
    break;
  }
}

// Rank > 0: joins rank 0 and tells it, every second, how many workers this
// rank has. Tries until it reaches rank 0 (the ranks start together; rank 0
// may listen later) for as long as a worker may take to come; a lost link
// is logged: this rank keeps its workers, and gets no new ones.
void Session::Impl::rank_link() {
  const std::string me = "rank " + std::to_string(o_.rank);
  auto fail_link = [&](const std::string& why) { log::error("goldminer: session: " + me + ": " + why); };
  const auto start = Clock::now();
  const double patience = o_.first_worker_timeout_s > 0 ? o_.first_worker_timeout_s : 1e9;
  std::unique_ptr<transport::Endpoint> ep;
  std::string rank0 = o_.rank0;  // or where rank 0 published it listens instead
  auto looked = start;
  // Waits for the next message from rank 0 (nothing: timed out, or stopping).
  auto receive = [&](double timeout_s) -> Expected<std::optional<wire::Message>> {
    const auto t0 = Clock::now();
    while (!stop_ && seconds_since(t0) < timeout_s) {
      auto e = ep->poll(50);
      if (!e.ok()) return e.status();
      if (!e->has_value()) continue;
      if ((*e)->kind == Event::Kind::kDisconnected) return Status::error("rank 0 closed the link: " + (*e)->reason);
      if ((*e)->kind != Event::Kind::kMessage) continue;
      auto m = wire::decode_frame((*e)->frame->data(), (*e)->frame->size(), (*e)->frame->size());
      if (!m.ok()) return m.status();
      if (auto* err = std::get_if<wire::Error>(&*m)) return Status::error("rank 0 refused: " + err->message);
      return std::optional<wire::Message>(std::move(m).value());
    }
    return std::optional<wire::Message>();
  };
  auto send_to = [&](const wire::Message& m) {
    std::vector<uint8_t> frame = wire::encode(m);
    return ep->send(0, frame.data(), frame.size());
  };
  auto join = [&]() -> Status {
    auto nonce = auth::random_nonce();
    if (!nonce.ok()) return nonce.status();
    auto target = auth::dialed_address(rank0);
    if (!target.ok()) return target.status();
    Status s = send_to(wire::Hello{me + " (" + address_ + ")", 0, *nonce, wire::PeerRole::kRank, *target});
    if (!s.ok()) return s;
    auto c = receive(10);
    if (!c.ok()) return c.status();
    if (!*c || !std::holds_alternative<wire::Challenge>(**c)) return Status::error("rank 0 sent no challenge");
    auto answer = auth::answer(peer_auth_, *nonce, *target, std::get<wire::Challenge>(**c));
    if (!answer.ok()) return Status::error("rank 0 did not prove the job: " + answer.status().message());
    s = send_to(*answer);
    if (!s.ok()) return s;
    return send_to(wire::RankJoin{o_.rank, o_.world_size, address_});
  };
  for (;;) {
    if (stop_) return;
    transport::Options options;
    options.shm_arena_bytes = 0;  // no batches go to rank 0
    options.send_timeout_ms = 2000;  // a status rank 0 does not take within 2 s: the link is gone
    auto connected = transport::connect(rank0, options);
    Status s = connected.ok() ? Status() : connected.status();
    if (s.ok()) {
      ep = std::move(connected).value();
      s = join();
    }
    if (s.ok()) break;
    ep.reset();
    if (seconds_since(start) > patience) return fail_link("cannot join rank 0 at " + rank0 + ": " + s.message());
    // Rank 0's port taken by another process: rank 0 listens elsewhere
    // and says where (launch/trainer_rendezvous.h). Every 5 s: each rank
    // of the job asks slurmctld.
    if (o_.published_rank0 && seconds_since(looked) >= 5) {
      looked = Clock::now();
      if (std::string at = o_.published_rank0(); !at.empty() && at != rank0) {
        log::info("goldminer: session: " + me + ": rank 0 published that it listens at " + at + " (not " + rank0 + ")");
        rank0 = at;
        continue;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  log::info("goldminer: session: " + me + " joined rank 0 at " + rank0);
  auto last_status = Clock::time_point();
  while (!stop_) {
    if (seconds_since(last_status) >= 1) {
      last_status = Clock::now();
      wire::RankStatus st;
      {
        std::lock_guard<std::mutex> lock(mu_);
        st.workers = static_cast<uint32_t>(per_worker_.size());
        st.batches_arrived = arrived_total_;
        st.left_unasked = static_cast<uint32_t>(left_unasked_);
      }
      if (Status s = send_to(st); !s.ok()) return fail_link("the link to rank 0 failed: " + s.message());
    }
    auto m = receive(0.2);
    if (!m.ok()) {
      if (!stop_) fail_link(m.status().message() + " (this rank keeps its workers and gets no new ones)");
      return;
    }
    if (*m && std::holds_alternative<wire::Drain>(**m)) {
      log::info("goldminer: session: " + me + ": rank 0 ended its session");
      return;
    }
  }
}

}  // namespace goldminer
