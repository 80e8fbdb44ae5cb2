#include "ctld/job_owner_cache.h"

#include <algorithm>
#include <chrono>

namespace goldminer {

JobOwnerCache::JobOwnerCache(JobOwnerCacheLimits limits, Lookup lookup)
    : limits_(limits), lookup_(std::move(lookup)) {}

bool JobOwnerCache::cached(uint32_t job_id, double now_s, Answer* answer) const {
  auto it = answers_.find(job_id);
  if (it == answers_.end() || it->second.expires_s <= now_s) return false;
  *answer = it->second;
  return true;
}

void JobOwnerCache::keep(uint32_t job_id, Answer answer, double now_s) {
  if (answers_.size() >= limits_.max_jobs && answers_.count(job_id) == 0) {
    for (auto it = answers_.begin(); it != answers_.end();)
      it = it->second.expires_s <= now_s ? answers_.erase(it) : std::next(it);
    if (answers_.size() >= limits_.max_jobs) {
      auto soonest = std::min_element(answers_.begin(), answers_.end(), [](const auto& a, const auto& b) {
        return a.second.expires_s < b.second.expires_s;
      });
      answers_.erase(soonest);
    }
  }
  if (limits_.max_jobs > 0) answers_[job_id] = std::move(answer);
}

bool JobOwnerCache::take_token(uid_t asker, double now_s) {
  auto it = buckets_.find(asker);
  if (it == buckets_.end()) {
    if (buckets_.size() >= limits_.max_uids) {
      // Forget the uids whose lookups have all come back: they lose nothing.
      for (auto b = buckets_.begin(); b != buckets_.end();)
        b = b->second.tokens + (now_s - b->second.at_s) * limits_.per_uid_per_s >= limits_.burst ? buckets_.erase(b)
                                                                                               : std::next(b);
      if (buckets_.size() >= limits_.max_uids) return false;
    }
    it = buckets_.emplace(asker, Bucket{limits_.burst, now_s}).first;
  }
  Bucket& b = it->second;
  b.tokens = std::min(limits_.burst, b.tokens + std::max(0.0, now_s - b.at_s) * limits_.per_uid_per_s);
  b.at_s = now_s;
  if (b.tokens < 1) return false;
  b.tokens -= 1;
  return true;
}

double JobOwnerCache::retry_after_s(uid_t asker, double now_s) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = buckets_.find(asker);
  if (it == buckets_.end()) return 0;
  double tokens = std::min(limits_.burst, it->second.tokens + std::max(0.0, now_s - it->second.at_s) * limits_.per_uid_per_s);
  if (tokens >= 1) return 0;
  return limits_.per_uid_per_s > 0 ? (1 - tokens) / limits_.per_uid_per_s : 1e9;
}

size_t JobOwnerCache::lookups() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lookups_;
}

Expected<JobOwner> JobOwnerCache::get(uint32_t job_id, uid_t asker, double now_s, Refusal* refusal, bool charge) {
  *refusal = Refusal::kNone;
  Answer answer;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!cached(job_id, now_s, &answer)) {
      if (charge && !take_token(asker, now_s)) {
        *refusal = Refusal::kThrottled;
        return Status::error("too many lookups of jobs by uid " + std::to_string(asker));
      }
      answer.expires_s = -1;  // not found yet
    }
  }
  if (answer.expires_s < 0) {
    std::unique_lock<std::timed_mutex> one(lookup_mu_, std::defer_lock);
    if (!one.try_lock_for(std::chrono::duration<double>(limits_.wait_s))) {
      *refusal = Refusal::kBusy;
      return Status::error("another lookup of a job's owner is in hand");
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!cached(job_id, now_s, &answer)) answer.expires_s = -1;  // looked up meanwhile?
    }
    if (answer.expires_s < 0) {
      auto found = lookup_(job_id);
      answer.ok = found.ok();
      if (found.ok()) answer.owner = *found;
      else answer.error = found.status().message();
      answer.expires_s = now_s + limits_.ttl_s;
      std::lock_guard<std::mutex> lock(mu_);
      ++lookups_;
      keep(job_id, answer, now_s);
    }
  }
  if (!answer.ok) return Status::error(answer.error);
  return answer.owner;
}

}  // namespace goldminer
