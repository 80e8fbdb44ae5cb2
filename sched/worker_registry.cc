#include "sched/worker_registry.h"

#include <pwd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>

#include "gmcore/json.h"
#include "gmcore/printable.h"

namespace goldminer {
namespace {

constexpr double kMaxWaitFraction = 0.95;  // beyond: the demand estimate explodes

// Exact (what a report carries) or for reading (json, prometheus).
std::string number(double v, int digits = 17) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

std::string shown(double v) { return number(v, 6); }

// A uid's user name, else the uid.
std::string user_name(uint32_t uid) {
  passwd pw{}, *found = nullptr;
  char buf[4096];
  return getpwuid_r(uid, &pw, buf, sizeof buf, &found) == 0 && found != nullptr ? pw.pw_name : std::to_string(uid);
}

// A label value in Prometheus's text format: \, " and newline escaped.
std::string label_value(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

Expected<double> parse_real(const std::string& key, const std::string& value, double lo, double hi) {
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || errno != 0 || !std::isfinite(v) || v < lo || v > hi)
    return Status::error(key + ": invalid value '" + value + "': expected a number from " +
                         number(lo) + " to " + number(hi));
  return v;
}

Expected<int> parse_count(const std::string& key, const std::string& value, int lo, int hi) {
  auto v = parse_real(key, value, lo, hi);
  if (!v.ok()) return v.status();
  if (*v != std::floor(*v))
    return Status::error(key + ": invalid value '" + value + "': expected a whole number");
  return static_cast<int>(*v);
}

}  // namespace

std::string encode_report(const SessionReport& r) {
  std::string hosts;
  for (const std::string& h : r.worker_hosts) hosts += (hosts.empty() ? "" : ",") + h;
  return "job=" + std::to_string(r.job_id) + "\nnonce=" + std::to_string(r.nonce) +
         "\nworkers=" + std::to_string(r.workers) + "\ncoming=" + std::to_string(r.coming) +
         "\ndw_max=" + std::to_string(r.dw_max) + "\ncpus_per_dw=" + number(r.cpus_per_dw) +
         "\nwait=" + number(r.trainer_wait_fraction) + "\nfill=" + number(r.queue_fill) +
         "\nconsumption=" + number(r.consumption_rate) + "\nper_worker=" + number(r.per_worker_rate) +
         "\nsamples_per_s=" + number(r.samples_per_s) + "\nhosts=" + hosts + "\ncurve=" + format_curve(r.curve) +
         "\nknee=" + std::to_string(r.knee) + "\nprobing=" + std::to_string(r.probing) +
         "\nceiling=" + std::to_string(r.ceiling) + "\n";
}

namespace {

// "key=value" lines, each of `keys` exactly once; errors start with `what`.
Expected<std::map<std::string, std::string>> strict_fields(const std::string& text, const std::vector<std::string>& keys,
                                                           const std::string& what) {
  std::map<std::string, std::string> fields;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    size_t eq = line.find('=');
    if (eq == std::string::npos) return Status::error(what + ": expected key=value, got '" + line.substr(0, 80) + "'");
    std::string key = line.substr(0, eq);
    if (std::find(keys.begin(), keys.end(), key) == keys.end())
      return Status::error(what + ": " + key.substr(0, 40) + ": unknown key");
    if (!fields.emplace(key, line.substr(eq + 1)).second) return Status::error(what + ": " + key + ": given twice");
  }
  for (const std::string& key : keys)
    if (fields.count(key) == 0) return Status::error(what + ": " + key + ": missing");
  return fields;
}

Expected<uint64_t> parse_u64(const std::string& what, const std::string& value) {
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(value.c_str(), &end, 10);
  if (value.empty() || value[0] == '-' || *end != '\0' || errno != 0)
    return Status::error(what + ": invalid value '" + value.substr(0, 40) + "': expected a whole number");
  return static_cast<uint64_t>(v);
}

Expected<uint32_t> parse_job(const std::string& what, const std::string& value) {
  auto v = parse_u64(what, value);
  if (!v.ok()) return v.status();
  if (*v == 0 || *v > 4294967295ull) return Status::error(what + ": invalid value '" + value + "': expected a job id");
  return static_cast<uint32_t>(*v);
}

}  // namespace

