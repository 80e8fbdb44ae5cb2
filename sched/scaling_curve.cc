#include "sched/scaling_curve.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace goldminer {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

ScalingCurve::ScalingCurve(CurveConfig config) : config_(config) {
  config_.settle_windows = std::max(0, config_.settle_windows);
  config_.measure_windows = std::max(1, config_.measure_windows);
  config_.keep_windows = std::max(config_.measure_windows, config_.keep_windows);
}

void ScalingCurve::expire(double now_s) {
  if (now_s != now_s_) cache_.clear(), noise_cache_ = -1;
  now_s_ = now_s;
  for (auto it = windows_.begin(); it != windows_.end();) {
    auto& w = it->second;
    while (!w.empty() && now_s - w.front().at_s > config_.max_age_s) w.pop_front();
    it = w.empty() ? windows_.erase(it) : std::next(it);
  }
}

void ScalingCurve::observe(int workers, double samples_per_s, double now_s, bool count_changed) {
  expire(now_s);
  if (workers != current_ || count_changed) {
    current_ = workers;
    since_change_ = 0;
    settled_ = 0;
  }
  // The first windows after a change measure neither count.
  if (++since_change_ <= config_.settle_windows) return;
  if (!std::isfinite(samples_per_s) || samples_per_s < 0) return;
  cache_.clear(), noise_cache_ = -1;
  auto& w = windows_[workers];
  w.push_back({samples_per_s, now_s});
  while (static_cast<int>(w.size()) > config_.keep_windows) w.pop_front();
  ++settled_;
}

std::optional<CurvePoint> ScalingCurve::point(int workers) const {
  auto cached = cache_.find(workers);
  if (cached != cache_.end()) return cached->second;
  return cache_[workers] = compute(workers);
}

std::optional<CurvePoint> ScalingCurve::compute(int workers) const {
  auto it = windows_.find(workers);
  if (it == windows_.end()) return std::nullopt;
  std::vector<double> rates;
  for (const Window& w : it->second)
    if (now_s_ - w.at_s <= config_.max_age_s) rates.push_back(w.samples_per_s);
  if (static_cast<int>(rates.size()) < config_.measure_windows) return std::nullopt;
  CurvePoint p;
  p.workers = workers;
  p.samples_per_s = median(rates);
  p.windows = static_cast<int>(rates.size());
  double sum = 0;
  for (double r : rates) sum += r;
  p.mean = sum / static_cast<double>(rates.size());
  double ss = 0;
  for (double r : rates) ss += (r - p.mean) * (r - p.mean);
  p.sd = rates.size() > 1 ? std::sqrt(ss / static_cast<double>(rates.size() - 1)) : 0;
  return p;
}

double ScalingCurve::relative_noise() const {
  if (noise_cache_ >= 0) return noise_cache_;
  double num = 0, den = 0;
  for (const auto& [workers, w] : windows_) {
    auto p = point(workers);
    if (!p || p->windows < 2 || p->mean <= 0) continue;
    num += (p->windows - 1) * (p->sd / p->mean) * (p->sd / p->mean);
    den += p->windows - 1;
  }
  return noise_cache_ = std::max(config_.noise_floor, den > 0 ? std::sqrt(num / den) : 0.0);
}

double ScalingCurve::standard_error(const CurvePoint& p) const {
  return relative_noise() * p.mean / std::sqrt(static_cast<double>(std::max(1, p.windows)));
}

std::vector<CurvePoint> ScalingCurve::points() const {
  std::vector<CurvePoint> out;
  for (const auto& [workers, w] : windows_)
    if (auto p = point(workers)) out.push_back(*p);
  // Bands only once every point is known: the noise is pooled over them.
  for (CurvePoint& p : out) p.band = 2 * standard_error(p);
  return out;
}

void ScalingCurve::forget(int workers) {
  windows_.erase(workers);
  cache_.clear(), noise_cache_ = -1;
}

std::string format_curve(const std::vector<CurvePoint>& points) {
  std::string out;
  char buf[64];
  for (const CurvePoint& p : points) {
    std::snprintf(buf, sizeof buf, "%s%d:%.0f", out.empty() ? "" : ",", p.workers, p.samples_per_s);
    out += buf;
  }
  return out;
}

Expected<std::vector<CurvePoint>> parse_curve(const std::string& text) {
  std::vector<CurvePoint> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    const std::string entry = text.substr(pos, comma - pos);
    const std::string what = "curve: entry '" + entry.substr(0, 40) + "'";
    const size_t colon = entry.find(':');
    if (colon == std::string::npos) return Status::error(what + ": expected WORKERS:SAMPLES_PER_S");
    const std::string w = entry.substr(0, colon), r = entry.substr(colon + 1);
    char* end = nullptr;
    errno = 0;
    const long workers = std::strtol(w.c_str(), &end, 10);
    if (w.empty() || *end != '\0' || errno != 0 || workers < 0 || workers > (1 << 20))
      return Status::error(what + ": workers must be a whole number from 0 to " + std::to_string(1 << 20));
    errno = 0;
    const double rate = std::strtod(r.c_str(), &end);
    if (r.empty() || *end != '\0' || errno != 0 || !std::isfinite(rate) || rate < 0 || rate > 1e15)
      return Status::error(what + ": samples/s must be a number from 0 to 1e15");
    if (!out.empty() && workers <= out.back().workers)
      return Status::error(what + ": worker counts must be ascending and distinct");
    CurvePoint p;
    p.workers = static_cast<int>(workers);
    p.samples_per_s = rate;
    out.push_back(p);
    pos = comma + 1;
    if (comma + 1 == text.size()) return Status::error("curve: ends with ','");
  }
  return out;
}

std::string short_rate(double v) {
  char buf[32];
  const double a = std::fabs(v);
  if (a >= 1e9) std::snprintf(buf, sizeof buf, "%.1fG", v / 1e9);
  else if (a >= 1e6) std::snprintf(buf, sizeof buf, "%.1fM", v / 1e6);
  else if (a >= 1e3) std::snprintf(buf, sizeof buf, "%.1fk", v / 1e3);
  else std::snprintf(buf, sizeof buf, "%.0f", v);
  return buf;
}

}  // namespace goldminer
