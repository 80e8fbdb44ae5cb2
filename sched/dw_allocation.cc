#include "sched/dw_allocation.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <queue>

namespace goldminer {
namespace {

constexpr double kInfinite = std::numeric_limits<double>::infinity();

double speed(const DwClaim& c, int k) { return std::min(1.0, c.base_speed + k * c.gain_per_worker); }

// Workers k < cap whose marginal value per milli-CPU is >= lambda. Below
// the saturating worker, speeds are uncapped and the count has a closed
// form: R*g / ((b+k*g)(b+(k+1)*g)) >= lambda*c. The saturating worker
// (cap - 1) is valued exactly.
int64_t workers_at_or_above(const DwClaim& c, int cap, double lambda) {
  if (cap <= 0) return 0;
  const double g = c.gain_per_worker, b = c.base_speed;
  const double budget = c.remaining_work * g / (lambda * static_cast<double>(c.cpu_per_worker));
  const double x_max = (-g + std::sqrt(g * g + 4 * budget)) / 2;  // largest b + k*g allowed
  int64_t uncapped = x_max < b ? 0 : static_cast<int64_t>(std::floor((x_max - b) / g)) + 1;
  if (uncapped < cap) return uncapped;
  return cap - 1 + (marginal_value(c, cap - 1) >= lambda ? 1 : 0);
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
  std::vector<double> first_value(n);
  for (size_t i = 0; i < n; ++i) first_value[i] = marginal_value(claims[i], 0);
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return first_value[a] > first_value[b]; });
  int64_t left = cpu_capacity;
  for (size_t i : order) {
    int64_t cost = floor[i] * claims[i].cpu_per_worker;
    if (floor[i] > 0 && cost <= left) {
      out[i] = floor[i];
      left -= cost;
    }
  }

  // Water-filling: the smallest lambda (seconds saved per milli-CPU) whose
  // allocation fits, by bisection on log(lambda) between the smallest and
  // largest marginal values in play; the leftover then goes one worker at
  // a time by exact marginal value.
  std::vector<size_t> open;  // claims that may still get workers
  double lo = std::numeric_limits<double>::max(), hi = 0;
  for (size_t i = 0; i < n; ++i) {
    if (out[i] >= cap[i]) continue;
    open.push_back(i);
    double first = marginal_value(claims[i], out[i]), last = marginal_value(claims[i], cap[i] - 1);
    if (std::isfinite(first)) hi = std::max(hi, first);
    lo = std::min(lo, last);
  }
  std::vector<int> counts = out;
  auto cost_at = [&](double lambda, bool keep) {
    int64_t used = 0;
    for (size_t i : open) {
      int64_t k = std::max<int64_t>(out[i], workers_at_or_above(claims[i], cap[i], lambda));
      if (keep) counts[i] = static_cast<int>(k);
      used += (k - out[i]) * claims[i].cpu_per_worker;
    }
    return used;
  };
  if (!open.empty() && hi > 0 && lo > 0) {
    double log_lo = std::log(lo), log_hi = std::log(hi) + 1e-9;
    if (cost_at(std::exp(log_hi), false) <= left) {
      // Bisection keeps cost(exp(log_hi)) <= left < cost(exp(log_lo)).
      for (int it = 0; it < 40 && log_hi - log_lo > 1e-3; ++it) {
        double mid = (log_lo + log_hi) / 2;
        (cost_at(std::exp(mid), false) > left ? log_lo : log_hi) = mid;
      }
      left -= cost_at(std::exp(log_hi), true);
    }
  }
  out = counts;

  using Entry = std::pair<double, size_t>;
  std::vector<Entry> heap;
  for (size_t i : open)
    if (out[i] < cap[i]) heap.push_back({marginal_value(claims[i], out[i]), i});
  std::priority_queue<Entry> next(std::less<Entry>(), std::move(heap));
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