Expected<SessionReport> decode_report(const std::string& text) {
  auto f = strict_fields(text, {"job", "nonce", "workers", "coming", "dw_max", "cpus_per_dw", "wait", "fill", "consumption",
                                "per_worker", "samples_per_s", "hosts", "curve", "knee", "probing", "ceiling"},
                        "report");
  if (!f.ok()) return f.status();
  SessionReport r;
  Status st;
  auto real = [&](const char* key, double lo, double hi, double* out) {
    if (!st.ok()) return;
    auto v = parse_real(std::string("report: ") + key, f->at(key), lo, hi);
    if (v.ok()) *out = *v; else st = v.status();
  };
  auto count = [&](const char* key, int lo, int hi, int* out) {
    if (!st.ok()) return;
    auto v = parse_count(std::string("report: ") + key, f->at(key), lo, hi);
    if (v.ok()) *out = *v; else st = v.status();
  };
  auto job = parse_job("report: job", f->at("job"));
  if (!job.ok()) return job.status();
  r.job_id = *job;
  auto nonce = parse_u64("report: nonce", f->at("nonce"));
  if (!nonce.ok()) return nonce.status();
  r.nonce = *nonce;
  count("workers", 0, 1 << 20, &r.workers);
  count("coming", 0, 1 << 20, &r.coming);
  count("dw_max", 1, 1 << 20, &r.dw_max);
  // Slurm gives a task whole CPUs: a claim of less would make its workers
  // look cheaper than anyone's in the allocation.
  real("cpus_per_dw", 1, 1 << 16, &r.cpus_per_dw);
  real("wait", 0, 1, &r.trainer_wait_fraction);
  real("fill", 0, 1, &r.queue_fill);
  real("consumption", 0, 1e12, &r.consumption_rate);
  real("per_worker", 0, 1e12, &r.per_worker_rate);
  real("samples_per_s", 0, 1e15, &r.samples_per_s);
  count("knee", -1, r.dw_max, &r.knee);
  count("probing", 0, r.dw_max, &r.probing);
  count("ceiling", 0, r.dw_max, &r.ceiling);
  if (!st.ok()) return st;
  if (r.probing > 0 && r.knee < 0) return Status::error("report: probing: " + std::to_string(r.probing) + " without a knee");
  auto curve = parse_curve(f->at("curve"));
  if (!curve.ok()) return Status::error("report: " + curve.status().message());
  r.curve = std::move(*curve);
  std::istringstream hosts(f->at("hosts"));
  std::string h;
  while (std::getline(hosts, h, ',')) {
    if (h.empty()) continue;
    // Host names reach operators' terminals (goldminer-top) and scrapers.
    if (!is_host_name(h))
      return Status::error("report: hosts: invalid host name '" + printable(h.substr(0, 64)) +
                           "': expected letters, digits and . - _ : [ ] (at most 255)");
    r.worker_hosts.push_back(h);
  }
  return r;
}

std::string encode_answer(const TargetAnswer& a) {
  return "job=" + std::to_string(a.job_id) + "\nnonce=" + std::to_string(a.nonce) +
         "\ntarget=" + std::to_string(a.target) + "\n";
}

Expected<TargetAnswer> decode_answer(const std::string& text) {
  auto f = strict_fields(text, {"job", "nonce", "target"}, "answer");
  if (!f.ok()) return f.status();
  TargetAnswer a;
  auto job = parse_job("answer: job", f->at("job"));
  if (!job.ok()) return job.status();
  auto nonce = parse_u64("answer: nonce", f->at("nonce"));
  if (!nonce.ok()) return nonce.status();
  auto target = parse_count("answer: target", f->at("target"), 0, 1 << 20);
  if (!target.ok()) return target.status();
  a.job_id = *job;
  a.nonce = *nonce;
  a.target = *target;
  return a;
}

