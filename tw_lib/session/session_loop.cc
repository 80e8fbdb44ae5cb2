// The trainer session's loop thread (tw_lib/session/session_impl.h): it owns the
// endpoint, admits workers (hello, challenge, auth, program), leases them
// splits, takes their batches into the queue (or, deterministic order,
// holds them until it is their turn) and grants credits for the room the
// queue has.
//
// Worker protocol, trainer side:
//   connected -> Hello -> Challenge(nonce, proof) -> Auth(proof) verified ->
//   Program + Credit(credits_per_worker) -> LeaseRequest* / Batch* /
//   LeaseReturn* / Heartbeat* ... -> disconnected. The session sends each
//   ready worker a Heartbeat every kSessionHeartbeatS besides.
// Anything else, or a frame the decoder refuses, drops that connection.
#include <algorithm>
#include <cstdio>
#include <utility>

#include "gmcore/log.h"
#include "tw_lib/session/session_impl.h"

namespace goldminer {

std::string node_of_worker(const std::string& worker_id) { return worker_id.substr(0, worker_id.rfind(':')); }

std::vector<transport::PeerId> choose_drains(const std::vector<std::pair<transport::PeerId, std::string>>& ready,
                                             size_t n, const std::string& first_node) {
  std::vector<transport::PeerId> out;
  auto take = [&](bool on_first_node) {
    for (const auto& [peer, id] : ready)
      if (out.size() < n && (!first_node.empty() && node_of_worker(id) == first_node) == on_first_node)
        out.push_back(peer);
  };
  take(true);
  take(false);
  return out;
}
namespace {

using transport::PeerId;

std::string peer_name(PeerId p) { return "connection " + std::to_string(p); }

}  // namespace

void Session::Impl::run() {
  created_ = Clock::now();
  auto last_check = Clock::now();
  auto last_heartbeat = Clock::now();
  while (!stop_) {
    auto e = ep_->poll(2);
    if (!e.ok()) {
      fail("session: transport: " + e.status().message());
      break;
    }
    if (e->has_value()) {
      Event& ev = **e;
      switch (ev.kind) {
        case Event::Kind::kConnected:
          workers_[ev.peer] = Worker{};
          break;
        case Event::Kind::kMessage:
          on_message(ev.peer, std::move(ev.frame));
          break;
        case Event::Kind::kDisconnected:
          forget(ev.peer, ev.reason, Leave::kLeft);
          break;
      }
    }
    // Credits for the room the queue has; epoch changes; drain requests.
    bool start_epoch = false;
    size_t drains = 0;
    std::string drain_first_on;  // drain the workers on this node first
    std::vector<PeerId> consumed;
    {
      std::lock_guard<std::mutex> lock(mu_);
      consumed.swap(consumed_from_);
      start_epoch = start_next_epoch_;
      start_next_epoch_ = false;
      drains = drain_requests_;
      drain_requests_ = 0;
      drain_first_on = drains > 0 ? std::exchange(drain_first_on_, std::string()) : std::string();
    }
    for (PeerId p : consumed)
      if (auto w = workers_.find(p); w != workers_.end() && w->second.queued > 0) --w->second.queued;
    grant_credits();
    if (drains > 0) {
      std::vector<std::pair<PeerId, std::string>> ready;
      {
        std::lock_guard<std::mutex> lock(mu_);  // per_worker_ holds the ids
        for (const auto& [peer, w] : workers_)
          if (w.phase == Phase::kReady && !w.draining) ready.emplace_back(peer, per_worker_[peer].id);
      }
      for (PeerId peer : choose_drains(ready, drains, drain_first_on)) {
        Worker& w = workers_.at(peer);
        w.draining = true;
        w.asked_to_drain = true;
        {
          std::lock_guard<std::mutex> lock(mu_);  // the elastic loop counts it as leaving
          per_worker_[peer].draining = true;
        }
        send(peer, wire::Drain{});
      }
    }
    if (start_epoch) {
      if (Status dealt = table_.start_epoch(table_.epoch() + 1); !dealt.ok()) fail("session: " + dealt.message());
      if (o_.deterministic) {
        std::lock_guard<std::mutex> lock(mu_);  // metrics() reads it
        reorder_.start(table_.epoch_order());
      }
      epoch_end_queued_ = false;
    }
    if (table_.epoch_done() && !epoch_end_queued_) {
      epoch_end_queued_ = true;
      if (o_.deterministic && reorder_.head())  // every split's last batch came: nothing can be held
        fail("session: internal error: split " + std::to_string(*reorder_.head()) +
             " still held back at the end of the epoch");
      std::lock_guard<std::mutex> lock(mu_);
      Item end;
      end.end_of_epoch = true;
      queue_.push_back(std::move(end));
      cv_.notify_all();
    }
    grant_leases();
    // Workers hear from the session even while the trainer takes nothing:
    // silence tells them its process or node is gone (WorkerOptions::trainer_timeout_s).
    if (seconds_since(last_heartbeat) >= wire::kSessionHeartbeatS) {
      last_heartbeat = Clock::now();
      const auto unix_ms = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                     std::chrono::system_clock::now().time_since_epoch())
                                                     .count());
      for (auto& [peer, w] : workers_)
        if (w.phase == Phase::kReady || w.phase == Phase::kParked || w.phase == Phase::kRank)
          send(peer, wire::Heartbeat{unix_ms});
    }
    if (seconds_since(last_check) > 0.25) {
      last_check = Clock::now();
      check_first_worker();
      for (uint64_t peer : table_.expire(now())) drop(peer, "no heartbeat within the lease timeout", false);
      std::vector<PeerId> slow;
      for (auto& [peer, w] : workers_)
        if ((w.phase == Phase::kHello || w.phase == Phase::kAuth || w.phase == Phase::kRedirected) &&
            seconds_since(w.connected) > o_.handshake_timeout_s)
          slow.push_back(peer);
      for (PeerId p : slow) drop(p, "did not authenticate in time", true);
      place_parked();
    }
  }
  // Tell connected workers to leave, and the other ranks that this one ends.
  for (auto& [peer, w] : workers_)
    if (w.phase == Phase::kReady || w.phase == Phase::kRank) send(peer, wire::Drain{});
}

