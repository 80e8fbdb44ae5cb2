#include "ctld/ctld_service.h"

#include <cmath>
#include <cstdio>

#include "gmcore/log.h"

namespace goldminer {
namespace {

HttpResponse text(int status, const std::string& body) { return HttpResponse{status, "text/plain; charset=utf-8", body + "\n"}; }

std::string cpus(double n) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", n);
  return buf;
}

constexpr char kMungeScheme[] = "Munge ";
constexpr char kBearerScheme[] = "Bearer ";

}  // namespace

CtldService::CtldService(CtldSettings settings, CredentialService* credentials, OwnerLookup owner, SpareCpus spare_cpus,
                         Now now)
    : settings_(settings),
      credentials_(credentials),
      owners_cache_(settings.owner_lookups, std::move(owner)),
      spare_cpus_(std::move(spare_cpus)),
      now_(std::move(now)),
      registry_(std::max(0.0, settings.worker_cpus), settings.stale_after_s) {
  registry_.set_max_user_share(settings.max_user_share);
}

HttpResponse CtldService::handle(const HttpRequest& request) {
  if (request.path == "/report") {
    if (request.method != "POST") return text(405, "/report takes POST");
    return report(request.body);
  }
  if (request.path == "/jobs" || request.path == "/top" || request.path == "/metrics" || request.path == "/healthz") {
    if (request.method != "GET") return text(405, request.path + " takes GET");
    return request.path == "/healthz" ? health() : view(request);
  }
  return text(404, "no such path: " + request.path.substr(0, 80) + " (/report, /jobs, /top, /metrics, /healthz)");
}

HttpResponse CtldService::health() {
  std::lock_guard<std::mutex> lock(spare_mu_);
  if (spare_error_.empty()) return text(200, "ok");
  return text(503, "cannot find the spare CPUs in Slurm: " + spare_error_);
}

JobView CtldService::view_of(const Viewer& viewer, const JobEntry& e) const {
  if (viewer.scraper) return JobView::kFull;
  if (!viewer.authenticated) return JobView::kHidden;
  if (viewer.uid == 0 || settings_.privileged_uids.count(viewer.uid) != 0 || e.uid == viewer.uid) return JobView::kFull;
  return settings_.private_jobs ? JobView::kHidden : JobView::kFigures;
}

HttpResponse CtldService::view(const HttpRequest& request) {
  Viewer viewer;
  viewer.scraper = request.path == "/metrics" && settings_.scrape.admits(request);
  if (!viewer.scraper && !request.authorization.empty()) {
    if (request.authorization.rfind(kBearerScheme, 0) == 0)
      return text(403, "not authenticated: the bearer token is not goldminer-ctld's (--metrics-token-file), or not "
                       "for " + request.path.substr(0, 80) + " (a token reads /metrics only)");
    if (request.authorization.rfind(kMungeScheme, 0) != 0)
      return text(403, "not authenticated: Authorization must be 'Munge CREDENTIAL'");
    auto verified = credentials_->decode(request.authorization.substr(sizeof kMungeScheme - 1));
    if (!verified.ok()) return text(403, "not authenticated: " + verified.status().message());
    if (verified->payload != view_credential_payload(request.path))
      return text(403, "not authenticated: the credential is not for GET " + request.path.substr(0, 80));
    // A GET's credential is used at once (goldminer-top makes one per
    // request): one taken by whoever held this port during a restart is
    // worth nothing here after kViewCredentialMaxAgeS, whatever munge's
    // TTL (300 s by default).
    const long long age = static_cast<long long>(std::time(nullptr)) - static_cast<long long>(verified->encoded);
    if (verified->encoded != 0 && age > kViewCredentialMaxAgeS)
      return text(403, "not authenticated: the credential was made " + std::to_string(age) +
                           " s ago (a GET takes one made within " + std::to_string(kViewCredentialMaxAgeS) + " s)");
    viewer.authenticated = true;
    viewer.uid = verified->uid;
  }
  refresh_spare();
  const ViewOf shown = [this, viewer](const JobEntry& e) { return view_of(viewer, e); };
  std::lock_guard<std::mutex> lock(mu_);
  registry_.set_worker_cpus(pool_cpus());
  registry_.reallocate(now_());
  if (request.path == "/jobs") return HttpResponse{200, "application/json", registry_.json(shown) + "\n"};
  if (request.path == "/top") return text(200, registry_.table(shown));
  return HttpResponse{200, "text/plain; version=0.0.4; charset=utf-8", registry_.prometheus(shown)};
}