DwClaim claim_of(const SessionReport& r) {
  DwClaim c;
  c.remaining_work = 1;  // unknown to a session: the same for every job
  c.base_speed = 0;
  const double wait = std::min(r.trainer_wait_fraction, kMaxWaitFraction);
  const double demand = r.consumption_rate / (1 - wait);
  c.gain_per_worker = r.per_worker_rate > 0 && demand > 0 ? r.per_worker_rate / demand : 1.0 / r.dw_max;
  c.cpu_per_worker = std::max<int64_t>(1, std::llround(r.cpus_per_dw * 1000));
  c.max_workers = r.dw_max;
  c.min_workers = std::min(1, r.dw_max);
  c.cap = r.ceiling > 0            ? std::min(r.dw_max, r.ceiling)
          : r.knee >= 0 ? std::min(r.dw_max, r.knee + r.probing)
                        : -1;
  if (r.knee >= 0 && r.probing > 0 && c.cap > r.knee) c.probe = c.cap - r.knee;
  c.held = r.workers + r.coming;
  // Measured: speeds from the curve (see worker_registry.h); the model's
  // gain above bounds only the slope beyond the largest measured count.
  double top = 0;
  for (const CurvePoint& p : r.curve) top = std::max(top, p.samples_per_s);
  const double d = std::max(r.samples_per_s / (1 - wait), top);
  // A curve of zeros says nothing of what a worker adds; nor does a count
  // that delivered nothing at all while others delivered (its workers had
  // not started, or the trainer took nothing then): valued by it, the job
  // would never be given that count again to measure it.
  if (top > 0)
    for (const CurvePoint& p : r.curve)
      if (!(r.probing > 0 && p.workers > r.knee) && p.samples_per_s > 0)
        c.measured.push_back({p.workers, p.samples_per_s / d});
  return c;
}

WorkerRegistry::WorkerRegistry(double worker_cpus, double stale_after_s)
    : worker_cpus_(worker_cpus), stale_after_s_(stale_after_s) {}

Status WorkerRegistry::accept(const SessionReport& report, uint32_t uid, uint32_t owner, double now_s,
                              const std::string& partition) {
  const std::string job = "job " + std::to_string(report.job_id);
  if (uid != owner)
    return Status::error(job + ": report from uid " + std::to_string(uid) + " refused: the job is uid " +
                         std::to_string(owner) + "'s");
  JobEntry& e = jobs_[report.job_id];
  e.report = report;
  e.uid = uid;
  e.partition = partition;
  e.reported_s = now_s;
  return Status();
}

void WorkerRegistry::reallocate(double now_s) {
  for (auto it = jobs_.begin(); it != jobs_.end();)
    it = now_s - it->second.reported_s > stale_after_s_ ? jobs_.erase(it) : std::next(it);
  std::vector<DwClaim> claims;
  std::vector<uint32_t> uids;
  for (const auto& [id, e] : jobs_) {
    claims.push_back(claim_of(e.report));
    uids.push_back(e.uid);
  }
  const int64_t capacity = std::llround(std::max(0.0, worker_cpus_) * 1000);
  std::vector<int> counts = allocate_workers(claims, capacity);
  // A user over max_user_share: that user's jobs give back workers, the
  // one whose last worker is worth least first, until within it; they are
  // capped there and the rest is shared again among everyone. Each round
  // caps one more user for good, so this ends within a round per user.
  const int64_t user_cap = std::llround(std::max(0.0, worker_cpus_) * std::clamp(max_user_share_, 0.0, 1.0) * 1000);
  std::set<uint32_t> capped;
  for (bool again = max_user_share_ < 1; again;) {
    again = false;
    std::map<uint32_t, int64_t> used;
    for (size_t j = 0; j < claims.size(); ++j) used[uids[j]] += counts[j] * claims[j].cpu_per_worker;
    for (const auto& [uid, milli] : used) {
      if (milli <= user_cap || capped.count(uid) != 0) continue;
      int64_t over = milli - user_cap;
      while (over > 0) {
        size_t cheapest = claims.size();
        for (size_t j = 0; j < claims.size(); ++j) {
          if (uids[j] != uid || counts[j] == 0) continue;
          if (cheapest == claims.size() ||
              marginal_value(claims[j], counts[j] - 1) < marginal_value(claims[cheapest], counts[cheapest] - 1))
            cheapest = j;
        }
        if (cheapest == claims.size()) break;
        --counts[cheapest];
        over -= claims[cheapest].cpu_per_worker;
      }
      for (size_t j = 0; j < claims.size(); ++j)
        if (uids[j] == uid) claims[j].max_workers = std::min(claims[j].max_workers, counts[j]);
      capped.insert(uid);
      again = true;
    }
    if (again) counts = allocate_workers(claims, capacity);
  }
  size_t i = 0;
  for (auto& [id, e] : jobs_) e.target = counts[i++];
}