void Session::Impl::send(PeerId peer, const wire::Message& m) {
  std::vector<uint8_t> frame = wire::encode(m);
  Status s = ep_->send(peer, frame.data(), frame.size());
  if (!s.ok()) log::verbose("goldminer: session: " + peer_name(peer) + ": " + s.message());
}

// Forgets a connection (closing it unless the peer left); its splits go
// back to pending.
void Session::Impl::forget(PeerId peer, const std::string& why, Leave how) {
  auto it = workers_.find(peer);
  if (it == workers_.end()) return;
  if (it->second.phase == Phase::kRank) forget_rank(peer);
  if (it->second.phase == Phase::kRedirected || it->second.phase == Phase::kRank) {
    workers_.erase(it);  // not a worker of this rank's
    if (how != Leave::kLeft) ep_->disconnect(peer);
    return;
  }
  const bool was_ready = it->second.phase == Phase::kReady;
  const bool drained = it->second.draining;
  const bool unasked = was_ready && !it->second.asked_to_drain;
  const std::string who = it->second.id.empty() ? peer_name(peer) : "worker " + it->second.id;
  std::vector<uint64_t> lost = table_.drop_worker(peer);
  workers_.erase(it);
  if (how != Leave::kLeft) ep_->disconnect(peer);
  {
    std::lock_guard<std::mutex> lock(mu_);
    per_worker_.erase(peer);
    if (how == Leave::kRejected) ++workers_rejected_;
    if (was_ready && !lost.empty()) ++workers_lost_;
    if (unasked) ++left_unasked_;
  }
  if (unasked) elastic_cv_.notify_all();  // an elastic session replaces it at once
  // A worker that left with nothing in hand (it drained, or had no lease)
  // lost nothing: its transport's reason for the closed connection is
  // only a detail then. One that never finished its handshake never joined
  // (preempted or stopped while proving itself, say): it did not leave.
  std::string what = how != Leave::kLeft   ? " dropped: " + why
                     : !was_ready          ? " went away before it joined (" + why + ")"
                     : !lost.empty()       ? " left: " + why
                     : drained             ? " left after draining (" + why + ")"
                                           : " left with nothing in hand (" + why + ")";
  (how == Leave::kRejected ? log::error : log::info)(
      "goldminer: session: " + who + what +
      (lost.empty() ? "" : " (" + std::to_string(lost.size()) + " splits re-leased)"));
}