Expected<JobOwner> CtldService::owner_of(uint32_t job_id, uid_t asker, HttpResponse* refused) {
  const std::string job = "job " + std::to_string(job_id);
  // Neither the owner nor the state goes back: only what the reporter knows.
  *refused = text(403, "report refused: " + job + " is not a running job of uid " + std::to_string(asker));
  // A registered job is checked again whenever the cache's answer
  // expires (its TTL), so a job that ended or was requeued stops steering
  // the pool within a TTL; those re-checks are goldminer-ctld's, not the
  // reporter's lookups.
  bool registered;
  {
    std::lock_guard<std::mutex> lock(mu_);
    registered = registry_.jobs().count(job_id) != 0;
  }
  JobOwnerCache::Refusal refusal;
  auto owner = owners_cache_.get(job_id, asker, now_(), &refusal, !registered);
  if (refusal == JobOwnerCache::Refusal::kThrottled) {
    const double wait = owners_cache_.retry_after_s(asker, now_());
    log::verbose("goldminer-ctld: " + job + ": report from uid " + std::to_string(asker) +
                 " refused: its lookups of jobs are spent");
    *refused = text(429, "report refused: too many reports for jobs goldminer-ctld does not know from uid " +
                             std::to_string(asker) + "; try again in " + cpus(std::ceil(wait)) + " s");
    return Status::error("throttled");
  }
  if (refusal == JobOwnerCache::Refusal::kBusy) {
    *refused = text(503, "busy: other lookups of jobs in hand; try again");
    return Status::error("busy");
  }
  if (!owner.ok() || owner->state != "RUNNING") {
    const std::string why = !owner.ok() ? owner.status().message()
                                        : "it is " + (owner->state.empty() ? std::string("unknown") : owner->state) +
                                              ", not running";
    log::error("goldminer-ctld: " + job + ": report from uid " + std::to_string(asker) + " refused: " + why);
    // Slurm's answer that it no longer runs (not a failed squeue, which
    // refuses this report only): its workers' CPUs go back to the pool
    // now, not when it falls silent.
    const bool ended = owner.ok() || owner.status().message() == kNotKnownToSlurm;
    if (registered && ended) {
      std::lock_guard<std::mutex> lock(mu_);
      registry_.drop(job_id);
      log::info("goldminer-ctld: " + job + ": dropped (" + why + ")");
    }
    return Status::error(why);
  }
  return owner;
}

// Whether job `job_id` of `owner` may be (or is) registered: it is, or
// Slurm shows a companion job of it (goldminer-dw.J, pending or running)
// of the same owner, which only its --goldminer job's plugin submits. A
// plain job (`sleep`) of a user therefore steers nothing. `refused`: the
// response when not.
bool CtldService::is_goldminer_job(uint32_t job_id, uid_t owner, HttpResponse* refused) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (registry_.jobs().count(job_id) != 0) return true;
  }
  const std::string job = "job " + std::to_string(job_id);
  std::lock_guard<std::mutex> lock(spare_mu_);
  if (!companions_known_) {
    *refused = text(503, "report refused: cannot tell from Slurm whether " + job + " is a --goldminer job (" +
                             (spare_error_.empty() ? std::string("not asked yet") : spare_error_) + "); try again");
    return false;
  }
  if (companions_.count({job_id, owner}) == 0) {
    log::error("goldminer-ctld: " + job + ": report refused: Slurm shows no job goldminer-dw." +
               std::to_string(job_id) + " of its owner (uid " + std::to_string(owner) + "): not a --goldminer job");
    *refused = text(403, "report refused: " + job + " is not a --goldminer job (Slurm shows no job goldminer-dw." +
                             std::to_string(job_id) + " of its owner)");
    return false;
  }
  return true;
}