int WorkerRegistry::target(uint32_t job_id) const {
  auto it = jobs_.find(job_id);
  return it == jobs_.end() ? -1 : it->second.target;
}

namespace {
JobView view_of(const ViewOf& view, const JobEntry& e) { return view ? view(e) : JobView::kFull; }
}  // namespace

std::string WorkerRegistry::json(const ViewOf& view) const {
  double held = 0;
  for (const auto& [id, e] : jobs_) held += e.report.workers * e.report.cpus_per_dw;
  std::string out = "{\"worker_cpus\": " + shown(worker_cpus_) + ", \"worker_cpus_held\": " + shown(held) +
                    ", \"jobs\": [";
  bool first = true;
  for (const auto& [id, e] : jobs_) {
    const JobView v = view_of(view, e);
    if (v == JobView::kHidden) continue;
    const bool full = v == JobView::kFull;
    const SessionReport& r = e.report;
    out += first ? "" : ", ";
    first = false;
    out += "{\"job\": " + std::to_string(id) + ", \"uid\": " + (full ? std::to_string(e.uid) : "null") +
           ", \"workers\": " + std::to_string(r.workers) + ", \"target\": " + std::to_string(e.target) +
           ", \"dw_max\": " + std::to_string(r.dw_max) + ", \"cpus_per_dw\": " + shown(r.cpus_per_dw) +
           ", \"trainer_wait_fraction\": " + shown(r.trainer_wait_fraction) +
           ", \"queue_fill\": " + shown(r.queue_fill) + ", \"samples_per_s\": " + shown(r.samples_per_s) +
           ", \"curve\": [";
    for (size_t p = 0; p < r.curve.size(); ++p)
      out += (p ? ", [" : "[") + std::to_string(r.curve[p].workers) + ", " + shown(r.curve[p].samples_per_s) + "]";
    out += "], \"knee\": " + (r.knee >= 0 ? std::to_string(r.knee) : "null") +
           ", \"probing\": " + std::to_string(r.probing) + ", \"hosts\": ";
    if (!full) {
      out += "null}";
      continue;
    }
    out += "[";
    for (size_t h = 0; h < r.worker_hosts.size(); ++h) out += (h ? ", " : "") + json_string(r.worker_hosts[h]);
    out += "]}";
  }
  return out + "]}";
}

std::string WorkerRegistry::table(const ViewOf& view) const {
  double held = 0;
  for (const auto& [id, e] : jobs_) held += e.report.workers * e.report.cpus_per_dw;
  char line[256];
  std::snprintf(line, sizeof line, "worker CPUs: %s, held by %zu jobs' workers: %s\n\n", shown(worker_cpus_).c_str(),
                jobs_.size(), shown(held).c_str());
  std::string out = line;
  std::snprintf(line, sizeof line, "%-10s %-10s %7s %6s %6s %5s %5s %5s %11s  %s\n", "JOB", "USER", "WORKERS",
                "TARGET", "DW-MAX", "KNEE", "WAIT%", "FILL%", "SAMPLES/S", "WORKER HOSTS");
  out += line;
  for (const auto& [id, e] : jobs_) {
    const JobView v = view_of(view, e);
    if (v == JobView::kHidden) continue;
    const SessionReport& r = e.report;
    const std::string knee = r.knee < 0 ? "-" : std::to_string(r.knee) + (r.probing > 0 ? "+" + std::to_string(r.probing) : "");
    // The curve on a line of its own below the row: "2:13.7k 6:7.9k".
    std::string curve;
    for (const CurvePoint& p : r.curve)
      curve += (curve.empty() ? "" : " ") + std::to_string(p.workers) + ":" + short_rate(p.samples_per_s);
    if (!curve.empty()) curve = std::string(11, ' ') + "curve (workers:samples/s): " + curve + "\n";
    if (v == JobView::kFigures) {
      std::snprintf(line, sizeof line, "%-10u %-10.10s %7d %6d %6d %5s %5.0f %5.0f %11.0f  %s\n", id, "-", r.workers,
                    e.target, r.dw_max, knee.c_str(), 100 * r.trainer_wait_fraction, 100 * r.queue_fill,
                    r.samples_per_s, "-");
      out += line + curve;
      continue;
    }
    std::map<std::string, int> per_host;
    for (const std::string& h : r.worker_hosts) ++per_host[h];
    std::string hosts;
    for (const auto& [h, n] : per_host) hosts += (hosts.empty() ? "" : ",") + h + (n > 1 ? "*" + std::to_string(n) : "");
    const std::string user = user_name(e.uid);
    std::snprintf(line, sizeof line, "%-10u %-10.10s %7d %6d %6d %5s %5.0f %5.0f %11.0f  %s\n", id, user.c_str(),
                  r.workers, e.target, r.dw_max, knee.c_str(), 100 * r.trainer_wait_fraction, 100 * r.queue_fill,
                  r.samples_per_s, hosts.empty() ? "-" : hosts.c_str());
    out += line + curve;
  }
  return out;
}

