// A data-parallel rank's link to rank 0 (tw_lib/session/rank_link.h).
#include "tw_lib/session/rank_link.h"

#include <chrono>
#include <thread>
#include <utility>
#include <vector>

#include "gmcore/log.h"

namespace goldminer {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

RankLink::RankLink(const SessionOptions& o, const auth::PeerAuth& peer_auth, std::string address,
                   StatusSource status)
    : o_(o),
      peer_auth_(peer_auth),
      address_(std::move(address)),
      me_("rank " + std::to_string(o.rank)),
      status_(std::move(status)),
      rank0_(o.rank0) {}

void RankLink::start() { thread_ = std::thread([this] { run(); }); }

void RankLink::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void RankLink::fail_link(const std::string& why) const { log::error("goldminer: session: " + me_ + ": " + why); }

void RankLink::run() {
  if (!reach_rank0()) return;
  log::info("goldminer: session: " + me_ + " joined rank 0 at " + rank0_);
  report();
  ep_.reset();
}

Expected<std::optional<wire::Message>> RankLink::receive(double timeout_s) {
  const auto t0 = Clock::now();
  while (!stop_ && seconds_since(t0) < timeout_s) {
    auto e = ep_->poll(50);
    if (!e.ok()) return e.status();
    if (!e->has_value()) continue;
    if ((*e)->kind == transport::Event::Kind::kDisconnected)
      return Status::error("rank 0 closed the link: " + (*e)->reason);
    if ((*e)->kind != transport::Event::Kind::kMessage) continue;
    auto m = wire::decode_frame((*e)->frame->data(), (*e)->frame->size(), (*e)->frame->size());
    if (!m.ok()) return m.status();
    if (auto* err = std::get_if<wire::Error>(&*m)) return Status::error("rank 0 refused: " + err->message);
    return std::optional<wire::Message>(std::move(m).value());
  }
  return std::optional<wire::Message>();
}

Status RankLink::send(const wire::Message& m) {
  std::vector<uint8_t> frame = wire::encode(m);
  return ep_->send(0, frame.data(), frame.size());
}

Status RankLink::join() {
  auto nonce = auth::random_nonce();
  if (!nonce.ok()) return nonce.status();
  auto target = auth::dialed_address(rank0_);
  if (!target.ok()) return target.status();
  Status s = send(wire::Hello{me_ + " (" + address_ + ")", 0, *nonce, wire::PeerRole::kRank, *target});
  if (!s.ok()) return s;
  auto c = receive(10);
  if (!c.ok()) return c.status();
  if (!*c || !std::holds_alternative<wire::Challenge>(**c)) return Status::error("rank 0 sent no challenge");
  auto answer = auth::answer(peer_auth_, *nonce, *target, std::get<wire::Challenge>(**c));
  if (!answer.ok()) return Status::error("rank 0 did not prove the job: " + answer.status().message());
  s = send(*answer);
  if (!s.ok()) return s;
  return send(wire::RankJoin{o_.rank, o_.world_size, address_});
}

bool RankLink::reach_rank0() {
  const auto start = Clock::now();
  const double patience = o_.first_worker_timeout_s > 0 ? o_.first_worker_timeout_s : 1e9;
  auto looked = start;
  for (;;) {
    if (stop_) return false;
    transport::Options options;
    options.shm_arena_bytes = 0;  // no batches go to rank 0
    options.send_timeout_ms = 2000;  // a status rank 0 does not take within 2 s: the link is gone
    auto connected = transport::connect(rank0_, options);
    Status s = connected.ok() ? Status() : connected.status();
    if (s.ok()) {
      ep_ = std::move(connected).value();
      s = join();
    }
    if (s.ok()) return true;
    ep_.reset();
    if (seconds_since(start) > patience) {
      fail_link("cannot join rank 0 at " + rank0_ + ": " + s.message());
      return false;
    }
    // Rank 0's port taken by another process: rank 0 listens elsewhere
    // and says where (launch/trainer_rendezvous.h). Every 5 s: each rank
    // of the job asks slurmctld.
    if (o_.published_rank0 && seconds_since(looked) >= 5) {
      looked = Clock::now();
      if (std::string at = o_.published_rank0(); !at.empty() && at != rank0_) {
        log::info("goldminer: session: " + me_ + ": rank 0 published that it listens at " + at + " (not " + rank0_ +
                  ")");
        rank0_ = at;
        continue;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

void RankLink::report() {
  auto last_status = Clock::time_point();
  while (!stop_) {
    if (seconds_since(last_status) >= 1) {
      last_status = Clock::now();
      if (Status s = send(status_()); !s.ok()) return fail_link("the link to rank 0 failed: " + s.message());
    }
    auto m = receive(0.2);
    if (!m.ok()) {
      if (!stop_) fail_link(m.status().message() + " (this rank keeps its workers and gets no new ones)");
      return;
    }
    if (*m && std::holds_alternative<wire::Drain>(**m)) {
      log::info("goldminer: session: " + me_ + ": rank 0 ended its session");
      return;
    }
  }
}

}  // namespace goldminer
