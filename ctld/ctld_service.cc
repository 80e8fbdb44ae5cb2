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

}  // namespace

CtldService::CtldService(CtldSettings settings, CredentialService* credentials, OwnerLookup owner, SpareCpus spare_cpus,
                         Now now)
    : settings_(settings),
      credentials_(credentials),
      owner_(std::move(owner)),
      spare_cpus_(std::move(spare_cpus)),
      now_(std::move(now)),
      registry_(std::max(0.0, settings.worker_cpus), settings.stale_after_s) {}

HttpResponse CtldService::handle(const HttpRequest& request) {
  const bool get = request.method == "GET";
  if (request.path == "/report") {
    if (request.method != "POST") return text(405, "/report takes POST");
    return report(request.body);
  }
  if (request.path == "/jobs" || request.path == "/top" || request.path == "/metrics") {
    if (!get) return text(405, request.path + " takes GET");
    std::lock_guard<std::mutex> lock(mu_);
    registry_.set_worker_cpus(pool_cpus());
    registry_.reallocate(now_());
    if (request.path == "/jobs") return HttpResponse{200, "application/json", registry_.json() + "\n"};
    if (request.path == "/top") return text(200, registry_.table());
    return HttpResponse{200, "text/plain; version=0.0.4; charset=utf-8", registry_.prometheus()};
  }
  return text(404, "no such path: " + request.path.substr(0, 80) + " (/report, /jobs, /top, /metrics)");
}

Expected<uid_t> CtldService::owner_of(uint32_t job_id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = owners_.find(job_id);
    if (it != owners_.end()) return it->second;
  }
  auto owner = owner_(job_id);
  if (!owner.ok()) return Status::error("job " + std::to_string(job_id) + ": " + owner.status().message());
  if (owner->state != "RUNNING")
    return Status::error("job " + std::to_string(job_id) + " is " + (owner->state.empty() ? "unknown" : owner->state) +
                         ", not running");
  return owner->uid;
}

double CtldService::pool_cpus() {
  if (settings_.worker_cpus >= 0) return settings_.worker_cpus;
  const double now = now_();
  if (now - spare_at_ >= settings_.pool_refresh_s) {
    auto spare = spare_cpus_();
    spare_at_ = now;
    if (spare.ok()) {
      spare_ = *spare;
      if (!spare_error_.empty()) log::info("goldminer-ctld: spare CPUs known again: " + cpus(spare_));
      spare_error_.clear();
    } else if (spare.status().message() != spare_error_) {
      spare_error_ = spare.status().message();
      log::error("goldminer-ctld: cannot find the spare CPUs (keeping " + cpus(spare_) + "): " + spare_error_);
    }
  }
  double held = 0;
  for (const auto& [id, e] : registry_.jobs()) held += e.report.workers * e.report.cpus_per_dw;
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
  auto owner = owner_of(report->job_id);
  if (!owner.ok()) {
    log::error("goldminer-ctld: report from uid " + std::to_string(verified->uid) + " refused: " + owner.status().message());
    return text(403, "report refused: " + owner.status().message());
  }
  TargetAnswer answer{report->job_id, report->nonce, 0};
  {
    std::lock_guard<std::mutex> lock(mu_);
    const double now = now_();
    std::map<uint32_t, int> before;
    for (const auto& [id, e] : registry_.jobs()) before[id] = e.target;
    Status st = registry_.accept(*report, verified->uid, *owner, now);
    if (!st.ok()) {
      log::error("goldminer-ctld: " + st.message());
      return text(403, "report refused: " + st.message());
    }
    owners_[report->job_id] = *owner;
    registry_.set_worker_cpus(pool_cpus());
    registry_.reallocate(now);
    for (auto it = owners_.begin(); it != owners_.end();)
      it = registry_.jobs().count(it->first) == 0 ? owners_.erase(it) : std::next(it);
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
