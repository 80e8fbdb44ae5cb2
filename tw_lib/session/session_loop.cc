// The trainer session's loop thread (tw_lib/session/session_impl.h): it owns the
// endpoint, admits workers (hello, challenge, auth, program), takes their
// batches into the queue (or, deterministic order, holds them until it is
// their turn), serves the consumer's and the elastic thread's requests
// (credits back, the next epoch, drains) and queues the epoch's end. Its
// leases and credits: session_leases.cc.
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
          workers_.connected(ev.peer);
          break;
        case Event::Kind::kMessage:
          on_message(ev.peer, std::move(ev.frame));
          break;
        case Event::Kind::kDisconnected:
          forget(ev.peer, ev.reason, Leave::kLeft);
          break;
      }
    }
    serve_requests();
    grant_leases();
    // Workers hear from the session even while the trainer takes nothing:
    // silence tells them its process or node is gone (WorkerOptions::trainer_timeout_s).
    if (seconds_since(last_heartbeat) >= wire::kSessionHeartbeatS) {
      last_heartbeat = Clock::now();
      const auto unix_ms = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                     std::chrono::system_clock::now().time_since_epoch())
                                                     .count());
      for (PeerId peer : workers_.in_phases({Phase::kReady, Phase::kParked, Phase::kRank}))
        send(peer, wire::Heartbeat{unix_ms});
    }
    if (seconds_since(last_check) > 0.25) {
      last_check = Clock::now();
      check_first_worker();
      for (uint64_t peer : table_.expire(now())) drop(peer, "no heartbeat within the lease timeout", false);
      for (PeerId p : workers_.slow_handshakes(o_.handshake_timeout_s)) drop(p, "did not authenticate in time", true);
      place_parked();
    }
  }
  // Tell connected workers to leave, and the other ranks that this one ends.
  for (PeerId peer : workers_.in_phases({Phase::kReady, Phase::kRank})) send(peer, wire::Drain{});
}

void Session::Impl::serve_requests() {
  bool start_epoch = false;
  size_t drains = 0;
  std::string drain_first_on;  // drain the workers on this node first
  std::vector<PeerId> consumed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    consumed = queue_.take_consumed_from();
    start_epoch = queue_.take_epoch_request();
    drains = std::exchange(drain_requests_, 0);
    drain_first_on = drains > 0 ? std::exchange(drain_first_on_, std::string()) : std::string();
  }
  workers_.consumed(consumed);
  grant_credits();
  if (drains > 0) drain(drains, drain_first_on);
  if (start_epoch) {
    if (Status dealt = table_.start_epoch(table_.epoch() + 1); !dealt.ok()) fail("session: " + dealt.message());
    if (o_.deterministic) {
      std::lock_guard<std::mutex> lock(mu_);  // metrics() reads it
      queue_.start_epoch_order(table_.epoch_order());
    }
    epoch_end_queued_ = false;
  }
  if (table_.epoch_done() && !epoch_end_queued_) {
    epoch_end_queued_ = true;
    if (o_.deterministic && queue_.awaited_split())  // every split's last batch came: nothing can be held
      fail("session: internal error: split " + std::to_string(*queue_.awaited_split()) +
           " still held back at the end of the epoch");
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_end_of_epoch();
    cv_.notify_all();
  }
}

// Asks `n` ready workers to drain, those on `first_on` first.
void Session::Impl::drain(size_t n, const std::string& first_on) {
  for (PeerId peer : choose_drains(workers_.drainable(), n, first_on)) {
    Worker& w = workers_.at(peer);
    w.draining = true;
    w.asked_to_drain = true;
    {
      std::lock_guard<std::mutex> lock(mu_);  // the elastic loop counts it as leaving
      counters_.per_worker[peer].draining = true;
    }
    send(peer, wire::Drain{});
  }
}

void Session::Impl::send(PeerId peer, const wire::Message& m) {
  std::vector<uint8_t> frame = wire::encode(m);
  Status s = ep_->send(peer, frame.data(), frame.size());
  if (!s.ok()) log::verbose("goldminer: session: " + peer_name(peer) + ": " + s.message());
}