void Session::Impl::admit(PeerId peer, Worker* w) {
  w->phase = Phase::kReady;
  {
    std::lock_guard<std::mutex> lock(mu_);
    per_worker_[peer].id = w->id;
    ++joined_total_;
  }
  send(peer, wire::Program{config_text_, o_.program});  // credits follow (grant_credits)
  log::info("goldminer: session: worker " + w->id + " joined");
}

void Session::Impl::drop(PeerId peer, const std::string& why, bool rejected) {
  forget(peer, why, rejected ? Leave::kRejected : Leave::kDropped);
}

void Session::Impl::on_message(PeerId peer, std::shared_ptr<const transport::Frame> frame) {
  auto it = workers_.find(peer);
  if (it == workers_.end()) return;
  Worker& w = it->second;
  auto decoded = wire::decode_frame(frame->data(), frame->size(), frame->size());
  if (!decoded.ok()) return drop(peer, decoded.status().message(), true);
  wire::Message& m = *decoded;
  switch (w.phase) {
    case Phase::kHello: {
      auto* hello = std::get_if<wire::Hello>(&m);
      if (hello == nullptr) return drop(peer, "expected hello", true);
      w.id = transport::peer_text(hello->worker_id);  // bounded before any log line names it
      w.role = hello->role;
      auto nonce = auth::random_nonce();
      if (!nonce.ok()) return drop(peer, nonce.status().message(), false);
      w.handshake = auth::Handshake{hello->nonce, *nonce, hello->target};
      // Refuses a target that is not this session's before proving anything.
      auto c = auth::challenge(peer_auth_, w.handshake, address_);
      if (!c.ok()) {
        // The peer is a stranger yet: the reason stays in this log.
        send(peer, wire::Error{1, "the trainer cannot authenticate this connection (its log says why)"});
        return drop(peer, "cannot authenticate to it: " + c.status().message(), true);
      }
      w.phase = Phase::kAuth;
      send(peer, *c);
      return;
    }
    case Phase::kAuth: {
      auto* a = std::get_if<wire::Auth>(&m);
      if (auto* e = std::get_if<wire::Error>(&m)) return drop(peer, transport::peer_text(e->message), true);
      if (a == nullptr) return drop(peer, "expected auth", true);
      Status ok = auth::check_answer(peer_auth_, w.handshake, *a);
      if (!ok.ok()) {
        send(peer, wire::Error{1, "authentication failed (the trainer's log says why)"});
        return drop(peer, "authentication failed (" + ok.message() + ")", true);
      }
      ep_->authenticated(peer);  // the transport's pre-authentication limits end (transport.h)
      if (w.role == wire::PeerRole::kRank) {
        if (o_.world_size <= 1 || o_.rank != 0 || o_.rank0.empty())
          return drop(peer, "a rank's session joined a session that is not rank 0 of a data-parallel job", true);
        w.phase = Phase::kRank;  // RankJoin follows
        return;
      }
      return place_worker(peer, &w);
    }
    case Phase::kRank:
      return on_rank_message(peer, &w, m);
    case Phase::kParked:
    case Phase::kRedirected:
      return;  // nothing is expected of it (it closes when redirected)
    case Phase::kReady:
      break;
  }
  if (auto* req = std::get_if<wire::LeaseRequest>(&m)) {
    {
      std::lock_guard<std::mutex> lock(mu_);  // requests come a split at a time, not a batch
      per_worker_[peer].asked_for_splits = true;
    }
    w.wants += req->splits;
    table_.heartbeat(peer, now());
  } else if (auto* b = std::get_if<wire::BatchView>(&m)) {
    on_batch(peer, *b, std::move(frame));
  } else if (auto* r = std::get_if<wire::LeaseReturn>(&m); r != nullptr && r->failed) {
    // The split failed through the worker's environment; the worker goes on.
    on_split_failed(peer, w, r->split_id, r->reason);
  } else if (auto* r = std::get_if<wire::LeaseReturn>(&m)) {
    // Workers give splits back unfailed only when they drain (SIGTERM, or
    // a Drain from here): lease it nothing more, not even the awaited split.
    w.draining = true;
    Status s = table_.give_back(peer, r->split_id);
    if (!s.ok()) log::verbose("goldminer: session: " + s.message());
  } else if (std::get_if<wire::Heartbeat>(&m)) {
    table_.heartbeat(peer, now());
  } else if (auto* e = std::get_if<wire::Error>(&m)) {
    // A worker that cannot go on (corrupt input, the program's own
    // error): the same input would fail on any worker, so the session
    // fails. (Its environment's failures come as failed LeaseReturns.)
    fail("worker " + w.id + ": " + e->message);
    drop(peer, "reported an error", false);
  } else {
    drop(peer, std::string("unexpected ") + wire::type_name(static_cast<wire::MessageType>(m.index() + 1)), true);
  }
}

