#include "gmcore/dw_allocation.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <queue>

namespace goldminer {
namespace {

constexpr double kInfinite = std::numeric_limits<double>::infinity();

double speed(const DwClaim& c, int k) { return std::min(1.0, c.base_speed + k * c.gain_per_worker); }

// Workers with marginal value >= lambda, ignoring the cap at speed 1 (the
// caller caps with saturating_workers): solves
// R*g / ((b+k*g)(b+(k+1)*g)) >= lambda*c for the largest k.
int64_t workers_at_or_above(const DwClaim& c, double lambda) {
  if (c.remaining_work <= 0 || c.gain_per_worker <= 0) return 0;
  const double g = c.gain_per_worker, b = c.base_speed;
  const double budget = c.remaining_work * g / (lambda * static_cast<double>(c.cpu_per_worker));
  const double x_max = (-g + std::sqrt(g * g + 4 * budget)) / 2;  // largest b + k*g allowed
  if (x_max < b) return 0;
  return static_cast<int64_t>(std::floor((x_max - b) / g)) + 1;
}

}  // namespace

int saturating_workers(const DwClaim& c) {
  if (c.gain_per_worker <= 0 || c.base_speed >= 1.0 || c.remaining_work <= 0) return 0;
  double k = std::ceil((1.0 - c.base_speed) / c.gain_per_worker - 1e-9);
  return static_cast<int>(std::min<double>(k, c.max_workers));
}

double marginal_value(const DwClaim& c, int k) {
  if (k >= saturating_workers(c)) return 0;
  double now = speed(c, k), next = speed(c, k + 1);
  double saved = now <= 0 ? kInfinite : c.remaining_work / now - c.remaining_work / next;
  return saved / static_cast<double>(c.cpu_per_worker);
}

std::vector<int> allocate_workers(const std::vector<DwClaim>& claims, int64_t cpu_capacity) {
  const size_t n = claims.size();
  std::vector<int> cap(n), floor(n), out(n, 0);
  int64_t want = 0;
  for (size_t i = 0; i < n; ++i) {
    cap[i] = saturating_workers(claims[i]);
    floor[i] = std::min(std::max(claims[i].min_workers, 0), cap[i]);
    want += cap[i] * claims[i].cpu_per_worker;
  }
  if (want <= cpu_capacity) return cap;  // enough for everyone: the common case

  // Floors, most valuable first worker first.
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return marginal_value(claims[a], 0) > marginal_value(claims[b], 0);
  });
  int64_t left = cpu_capacity;
  for (size_t i : order) {
    int64_t cost = floor[i] * claims[i].cpu_per_worker;
    if (floor[i] > 0 && cost <= left) {
      out[i] = floor[i];
      left -= cost;
    }
  }

  // Water-filling: the smallest lambda whose allocation fits, by bisection
  // on log(lambda); then the leftover goes one worker at a time.
  auto cost_at = [&](double lambda, std::vector<int>* counts) {
    int64_t used = 0;
    for (size_t i = 0; i < n; ++i) {
      int64_t k = std::max<int64_t>(out[i], std::min<int64_t>(cap[i], workers_at_or_above(claims[i], lambda)));
      if (counts) (*counts)[i] = static_cast<int>(k);
      used += (k - out[i]) * claims[i].cpu_per_worker;
    }
    return used;
  };
  double lo = -60, hi = 60;  // log(lambda) in seconds per milli-CPU
  if (cost_at(std::exp(lo), nullptr) > left) {
    for (int it = 0; it < 48 && hi - lo > 1e-6; ++it) {
      double mid = (lo + hi) / 2;
      (cost_at(std::exp(mid), nullptr) > left ? lo : hi) = mid;
    }
  } else {
    hi = lo;
  }
  std::vector<int> counts(n);
  left -= cost_at(std::exp(hi), &counts);
  out = counts;

  using Entry = std::pair<double, size_t>;
  std::priority_queue<Entry> next;
  for (size_t i = 0; i < n; ++i)
    if (out[i] < cap[i]) next.push({marginal_value(claims[i], out[i]), i});
  while (!next.empty() && left > 0) {
    size_t i = next.top().second;
    next.pop();
    if (claims[i].cpu_per_worker > left) continue;
    ++out[i];
    left -= claims[i].cpu_per_worker;
    if (out[i] < cap[i]) next.push({marginal_value(claims[i], out[i]), i});
  }
  return out;
}

}  // namespace goldminer
