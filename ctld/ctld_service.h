// goldminer-ctld's requests (the daemon, goldminer_ctld_main.cc, serves
// them over ctld/http.h):
//
//   POST /report   body: a credential (credential.h) whose payload is a
//                  SessionReport (sched/worker_registry.h) -> 200 and a
//                  credential, for the reporting uid only, of the
//                  TargetAnswer; 403 naming why the report is refused
//                  (credential invalid or replayed, the job not running,
//                  the job another user's); 400 for a bad report.
//   GET /jobs      -> WorkerRegistry::json() (goldminer-top --json)
//   GET /top       -> WorkerRegistry::table() (goldminer-top)
//   GET /metrics   -> WorkerRegistry::prometheus()
//
// Slurm-free: who owns a job and the spare CPUs come through the
// functions it is given (the daemon runs squeue and scontrol for them).
#ifndef GOLDMINER_CTLD_CTLD_SERVICE_H_
#define GOLDMINER_CTLD_CTLD_SERVICE_H_

#include <sys/types.h>

#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "gmcore/credential.h"
#include "ctld/http.h"
#include "gmcore/status.h"
#include "sched/worker_registry.h"

namespace goldminer {

struct JobOwner {
  uid_t uid = 0;
  std::string state;  // as squeue prints it: RUNNING, PENDING, ...
};

struct CtldSettings {
  // CPUs for data workers; < 0: the spare CPUs `spare_cpus` finds, plus
  // those the registered jobs' workers hold, looked up at most every
  // pool_refresh_s.
  double worker_cpus = -1;
  double pool_refresh_s = 2;
  double stale_after_s = 30;  // a job not heard from this long is dropped
};

// Thread-safe.
class CtldService {
 public:
  using OwnerLookup = std::function<Expected<JobOwner>(uint32_t job_id)>;
  using SpareCpus = std::function<Expected<double>()>;
  using Now = std::function<double()>;  // seconds, monotonic

  CtldService(CtldSettings settings, CredentialService* credentials, OwnerLookup owner, SpareCpus spare_cpus, Now now);

  HttpResponse handle(const HttpRequest& request);

 private:
  HttpResponse report(const std::string& body);
  Expected<uid_t> owner_of(uint32_t job_id);
  double pool_cpus();  // under mu_

  const CtldSettings settings_;
  CredentialService* credentials_;
  OwnerLookup owner_;
  SpareCpus spare_cpus_;
  Now now_;

  std::mutex mu_;
  WorkerRegistry registry_;
  std::map<uint32_t, uid_t> owners_;  // of registered jobs (a job's owner does not change)
  double spare_ = 0, spare_at_ = -1e300;
  std::string spare_error_;  // the last lookup's failure, logged once
};

}  // namespace goldminer

#endif  // GOLDMINER_CTLD_CTLD_SERVICE_H_