void Session::Impl::on_split_failed(PeerId peer, const Worker& w, uint64_t split_id, const std::string& cause) {
  const std::string who = "worker " + w.id;
  // Re-leased from its first batch not delivered, as for a lost worker.
  // The cause as the worker gave it, bounded: it is kept for the epoch.
  auto failures = table_.fail(peer, split_id, who + ": " + cause.substr(0, 4096));
  if (!failures.ok()) {  // its lease had expired, say: already pending again
    log::verbose("goldminer: session: " + failures.status().message());
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++splits_failed_;
  }
  std::string where = "split " + std::to_string(split_id);
  if (const std::optional<InputSplit> split = table_.split(split_id))
    where += " of " + split->file + " (records " + std::to_string(split->begin) + " to " +
             std::to_string(split->end) + ", from byte " + std::to_string(split->offset) + ")";
  if (*failures > o_.split_retries) {
    std::string causes;
    for (const std::string& c : table_.failures(split_id)) causes += (causes.empty() ? "" : "; ") + c;
    fail("session: " + where + " failed " + std::to_string(*failures) + " times in epoch " +
         std::to_string(table_.epoch()) + ", more than split_retries (" + std::to_string(o_.split_retries) +
         ") allows: " + causes);
    return;
  }
  log::info("goldminer: session: " + who + " failed " + where + ": " + cause + "; re-leased (failure " +
            std::to_string(*failures) + ", at most " + std::to_string(o_.split_retries) + " re-leases)");
}

void Session::Impl::on_batch(PeerId peer, const wire::BatchView& b, std::shared_ptr<const transport::Frame> frame) {
  if (auto w = workers_.find(peer); w != workers_.end() && w->second.credits > 0) --w->second.credits;
  // The last tensor is the sample identity [samples, 2] (int64). Checked
  // before the lease table counts the batch as delivered: a refused
  // batch is then re-run with its split, not skipped.
  if (b.tensors.empty() || b.tensors.back().dtype != wire::DType::kInt64 ||
      b.tensors.back().shape != std::vector<int64_t>{b.samples, 2})
    return drop(peer, "batch without its sample-id tensor", true);
  auto verdict = table_.accept_batch(peer, b.split_id, b.sequence, now());
  if (!verdict.ok()) return drop(peer, verdict.status().message(), true);
  if (*verdict != BatchVerdict::kDeliver) {
    // Not queued: grant_credits gives its credit back.
    std::lock_guard<std::mutex> lock(mu_);
    if (*verdict == BatchVerdict::kDuplicate) ++duplicates_dropped_;
    return;
  }
  if (b.last_of_split) {
    Status s = table_.complete(peer, b.split_id, uint64_t{b.sequence} + 1);
    if (!s.ok()) return drop(peer, s.message(), true);
  }
  Item item;
  item.from = peer;
  item.bad_records = b.bad_records;
  item.bytes = frame->size();
  batch_bytes_ = batch_bytes_ == 0 ? item.bytes : (7 * batch_bytes_ + item.bytes) / 8;
  item.last_of_split = b.last_of_split;
  item.batch.epoch = table_.epoch();
  item.batch.split_id = b.split_id;
  item.batch.sequence = b.sequence;
  item.batch.samples = b.samples;
  item.batch.tensors.assign(b.tensors.begin(), b.tensors.end() - 1);
  item.batch.sample_ids = reinterpret_cast<const int64_t*>(b.tensors.back().data);
  item.batch.keepalive = std::move(frame);
  std::lock_guard<std::mutex> lock(mu_);
  bad_records_ += b.bad_records;  // the budget is checked where the trainer takes the batch (next)
  auto& pw = per_worker_[peer];
  ++pw.batches;
  pw.bytes += item.bytes;
  const auto jt = workers_.find(peer);
  if (pw.batches == 1 && jt != workers_.end()) {
    char after[32];
    std::snprintf(after, sizeof after, "%.3f", seconds_since(jt->second.connected));
    log::info("goldminer: session: worker " + pw.id + " delivered its first batch " + after + " s after it connected");
  }
  if (jt != workers_.end()) {
    pw.batches_per_s = pw.batches / std::max(1e-9, seconds_since(jt->second.connected));
    ++jt->second.queued;
  }
  queue_bytes_ += item.bytes;
  ++arrived_batches_;
  ++arrived_total_;
  if (!o_.deterministic) {
    queue_.push_back(std::move(item));
  } else {
    // Held until the batches before it in the epoch's order are queued;
    // it counts against its worker's share of the queue meanwhile.
    auto ready = reorder_.add(b.split_id, b.sequence, b.last_of_split, std::move(item));
    if (!ready.ok()) {
      if (failure_.ok()) failure_ = Status::error("session: " + ready.status().message());
    } else {
      for (Item& r : *ready) queue_.push_back(std::move(r));
    }
  }
  max_queued_ = std::max(max_queued_, queue_.size() + reorder_.held());
  cv_.notify_all();
}

