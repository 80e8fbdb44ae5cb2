#include "sim/job_scenario.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <sstream>

#include "gmcore/json.h"
#include "gmcore/splitmix.h"
#include "goldminer/elastic.h"
#include "sched/scaling_policy.h"
#include "sim/speed_curve.h"

namespace goldminer::sim {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();
// The trainer's wait while the workers limit it and it has no limit of its
// own: starved, whatever the count (the autosizer's signal to grow).
constexpr double kWaitWithoutLimit = 0.5;

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\r' || s.back() == ' ' || s.back() == '\t')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  return s.substr(i);
}

bool number(const std::string& text, double lo, double hi, double* out) {
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (*end != '\0' || errno != 0 || !std::isfinite(v) || v < lo || v > hi) return false;
  *out = v;
  return true;
}

}  // namespace

Expected<JobScenario> JobScenario::parse(const std::string& text, const std::string& source) {
  JobScenario s;
  std::istringstream in(text);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    line = trim(line);
    if (line.empty() || line[0] == '#') continue;
    const std::string where = source + ":" + std::to_string(n) + ": ";
    if (line == "from_s,workers,samples_per_s") {
      if (!s.rows_.empty()) return Status::error(where + "a header after the first row");
      continue;
    }
    std::vector<std::string> f;
    std::istringstream fields(line);
    for (std::string x; std::getline(fields, x, ',');) f.push_back(trim(x));
    if (f.size() != 3) return Status::error(where + "expected from_s,workers,samples_per_s: '" + line.substr(0, 80) + "'");
    ScenarioRow r;
    if (!number(f[0], 0, 1e9, &r.from_s)) return Status::error(where + "from_s '" + f[0] + "': expected seconds from 0");
    double w = 0;
    if (f[1] == "*") {
      r.workers = -1;
    } else if (number(f[1], 0, 1 << 16, &w) && w == std::floor(w)) {
      r.workers = static_cast<int>(w);
    } else {
      return Status::error(where + "workers '" + f[1] + "': expected a count from 0 to 65536, or * (the trainer)");
    }
    if (!number(f[2], 0, 1e15, &r.samples_per_s))
      return Status::error(where + "samples_per_s '" + f[2] + "': expected a rate from 0");
    if (!s.rows_.empty() && r.from_s < s.rows_.back().from_s)
      return Status::error(where + "from_s " + f[0] + " is before the row above: rows go forward in time");
    s.rows_.push_back(r);
  }
  bool workers = false;
  for (const ScenarioRow& r : s.rows_) workers |= r.workers >= 0;
  if (!workers) return Status::error(source + ": no row says what workers deliver");
  return s;
}

double JobScenario::workers_rate(double t, int k) const {
  if (k <= 0) return 0;
  // The worker rows of the latest from_s at or before t are the curve.
  double from = -1;
  for (const ScenarioRow& r : rows_)
    if (r.workers >= 0 && r.from_s <= t) from = r.from_s;
  std::map<int, double> at;  // count -> its rate at t
  for (const ScenarioRow& r : rows_)
    if (r.workers > 0 && r.from_s == from) at[r.workers] = r.samples_per_s;
  if (at.empty()) return 0;
  auto hi = at.lower_bound(k);
  if (hi != at.end() && hi->first == k) return hi->second;
  if (hi == at.end()) return std::prev(hi)->second;  // above the largest: flat
  if (hi == at.begin()) return hi->second * k / hi->first;  // below the smallest: proportional
  auto lo = std::prev(hi);
  const double f = static_cast<double>(k - lo->first) / (hi->first - lo->first);
  return lo->second + f * (hi->second - lo->second);
}

double JobScenario::trainer_limit(double t) const {
  double limit = kInfinity;
  for (const ScenarioRow& r : rows_)
    if (r.workers < 0 && r.from_s <= t) limit = r.samples_per_s;
  return limit;
}

int JobScenario::largest_count() const {
  int k = 0;
  for (const ScenarioRow& r : rows_) k = std::max(k, r.workers);
  return k;
}

double JobScenario::last_change_s() const { return rows_.empty() ? 0 : rows_.back().from_s; }

std::vector<ScenarioWindow> run_job_scenario(const JobScenario& scenario, const JobRunOptions& o) {
  AutosizerConfig c;
  c.min_workers = 1;
  c.max_workers = std::max(1, o.max_workers);
  ScalingPolicy policy(c);
  SplitMix64 noise(o.seed);
  std::vector<ScenarioWindow> out;
  int k = std::clamp(o.start_workers, c.min_workers, c.max_workers);
  double capacity = 0;  // one worker's best rate while the queue had room
  for (double t = o.window_s; t <= o.duration_s + 1e-9; t += o.window_s) {
    const double made = scenario.workers_rate(t, k), limit = scenario.trainer_limit(t);
    const double taken = measured(std::min(made, limit), o.noise, &noise);
    QueueMetrics m;
    m.workers = m.joined = k;
    const bool trainer_bound = made >= limit;
    m.arrival_rate = trainer_bound ? made : taken;
    m.consumption_rate = taken;
    m.samples_per_s = taken;
    m.trainer_wait_fraction =
        trainer_bound ? 0 : std::isfinite(limit) ? std::clamp(1 - taken / limit, 0.0, 1.0) : kWaitWithoutLimit;
    m.queue_fill = trainer_bound ? 1.0 : 0.1;
    if (!trainer_bound && k > 0) capacity = std::max(capacity, taken / k);
    m.per_worker_rate = capacity > 0 ? capacity : (k > 0 ? taken / k : 0);
    const ScalingDecision d = policy.observe(m, t, false);
    ScenarioWindow w;
    w.t_s = t;
    w.workers = k;
    w.samples_per_s = taken;
    w.why = d.why;
    const int next = std::clamp(k + d.change, c.min_workers, c.max_workers);
    w.change = next - k;
    k = next;
    out.push_back(std::move(w));
  }
  return out;
}

std::string window_json(const ScenarioWindow& w) {
  char head[160];
  std::snprintf(head, sizeof head, "{\"t_s\": %.6g, \"workers\": %d, \"samples_per_s\": %.0f, \"change\": %d, ", w.t_s,
                w.workers, w.samples_per_s, w.change);
  return std::string(head) + "\"why\": " + json_string(w.why) + "}";
}

}  // namespace goldminer::sim
