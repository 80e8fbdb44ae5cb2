// goldminer-ctld's requests (the daemon, tools/goldminer_ctld_main.cc,
// serves them over ctld/http_server.h; clients: ctld/client/):
//
//   POST /report   body: a credential (credential.h) whose payload is a
//                  SessionReport (sched/worker_registry.h) -> 200 and a
//                  credential, for the reporting uid only, of the
//                  TargetAnswer; 403 when refused (the credential's fault
//                  named; for the job only "not a running job of uid U",
//                  the reporter's own uid: neither owner nor state told);
//                  429 when the uid's lookups of unknown jobs are spent;
//                  400 for a bad report.
//   GET /jobs      -> WorkerRegistry::json() (goldminer-top --json)
//   GET /top       -> WorkerRegistry::table() (goldminer-top)
//   GET /metrics   -> WorkerRegistry::prometheus()
//   GET /healthz   -> 200 "ok", or 503 with why when the last look at
//                  Slurm's CPUs failed (the pool is then kept as it was)
//
// A GET sees what its viewer may (CtldService::view_of): with
// "Authorization: Munge CRED" (payload "goldminer-ctld GET /jobs":
// view_credential_payload, ctld/client/ctld_client.h), the
// uid's own jobs in full; every job in full for root, the ctld's own uid
// (SlurmUser) and the site's operators; other users' jobs not at all when
// Slurm's PrivateData has "jobs", else their figures without uid, user or
// hosts. Without a credential: the totals only (worker CPUs, CPUs held,
// jobs registered), no job.
//
// A scraper the site configured (ctld/scrape_access.h: a bearer token
// or its address) sees /metrics in full, every job, as an operator does.
//
// Slurm-free: who owns a job and the spare CPUs come through the
// functions it is given (the daemon's: launch/slurm_cli.h job_owner and
// ctld/slurm_pool.h read_slurm_cpus), never while the service's lock is
// held.
#ifndef GOLDMINER_CTLD_CTLD_SERVICE_H_
#define GOLDMINER_CTLD_CTLD_SERVICE_H_

#include <sys/types.h>

#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "ctld/client/ctld_client.h"
#include "ctld/client/http.h"
#include "ctld/job_owner_cache.h"
#include "ctld/scrape_access.h"
#include "ctld/slurm_pool.h"
#include "gmcore/credential.h"
#include "gmcore/status.h"
#include "sched/worker_registry.h"

namespace goldminer {

struct CtldSettings {
  // CPUs for data workers; < 0: the spare CPUs `spare_cpus` finds, plus
  // those the registered jobs' workers hold as Slurm says, looked up at
  // most every pool_refresh_s.
  double worker_cpus = -1;
  double pool_refresh_s = 2;
  double stale_after_s = 30;  // a job not heard from this long is dropped
  // The most of the pool one user's jobs together get (0 to 1; 1: no cap).
  double max_user_share = 1;
  // Who sees every job in full besides root: SlurmUser, operators.
  std::set<uid_t> privileged_uids;
  // Slurm's PrivateData has "jobs": another user's job is not shown at all.
  bool private_jobs = true;
  JobOwnerCacheLimits owner_lookups;
  // Scrapers that see /metrics in full without a munge credential.
  ScrapeAccess scrape;
};

// The oldest credential a GET is taken with, in seconds.
constexpr long long kViewCredentialMaxAgeS = 10;

// Thread-safe.
class CtldService {
 public:
  using OwnerLookup = JobOwnerCache::Lookup;
  using SpareCpus = std::function<Expected<SlurmCpus>()>;
  using Now = std::function<double()>;  // seconds, monotonic

  CtldService(CtldSettings settings, CredentialService* credentials, OwnerLookup owner, SpareCpus spare_cpus, Now now);

  HttpResponse handle(const HttpRequest& request);

  // Lookups of a job's owner made (squeue runs).
  size_t owner_lookups() const { return owners_cache_.lookups(); }

 private:
  struct Viewer {
    bool authenticated = false;
    uid_t uid = 0;
    bool scraper = false;  // a configured scraper of /metrics: every job in full
  };
  HttpResponse report(const std::string& body);
  HttpResponse view(const HttpRequest& request);
  HttpResponse health();
  JobView view_of(const Viewer& viewer, const JobEntry& e) const;
  // The job's owner, registered or looked up (at a cost to `asker`'s
  // lookups); `refused` the response when there is none to take.
  Expected<JobOwner> owner_of(uint32_t job_id, uid_t asker, HttpResponse* refused);
  bool is_goldminer_job(uint32_t job_id, uid_t owner, HttpResponse* refused);  // not under mu_
  void refresh_spare();  // not under mu_: runs spare_cpus_ at most once at a time
  double pool_cpus();    // under mu_

  const CtldSettings settings_;
  CredentialService* credentials_;
  JobOwnerCache owners_cache_;
  SpareCpus spare_cpus_;
  Now now_;

  std::mutex mu_;
  WorkerRegistry registry_;

  std::mutex spare_mu_;  // after mu_ when both; never while spare_cpus_ runs
  double spare_ = 0, spare_at_ = -1e300;
  // What Slurm says each job's workers hold (SlurmCpus::workers): the pool
  // counts these for the registered jobs, never what a report claims.
  SlurmCpus::Held held_;
  // Jobs Slurm says are --goldminer jobs (SlurmCpus::companions); only
  // these are registered. `companions_known_`: a refresh has succeeded.
  std::set<std::pair<uint32_t, uid_t>> companions_;
  bool companions_known_ = false;
  bool refreshing_ = false;
  std::string spare_error_;  // the last lookup's failure, logged once
};

}  // namespace goldminer

#endif  // GOLDMINER_CTLD_CTLD_SERVICE_H_