void Session::Impl::grant_leases() {
  // Deterministic order: while what the session holds fills its room, the
  // worker holding the awaited split gets no further split it asked for.
  // It is sent a credit at a time for the awaited split (grant_credits'
  // end) and may spend each on a batch of its other splits; with new
  // splits to start it never ran out of those, and what was held grew
  // without bound when its producer of the awaited split was slow (seen
  // on one loaded core: 456 batches against a room of 8). Without new
  // splits its producers finish the ones in hand and reach the awaited one.
  std::optional<PeerId> hold_back;
  if (o_.deterministic) {
    const std::optional<uint64_t> head = reorder_.head();
    std::lock_guard<std::mutex> lock(mu_);
    if (head && queue_.size() + reorder_.held() >= std::max<uint64_t>(1, o_.queue_batches))
      hold_back = table_.holder(*head);
  }
  // A split that failed on a worker goes to another while one it has not
  // failed on may take it (LeaseTable::grant); else to one it failed on.
  std::vector<PeerId> ready;
  if (table_.pending() > 0)
    for (const auto& [peer, w] : workers_)
      if (w.phase == Phase::kReady && !w.draining) ready.push_back(peer);
  for (auto& [peer, w] : workers_)
    while (table_.pending() > 0 && w.phase == Phase::kReady && !w.draining && w.wants > 0 && peer != hold_back &&
           grant_lease(peer, &w, ready)) {
    }
  // Deterministic order: the split every later batch waits for is leased
  // even when no worker asks for more (all may be held back, their room
  // full of batches that wait for it). It is the first pending split
  // (LeaseConfig::deterministic_order), so grant() gives it. A worker
  // takes an unasked-for lease like any other.
  // A worker it failed on takes it only when no other one does.
  const std::optional<uint64_t> head = o_.deterministic ? reorder_.head() : std::nullopt;
  if (head && table_.is_pending(*head)) {
    bool granted = false;
    for (auto& [peer, w] : workers_)
      if (w.phase == Phase::kReady && !w.draining && !table_.failed_on(*head, peer) && grant_lease(peer, &w)) {
        granted = true;
        break;
      }
    if (!granted)
      for (auto& [peer, w] : workers_)
        if (w.phase == Phase::kReady && !w.draining && grant_lease(peer, &w)) break;
  }
}