std::string WorkerRegistry::prometheus(const ViewOf& view) const {
  struct Gauge {
    const char* name;
    const char* help;
    double (*value)(const JobEntry&);
  };
  static const Gauge kGauges[] = {
      {"goldminer_job_workers", "Data workers connected to the job's session.",
       [](const JobEntry& e) { return static_cast<double>(e.report.workers); }},
      {"goldminer_job_worker_target", "Data workers goldminer-ctld gives the job.",
       [](const JobEntry& e) { return static_cast<double>(e.target); }},
      {"goldminer_job_trainer_wait_fraction", "Share of the last interval the trainer waited for batches.",
       [](const JobEntry& e) { return e.report.trainer_wait_fraction; }},
      {"goldminer_job_queue_fill", "How full the session's batch queue was (0..1).",
       [](const JobEntry& e) { return e.report.queue_fill; }},
      {"goldminer_job_samples_per_second", "Samples per second the trainer took.",
       [](const JobEntry& e) { return e.report.samples_per_s; }},
  };
  std::string out = "# HELP goldminer_worker_cpus CPUs the cluster has for data workers.\n"
                    "# TYPE goldminer_worker_cpus gauge\ngoldminer_worker_cpus " + shown(worker_cpus_) + "\n" +
                    "# HELP goldminer_jobs Jobs registered with goldminer-ctld (all users').\n"
                    "# TYPE goldminer_jobs gauge\ngoldminer_jobs " + std::to_string(jobs_.size()) + "\n";
  // Each job's labels: job_id (not "job", which Prometheus gives the
  // scrape target), partition, and user where the viewer may see it.
  std::map<uint32_t, std::string> labels;
  for (const auto& [id, e] : jobs_) {
    const JobView v = view_of(view, e);
    if (v == JobView::kHidden) continue;
    std::string l = "job_id=\"" + std::to_string(id) + "\"";
    if (!e.partition.empty()) l += ",partition=\"" + label_value(e.partition) + "\"";
    if (v == JobView::kFull) l += ",user=\"" + label_value(user_name(e.uid)) + "\"";
    labels[id] = l;
  }
  for (const Gauge& g : kGauges) {
    out += std::string("# HELP ") + g.name + " " + g.help + "\n# TYPE " + g.name + " gauge\n";
    for (const auto& [id, l] : labels) out += std::string(g.name) + "{" + l + "} " + shown(g.value(jobs_.at(id))) + "\n";
  }
  // The measured knee (jobs that know one) and curve (a series per count).
  out += "# HELP goldminer_job_knee Workers above which the job's measured growth did not pay.\n"
         "# TYPE goldminer_job_knee gauge\n";
  for (const auto& [id, l] : labels)
    if (const JobEntry& e = jobs_.at(id); e.report.knee >= 0)
      out += "goldminer_job_knee{" + l + "} " + std::to_string(e.report.knee) + "\n";
  out += "# HELP goldminer_job_curve_samples_per_second Samples per second the job measured at each worker count.\n"
         "# TYPE goldminer_job_curve_samples_per_second gauge\n";
  for (const auto& [id, l] : labels)
    for (const CurvePoint& p : jobs_.at(id).report.curve)
      out += "goldminer_job_curve_samples_per_second{" + l + ",workers=\"" + std::to_string(p.workers) + "\"} " +
             shown(p.samples_per_s) + "\n";
  return out;
}

}  // namespace goldminer
