// Who owns a job, as goldminer-ctld asks Slurm (squeue, as SlurmUser, whom
// slurmctld does not rate-limit): each answer kept for a while, each
// user's lookups of jobs not in the cache limited, one lookup at a time.
// So reports for jobs Slurm does not know (a user's loop, or a forged
// stream under a real munge credential) cost slurmctld a bounded number of
// RPCs: at most `burst` + `per_uid_per_s` x seconds per uid, whatever the
// number of reports. Slurm-free: the lookup is a function it is given
// (goldminer-ctld's: launch/slurm_cli.h job_owner).
#ifndef GOLDMINER_CTLD_JOB_OWNER_CACHE_H_
#define GOLDMINER_CTLD_JOB_OWNER_CACHE_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "gmcore/status.h"
#include "launch/slurm_cli.h"  // JobOwner

namespace goldminer {

struct JobOwnerCacheLimits {
  double ttl_s = 10;             // an answer (owner, or not known) is kept this long
  size_t max_jobs = 4096;        // answers kept at most (the soonest to expire go first)
  double per_uid_per_s = 0.5;    // lookups a uid earns per second ...
  double burst = 10;             // ... up to this many at once
  size_t max_uids = 4096;        // uids whose lookups are counted at once
  double wait_s = 2;             // for another lookup in hand to end
};

// Thread-safe.
class JobOwnerCache {
 public:
  using Lookup = std::function<Expected<JobOwner>(uint32_t job_id)>;
  enum class Refusal { kNone, kThrottled, kBusy };

  JobOwnerCache(JobOwnerCacheLimits limits, Lookup lookup);

  // The owner of `job_id` that `asker` asks about at `now_s` (monotonic
  // seconds): from the cache, else looked up when `asker` has a lookup
  // left. An error is Slurm's answer (not known, squeue failed) with
  // `refusal` kNone, or a refusal to look it up now: kThrottled (the uid's
  // lookups are spent), kBusy (another lookup held the way over wait_s).
  // `charge` false: a lookup takes none of `asker`'s (goldminer-ctld's
  // re-check of a job it has registered, once its answer expires).
  Expected<JobOwner> get(uint32_t job_id, uid_t asker, double now_s, Refusal* refusal, bool charge = true);

  // Lookups made (squeue runs).
  size_t lookups() const;
  // Seconds until `asker` has a lookup again (0: now).
  double retry_after_s(uid_t asker, double now_s) const;

 private:
  struct Answer {
    bool ok = false;
    JobOwner owner;
    std::string error;
    double expires_s = 0;
  };
  struct Bucket {
    double tokens = 0;
    double at_s = 0;
  };
  bool cached(uint32_t job_id, double now_s, Answer* answer) const;  // under mu_
  void keep(uint32_t job_id, Answer answer, double now_s);            // under mu_
  bool take_token(uid_t asker, double now_s);                          // under mu_

  const JobOwnerCacheLimits limits_;
  Lookup lookup_;
  mutable std::mutex mu_;
  std::map<uint32_t, Answer> answers_;
  std::map<uid_t, Bucket> buckets_;
  size_t lookups_ = 0;
  std::timed_mutex lookup_mu_;  // one lookup at a time; never held with mu_
};

}  // namespace goldminer

#endif  // GOLDMINER_CTLD_JOB_OWNER_CACHE_H_