void Session::Impl::check_first_worker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (joined_total_ > 0 || !failure_.ok()) return;
  }
  const double alone = seconds_since(created_);
  const bool timed_out = o_.first_worker_timeout_s > 0 && alone >= o_.first_worker_timeout_s;
  if (!timed_out && alone < alone_report_at_s_) return;
  alone_report_at_s_ = alone + 60;
  const std::string where = companion_job_status(o_);  // squeue: outside the lock
  if (timed_out) {
    fail("session: no data worker joined within " + seconds_text(o_.first_worker_timeout_s) +
         " s of its start (first_worker_timeout)" + where + companion_job_failure(o_));
    return;
  }
  log::info("goldminer: session: no data worker has joined in " + seconds_text(alone) + " s" + where +
            companion_job_failure(o_));
}

// Leases the first pending split to `peer`; false if none is pending.
bool Session::Impl::grant_lease(PeerId peer, Worker* w, const std::vector<PeerId>& others) {
  auto lease = table_.grant(peer, now(), others);
  if (!lease) return false;
  if (w->wants > 0) --w->wants;
  wire::LeaseGrant g;
  g.split_id = lease->split.id;
  g.epoch = lease->epoch;
  g.seed = lease->split_seed;
  g.skip_batches = lease->skip_batches;
  g.file = lease->split.file;
  g.file_index = lease->split.file_index;
  g.begin = lease->split.begin;
  g.end = lease->split.end;
  g.offset = lease->split.offset;
  g.rank = lease->rank;
  g.batches = lease->batches;
  g.skip = lease->skip;
  send(peer, g);
  return true;
}

// Keeps the queue bounded: the batches of all workers in the queue or
// still to come on their credits stay within queue_batches and, at the
// recent batch size, queue_bytes, or within one per worker where that is
// more (so the bound is max(that, workers) batches, joins included). Each
// worker gets an equal share, at most credits_per_worker (deterministic
// order: the whole share, and see the end); until the first batch tells
// its size, one each. A worker's consumed batches give it room again;
// when workers join, the others' share shrinks as their batches are
// consumed, and a worker that joined while the room was taken gets its
// first credit from the room the trainer frees (the others, at or over
// their smaller share, get none of it first).
void Session::Impl::grant_credits() {
  uint64_t ready = 0, total = 0;
  for (const auto& [peer, w] : workers_)
    if (w.phase == Phase::kReady) {
      ++ready;
      total += uint64_t{w.credits} + w.queued;
    }
  if (ready == 0) return;
  uint64_t limit = batch_bytes_ > 0 ? std::min<uint64_t>(o_.queue_batches, o_.queue_bytes / batch_bytes_) : ready;
  limit = std::max(limit, ready);
  // Deterministic order: a worker's batches of later splits wait in the
  // session for the awaited one, so the whole equal share is its room to
  // run ahead (with credits_per_worker's 4 three workers on text lines
  // made 0.55-0.68 M samples/s; with the share, 1.8-2.2 M).
  const uint64_t cap = o_.deterministic ? limit : std::max<uint32_t>(1, o_.credits_per_worker);
  const uint64_t share = std::clamp<uint64_t>(limit / ready, 1, cap);
  for (auto& [peer, w] : workers_) {
    const uint64_t out = uint64_t{w.credits} + w.queued;
    if (w.phase != Phase::kReady || out >= share) continue;
    const uint64_t allowed = total < limit ? limit - total : 0;
    const auto n = static_cast<uint32_t>(std::min(share - out, allowed));
    if (n == 0) continue;
    total += n;
    w.credits += n;
    send(peer, wire::Credit{n});
  }
  // Deterministic order: when the trainer has nothing left to take, the
  // worker holding the split that every later batch waits for may send
  // one more, beyond its share. Its room may be full of batches of its
  // other splits, held for that split's, and nothing the trainer takes
  // would free it; each such credit moves it on (its producers finish
  // those splits and reach this one). So what the session holds can
  // exceed its bound by what that worker's other splits still send.
  if (!o_.deterministic) return;
  const std::optional<uint64_t> head = reorder_.head();
  const std::optional<uint64_t> holder = head ? table_.holder(*head) : std::nullopt;
  if (!holder) return;
  auto it = workers_.find(*holder);
  if (it == workers_.end() || it->second.phase != Phase::kReady || it->second.credits > 0) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!queue_.empty()) return;
  }
  it->second.credits = 1;
  send(*holder, wire::Credit{1});
}

}  // namespace goldminer