// Runs even with a fixed pool (worker_cpus): the companion jobs say which
// jobs may register.
void CtldService::refresh_spare() {
  {
    std::lock_guard<std::mutex> lock(spare_mu_);
    if (refreshing_ || now_() - spare_at_ < settings_.pool_refresh_s) return;
    refreshing_ = true;
  }
  auto spare = spare_cpus_();  // scontrol: no lock held
  std::lock_guard<std::mutex> lock(spare_mu_);
  refreshing_ = false;
  spare_at_ = now_();
  if (spare.ok()) {
    spare_ = spare->spare;
    held_ = std::move(spare->workers);
    companions_ = std::move(spare->companions);
    companions_known_ = true;
    if (!spare_error_.empty()) log::info("goldminer-ctld: spare CPUs known again: " + cpus(spare_));
    spare_error_.clear();
  } else if (spare.status().message() != spare_error_) {
    spare_error_ = spare.status().message();
    log::error("goldminer-ctld: cannot find the spare CPUs (keeping " + cpus(spare_) + "): " + spare_error_);
  }
}

double CtldService::pool_cpus() {
  if (settings_.worker_cpus >= 0) return settings_.worker_cpus;
  // What Slurm says the registered jobs' workers hold (their owner's
  // companion jobs), read with the spare CPUs: a report's own workers x
  // cpus_per_dw (10^6 x 65536, say) never grows the pool.
  std::lock_guard<std::mutex> lock(spare_mu_);
  double held = 0;
  for (const auto& [id, e] : registry_.jobs()) {
    auto job = held_.find(id);
    if (job == held_.end()) continue;
    auto mine = job->second.find(e.uid);
    if (mine != job->second.end()) held += mine->second;
  }
  return spare_ + held;
}

HttpResponse CtldService::report(const std::string& body) {
  auto verified = credentials_->decode(body);
  if (!verified.ok()) {
    log::error("goldminer-ctld: report refused: " + verified.status().message());
    return text(403, "report refused: " + verified.status().message());
  }
  auto report = decode_report(verified->payload);
  if (!report.ok()) {
    log::error("goldminer-ctld: report from uid " + std::to_string(verified->uid) + " refused: " + report.status().message());
    return text(400, report.status().message());
  }
  HttpResponse refused;
  auto owner = owner_of(report->job_id, verified->uid, &refused);
  if (!owner.ok()) return refused;
  refresh_spare();
  // Another user's report is refused below (by the registry), with the
  // answer that tells nothing of the job.
  if (HttpResponse r; verified->uid == owner->uid && !is_goldminer_job(report->job_id, owner->uid, &r)) return r;
  TargetAnswer answer{report->job_id, report->nonce, 0};
  {
    std::lock_guard<std::mutex> lock(mu_);
    const double now = now_();
    std::map<uint32_t, int> before;
    for (const auto& [id, e] : registry_.jobs()) before[id] = e.target;
    Status st = registry_.accept(*report, verified->uid, owner->uid, now, owner->partition);
    if (!st.ok()) {
      log::error("goldminer-ctld: " + st.message());
      return refused;
    }
    registry_.set_worker_cpus(pool_cpus());
    registry_.reallocate(now);
    answer.target = registry_.target(report->job_id);
    for (const auto& [id, e] : registry_.jobs()) {
      auto b = before.find(id);
      if (b == before.end() || b->second != e.target)
        log::info("goldminer-ctld: job " + std::to_string(id) + ": target " + std::to_string(e.target) + " workers (" +
                  std::to_string(e.report.workers) + " now; " + cpus(registry_.worker_cpus()) +
                  " worker CPUs shared by " + std::to_string(registry_.jobs().size()) + " jobs)");
    }
  }
  const uid_t to = verified->uid;
  auto sealed = credentials_->encode(encode_answer(answer), &to);
  if (!sealed.ok()) {
    log::error("goldminer-ctld: cannot answer job " + std::to_string(answer.job_id) + ": " + sealed.status().message());
    return text(503, "cannot answer: " + sealed.status().message());
  }
  return HttpResponse{200, "text/plain; charset=utf-8", *sealed};
}

}  // namespace goldminer