// Forgets a connection (closing it unless the peer left); its splits go
// back to pending.
void Session::Impl::forget(PeerId peer, const std::string& why, Leave how) {
  Worker* w = workers_.find(peer);
  if (w == nullptr) return;
  if (w->phase == Phase::kRank) forget_rank(peer);
  if (w->phase == Phase::kRedirected || w->phase == Phase::kRank) {
    workers_.erase(peer);  // not a worker of this rank's
    if (how != Leave::kLeft) ep_->disconnect(peer);
    return;
  }
  const bool was_ready = w->phase == Phase::kReady;
  const bool drained = w->draining;
  const bool unasked = was_ready && !w->asked_to_drain;
  const std::string who = w->id.empty() ? peer_name(peer) : "worker " + w->id;
  std::vector<uint64_t> lost = table_.drop_worker(peer);
  workers_.erase(peer);
  if (how != Leave::kLeft) ep_->disconnect(peer);
  {
    std::lock_guard<std::mutex> lock(mu_);
    counters_.per_worker.erase(peer);
    if (how == Leave::kRejected) ++counters_.workers_rejected;
    if (was_ready && !lost.empty()) ++counters_.workers_lost;
    if (unasked) ++counters_.left_unasked;
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
    counters_.per_worker[peer].id = w->id;
    ++counters_.joined_total;
  }
  send(peer, wire::Program{config_text_, o_.program});  // credits follow (grant_credits)
  log::info("goldminer: session: worker " + w->id + " joined");
}

void Session::Impl::drop(PeerId peer, const std::string& why, bool rejected) {
  forget(peer, why, rejected ? Leave::kRejected : Leave::kDropped);
}

void Session::Impl::on_message(PeerId peer, std::shared_ptr<const transport::Frame> frame) {
  Worker* found = workers_.find(peer);
  if (found == nullptr) return;
  Worker& w = *found;
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
      return on_worker_message(peer, &w, m, std::move(frame));
  }
}

void Session::Impl::on_worker_message(PeerId peer, Worker* worker, wire::Message& m,
                                      std::shared_ptr<const transport::Frame> frame) {
  Worker& w = *worker;
  if (auto* req = std::get_if<wire::LeaseRequest>(&m)) {
    {
      std::lock_guard<std::mutex> lock(mu_);  // requests come a split at a time, not a batch
      counters_.per_worker[peer].asked_for_splits = true;
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

void Session::Impl::on_batch(PeerId peer, const wire::BatchView& b, std::shared_ptr<const transport::Frame> frame) {
  workers_.spend_credit(peer);
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
    if (*verdict == BatchVerdict::kDuplicate) ++counters_.duplicates_dropped;
    return;
  }
  if (b.last_of_split) {
    Status s = table_.complete(peer, b.split_id, uint64_t{b.sequence} + 1);
    if (!s.ok()) return drop(peer, s.message(), true);
  }
  QueuedBatch item;
  item.from = peer;
  item.bad_records = b.bad_records;
  item.bytes = frame->size();
  workers_.note_batch_bytes(item.bytes);
  item.last_of_split = b.last_of_split;
  item.batch.epoch = table_.epoch();
  item.batch.split_id = b.split_id;
  item.batch.sequence = b.sequence;
  item.batch.samples = b.samples;
  item.batch.tensors.assign(b.tensors.begin(), b.tensors.end() - 1);
  item.batch.sample_ids = reinterpret_cast<const int64_t*>(b.tensors.back().data);
  item.batch.keepalive = std::move(frame);
  Worker* w = workers_.find(peer);
  const double connected_s = w != nullptr ? seconds_since(w->connected) : -1;
  std::lock_guard<std::mutex> lock(mu_);
  const WorkerMetrics& pw = counters_.count_arrival(peer, item.bytes, b.bad_records, connected_s);
  if (pw.batches == 1 && w != nullptr) {
    char after[32];
    std::snprintf(after, sizeof after, "%.3f", connected_s);
    log::info("goldminer: session: worker " + pw.id + " delivered its first batch " + after + " s after it connected");
  }
  if (w != nullptr) ++w->queued;
  if (Status s = queue_.push(std::move(item)); !s.ok() && failure_.ok())
    failure_ = Status::error("session: " + s.message());
  cv_.notify_all();
}

void Session::Impl::check_first_worker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (counters_.joined_total > 0 || !failure_.ok()) return;
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

}  // namespace goldminer
