// The trainer session's leases and credits, on its loop thread
// (tw_lib/session/session_impl.h): which ready worker gets which split
// (the lease table deals them), a split that failed on a worker, and the
// credits that keep the queue bounded (WorkerTable::grant_credits shares
// the room; here, deterministic order's extra credit for the awaited
// split).
#include <algorithm>

#include "gmcore/log.h"
#include "tw_lib/session/session_impl.h"

namespace goldminer {

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
    ++counters_.splits_failed;
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
    const std::optional<uint64_t> head = queue_.awaited_split();
    std::lock_guard<std::mutex> lock(mu_);
    if (head && queue_.queued() + queue_.held() >= std::max<uint64_t>(1, o_.queue_batches))
      hold_back = table_.holder(*head);
  }
  // A split that failed on a worker goes to another while one it has not
  // failed on may take it (LeaseTable::grant); else to one it failed on.
  std::vector<PeerId> ready;
  if (table_.pending() > 0) ready = workers_.taking_splits();
  for (auto& [peer, w] : workers_)
    while (table_.pending() > 0 && w.takes_splits() && w.wants > 0 && peer != hold_back &&
           grant_lease(peer, &w, ready)) {
    }
  // Deterministic order: the split every later batch waits for is leased
  // even when no worker asks for more (all may be held back, their room
  // full of batches that wait for it). It is the first pending split
  // (LeaseConfig::deterministic_order), so grant() gives it. A worker
  // takes an unasked-for lease like any other.
  // A worker it failed on takes it only when no other one does.
  const std::optional<uint64_t> head = o_.deterministic ? queue_.awaited_split() : std::nullopt;
  if (head && table_.is_pending(*head)) {
    bool granted = false;
    for (auto& [peer, w] : workers_)
      if (w.takes_splits() && !table_.failed_on(*head, peer) && grant_lease(peer, &w)) {
        granted = true;
        break;
      }
    if (!granted)
      for (auto& [peer, w] : workers_)
        if (w.takes_splits() && grant_lease(peer, &w)) break;
  }
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

// Credits for the room the queue has, shared by the ready workers
// (WorkerTable::grant_credits); in deterministic order, see the end.
void Session::Impl::grant_credits() {
  for (const auto& [peer, n] : workers_.grant_credits(o_)) send(peer, wire::Credit{n});
  // Deterministic order: when the trainer has nothing left to take, the
  // worker holding the split that every later batch waits for may send
  // one more, beyond its share. Its room may be full of batches of its
  // other splits, held for that split's, and nothing the trainer takes
  // would free it; each such credit moves it on (its producers finish
  // those splits and reach this one). So what the session holds can
  // exceed its bound by what that worker's other splits still send.
  if (!o_.deterministic) return;
  const std::optional<uint64_t> head = queue_.awaited_split();
  const std::optional<uint64_t> holder = head ? table_.holder(*head) : std::nullopt;
  if (!holder) return;
  Worker* w = workers_.find(*holder);
  if (w == nullptr || w->phase != Phase::kReady || w->credits > 0) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (queue_.queued() > 0) return;
  }
  w->credits = 1;
  send(*holder, wire::Credit{1});
}

}  // namespace goldminer
