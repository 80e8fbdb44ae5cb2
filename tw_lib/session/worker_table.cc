// The trainer session's connections and their credits
// (tw_lib/session/worker_table.h).
#include "tw_lib/session/worker_table.h"

#include <algorithm>

namespace goldminer {

WorkerRecord* WorkerTable::find(PeerId peer) {
  auto it = workers_.find(peer);
  return it == workers_.end() ? nullptr : &it->second;
}

size_t WorkerTable::count(WorkerPhase phase) const {
  size_t n = 0;
  for (const auto& [peer, w] : workers_) n += w.phase == phase;
  return n;
}

std::vector<transport::PeerId> WorkerTable::taking_splits() const {
  std::vector<PeerId> out;
  for (const auto& [peer, w] : workers_)
    if (w.takes_splits()) out.push_back(peer);
  return out;
}

std::vector<std::pair<transport::PeerId, std::string>> WorkerTable::drainable() const {
  std::vector<std::pair<PeerId, std::string>> out;
  for (const auto& [peer, w] : workers_)
    if (w.takes_splits()) out.emplace_back(peer, w.id);
  return out;
}

std::vector<transport::PeerId> WorkerTable::in_phases(std::initializer_list<WorkerPhase> phases) const {
  std::vector<PeerId> out;
  for (const auto& [peer, w] : workers_)
    if (std::find(phases.begin(), phases.end(), w.phase) != phases.end()) out.push_back(peer);
  return out;
}

std::vector<transport::PeerId> WorkerTable::slow_handshakes(double timeout_s) const {
  const auto now = std::chrono::steady_clock::now();
  std::vector<PeerId> out;
  for (const auto& [peer, w] : workers_)
    if ((w.phase == WorkerPhase::kHello || w.phase == WorkerPhase::kAuth || w.phase == WorkerPhase::kRedirected) &&
        std::chrono::duration<double>(now - w.connected).count() > timeout_s)
      out.push_back(peer);
  return out;
}

void WorkerTable::consumed(const std::vector<PeerId>& from) {
  for (PeerId p : from)
    if (auto w = workers_.find(p); w != workers_.end() && w->second.queued > 0) --w->second.queued;
}

void WorkerTable::spend_credit(PeerId peer) {
  if (auto w = workers_.find(peer); w != workers_.end() && w->second.credits > 0) --w->second.credits;
}

// Keeps the queue bounded: the batches of all workers in the queue or
// still to come on their credits stay within queue_batches and, at the
// recent batch size, queue_bytes, or within one per worker where that is
// more (so the bound is max(that, workers) batches, joins included). Each
// worker gets an equal share, at most credits_per_worker (deterministic
// order: the whole share, and see Session::Impl::grant_credits); until the
// first batch tells its size, one each. A worker's consumed batches give
// it room again; when workers join, the others' share shrinks as their
// batches are consumed, and a worker that joined while the room was taken
// gets its first credit from the room the trainer frees (the others, at or
// over their smaller share, get none of it first).
std::vector<std::pair<transport::PeerId, uint32_t>> WorkerTable::grant_credits(const SessionOptions& o) {
  std::vector<std::pair<PeerId, uint32_t>> grants;
  uint64_t ready = 0, total = 0;
  for (const auto& [peer, w] : workers_)
    if (w.phase == WorkerPhase::kReady) {
      ++ready;
      total += uint64_t{w.credits} + w.queued;
    }
  if (ready == 0) return grants;
  uint64_t limit = batch_bytes_ > 0 ? std::min<uint64_t>(o.queue_batches, o.queue_bytes / batch_bytes_) : ready;
  limit = std::max(limit, ready);
  // Deterministic order: a worker's batches of later splits wait in the
  // session for the awaited one, so the whole equal share is its room to
  // run ahead (with credits_per_worker's 4 three workers on text lines
  // made 0.55-0.68 M samples/s; with the share, 1.8-2.2 M).
  const uint64_t cap = o.deterministic ? limit : std::max<uint32_t>(1, o.credits_per_worker);
  const uint64_t share = std::clamp<uint64_t>(limit / ready, 1, cap);
  for (auto& [peer, w] : workers_) {
    const uint64_t out = uint64_t{w.credits} + w.queued;
    if (w.phase != WorkerPhase::kReady || out >= share) continue;
    const uint64_t allowed = total < limit ? limit - total : 0;
    const auto n = static_cast<uint32_t>(std::min(share - out, allowed));
    if (n == 0) continue;
    total += n;
    w.credits += n;
    grants.emplace_back(peer, n);
  }
  return grants;
}

}  // namespace goldminer
