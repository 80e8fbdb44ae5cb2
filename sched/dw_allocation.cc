#include "sched/dw_allocation.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <queue>

namespace goldminer {
namespace {

constexpr double kInfinite = std::numeric_limits<double>::infinity();

bool is_measured(const DwClaim& c) { return !c.measured.empty(); }

// The most workers a claim may have: max_workers, and cap when set.
int limit_of(const DwClaim& c) {
  int limit = std::max(c.max_workers, 0);
  return c.cap >= 0 ? std::min(limit, c.cap) : limit;
}

// A measured claim above its largest measured count: from (workers, speed)
// on, speed rises by `slope` a worker (the last measured segment's slope
// or the model's gain, the smaller; never below 0), up to 1.
struct Tail {
  int workers = 0;
  double speed = 0;
  double slope = 0;
};

Tail tail_of(const DwClaim& c) {
  Tail t{0, std::clamp(c.base_speed, 0.0, 1.0), c.gain_per_worker};
  for (const auto& [w, s] : c.measured) {
    const double v = std::clamp(s, 0.0, 1.0);
    if (w <= t.workers) {  // a measured 0 replaces base_speed; others are out of order
      if (w == 0) t.speed = v;
      continue;
    }
    t.slope = (v - t.speed) / (w - t.workers);
    t.workers = w;
    t.speed = v;
  }
  t.slope = std::max(0.0, std::min(t.slope, c.gain_per_worker));
  return t;
}

// A measured claim's speed: piecewise-linear through (0, base_speed) and
// the measured points, then its tail (see dw_allocation.h).
double measured_speed(const DwClaim& c, int k) {
  int pw = 0;
  double ps = std::clamp(c.base_speed, 0.0, 1.0);
  for (const auto& [w, s] : c.measured) {
    const double v = std::clamp(s, 0.0, 1.0);
    if (w <= pw) {
      if (w == 0) ps = v;
      continue;
    }
    if (k <= w) return ps + (v - ps) * (k - pw) / (w - pw);
    pw = w;
    ps = v;
  }
  const Tail t = tail_of(c);
  return std::min(1.0, t.speed + (k - t.workers) * t.slope);
}

double speed(const DwClaim& c, int k) {
  return is_measured(c) ? measured_speed(c, k) : std::min(1.0, c.base_speed + k * c.gain_per_worker);
}

// How a measured claim gets workers beyond `from`: the upper concave hull
// of -R/s(k) for k in [from, to], as segments: segment j ends at ends[j]
// workers (it starts where j - 1 ended, or at `from`), and values[j], its
// seconds saved per milli-CPU per worker, falls with j. A start at speed
// 0 makes a first segment of infinite value up to the first count that
// moves the job. Only segments that save time are kept.
struct Hull {
  std::vector<int> ends;
  std::vector<double> values;
};

Hull hull_of(const DwClaim& c, int from, int to) {
  Hull h;
  if (from >= to) return h;
  std::vector<double> v(static_cast<size_t>(to - from + 1));
  for (int k = from; k <= to; ++k) {
    const double s = speed(c, k);
    v[k - from] = s > 0 ? -c.remaining_work / s : -kInfinite;
  }
  auto at = [&](int k) { return v[static_cast<size_t>(k - from)]; };
  int start = from;
  while (start < to && at(start) == -kInfinite) ++start;
  if (at(start) == -kInfinite) return h;  // no count moves the job
  if (start > from) {
    h.ends.push_back(start);
    h.values.push_back(kInfinite);
  }
  std::vector<int> upper;  // monotone chain: the hull's vertices
  for (int k = start; k <= to; ++k) {
    while (upper.size() >= 2) {
      const int a = upper[upper.size() - 2], m = upper.back();
      // m on or below the line from a to k: not a vertex of the upper hull.
      if ((at(m) - at(a)) * (k - a) <= (at(k) - at(a)) * (m - a)) upper.pop_back();
      else break;
    }
    upper.push_back(k);
  }
  const double cpu = static_cast<double>(c.cpu_per_worker);
  for (size_t j = 1; j < upper.size(); ++j) {
    const double value = (at(upper[j]) - at(upper[j - 1])) / (upper[j] - upper[j - 1]) / cpu;
    if (!(value > 0)) break;  // values fall: no later segment saves time either
    h.ends.push_back(upper[j]);
    h.values.push_back(value);
  }
  return h;
}

// Workers of a measured claim at marginal value >= lambda: the end of its
// last hull segment worth lambda, or `from`.
int64_t hull_workers_at_or_above(const Hull& h, int from, double lambda) {
  int64_t k = from;
  for (size_t j = 0; j < h.ends.size() && h.values[j] >= lambda; ++j) k = h.ends[j];
  return k;
}

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
  if (c.remaining_work <= 0) return 0;
  const int limit = limit_of(c);
  if (!is_measured(c)) {
    if (c.gain_per_worker <= 0 || c.base_speed >= 1.0) return 0;
    double k = std::ceil((1.0 - c.base_speed) / c.gain_per_worker - 1e-9);
    return static_cast<int>(std::min<double>(k, limit));
  }
  // The first count of the highest speed: scanned up to the largest
  // measured count; the tail rises steadily, so its best is its end.
  const Tail t = tail_of(c);
  int best = 0;
  double best_speed = speed(c, 0);
  for (int k = 1; k <= std::min(limit, t.workers); ++k) {
    const double s = speed(c, k);
    if (s > best_speed) best = k, best_speed = s;
  }
  if (limit > t.workers && t.slope > 0 && t.speed < 1.0) {
    const double full = t.workers + std::ceil((1.0 - t.speed) / t.slope - 1e-9);
    const int end = static_cast<int>(std::min<double>(full, limit));
    if (speed(c, end) > best_speed) best = end;
  }
  return best;
}

double marginal_value(const DwClaim& c, int k) {
  if (k >= saturating_workers(c)) return 0;
  double now = speed(c, k), next = speed(c, k + 1);
  if (!(next > now)) return 0;  // a measured worker that does not speed the job up
  double saved = now <= 0 ? kInfinite : c.remaining_work / now - c.remaining_work / next;
  return saved / static_cast<double>(c.cpu_per_worker);
}

namespace {

// One allocation in progress: each claim's cap (its saturating count, or
// less under a limit), what it holds so far, and the milli-CPU not yet
// given; for measured claims their hulls from their floors (none for
// model claims, nor when no claim is measured).
struct Allocation {
  const std::vector<DwClaim>& claims;
  std::vector<int> cap, floor, out;
  int64_t left = 0;
  std::vector<Hull> hulls;
  std::vector<size_t> open;  // claims that may still get workers

  bool measured_at(size_t i) const { return !hulls.empty() && is_measured(claims[i]); }
};

// Caps and floors; whether their caps together fit in `cpu_capacity`.
// `limit`: per claim, at most this many workers (below its own cap), or
// -1; null: none.
bool set_caps(Allocation& a, int64_t cpu_capacity, const std::vector<int>* limit) {
  const size_t n = a.claims.size();
  a.cap.assign(n, 0);
  a.floor.assign(n, 0);
  a.out.assign(n, 0);
  int64_t want = 0;
  for (size_t i = 0; i < n; ++i) {
    a.cap[i] = saturating_workers(a.claims[i]);
    if (limit != nullptr && (*limit)[i] >= 0) a.cap[i] = std::min(a.cap[i], (*limit)[i]);
    a.floor[i] = std::min(std::max(a.claims[i].min_workers, 0), a.cap[i]);
    want += a.cap[i] * a.claims[i].cpu_per_worker;
  }
  return want <= cpu_capacity;
}

// Floors, most valuable first worker first; a floor that does not fit
// whole is not granted.
void grant_floors(Allocation& a, int64_t cpu_capacity) {
  const size_t n = a.claims.size();
  std::vector<double> first_value(n);
  for (size_t i = 0; i < n; ++i) first_value[i] = marginal_value(a.claims[i], 0);
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return first_value[x] > first_value[y]; });
  a.left = cpu_capacity;
  for (size_t i : order) {
    int64_t cost = a.floor[i] * a.claims[i].cpu_per_worker;
    if (a.floor[i] > 0 && cost <= a.left) {
      a.out[i] = a.floor[i];
      a.left -= cost;
    }
  }
}

// The claims that may still get workers (measured ones: with a hull
// segment that saves time) and the smallest and largest marginal values
// in play, for water-filling's bisection: *lo, *hi.
void open_claims(Allocation& a, double* lo, double* hi) {
  const size_t n = a.claims.size();
  if (std::any_of(a.claims.begin(), a.claims.end(), is_measured)) a.hulls.resize(n);
  *lo = std::numeric_limits<double>::max();
  *hi = 0;
  for (size_t i = 0; i < n; ++i) {
    if (a.out[i] >= a.cap[i]) continue;
    double first, last;
    if (a.measured_at(i)) {
      a.hulls[i] = hull_of(a.claims[i], a.out[i], a.cap[i]);
      if (a.hulls[i].ends.empty()) continue;
      first = a.hulls[i].values.front();
      last = a.hulls[i].values.back();
    } else {
      first = marginal_value(a.claims[i], a.out[i]);
      last = marginal_value(a.claims[i], a.cap[i] - 1);
    }
    a.open.push_back(i);
    if (std::isfinite(first)) *hi = std::max(*hi, first);
    *lo = std::min(*lo, last);
  }
}

// Water-filling: the smallest lambda (seconds saved per milli-CPU) whose
// allocation fits, by bisection on log(lambda) between the smallest and
// largest marginal values in play; every open claim then gets its
// workers worth at least that lambda.
void water_fill(Allocation& a) {
  double lo, hi;
  open_claims(a, &lo, &hi);
  std::vector<int> counts = a.out;
  auto cost_at = [&](double lambda, bool keep) {
    int64_t used = 0;
    for (size_t i : a.open) {
      int64_t k = a.measured_at(i)
                      ? hull_workers_at_or_above(a.hulls[i], a.out[i], lambda)
                      : std::max<int64_t>(a.out[i], workers_at_or_above(a.claims[i], a.cap[i], lambda));
      if (keep) counts[i] = static_cast<int>(k);
      used += (k - a.out[i]) * a.claims[i].cpu_per_worker;
    }
    return used;
  };
  if (!a.open.empty() && hi > 0 && lo > 0) {
    double log_lo = std::log(lo), log_hi = std::log(hi) + 1e-9;
    if (cost_at(std::exp(log_hi), false) <= a.left) {
      // Bisection keeps cost(exp(log_hi)) <= left < cost(exp(log_lo)).
      for (int it = 0; it < 40 && log_hi - log_lo > 1e-3; ++it) {
        double mid = (log_lo + log_hi) / 2;
        (cost_at(std::exp(mid), false) > a.left ? log_lo : log_hi) = mid;
      }
      a.left -= cost_at(std::exp(log_hi), true);
    }
  }
  a.out = counts;
}

// A claim's next step: one worker, or a measured claim's next hull
// segment (whole); its value per milli-CPU and workers.
struct Step {
  double value = 0;
  int workers = 0;
};

Step step_of(const Allocation& a, size_t i) {
  if (!a.measured_at(i))
    return a.out[i] < a.cap[i] ? Step{marginal_value(a.claims[i], a.out[i]), 1} : Step{};
  const Hull& h = a.hulls[i];
  for (size_t j = 0; j < h.ends.size(); ++j)
    if (h.ends[j] > a.out[i]) return Step{h.values[j], h.ends[j] - a.out[i]};
  return Step{};
}

// The leftover, one step at a time by exact marginal value, the highest
// first; a step that does not fit is passed over.
void grant_steps(Allocation& a) {
  using Entry = std::pair<double, size_t>;
  std::vector<Entry> heap;
  for (size_t i : a.open)
    if (step_of(a, i).workers > 0) heap.push_back({step_of(a, i).value, i});
  std::priority_queue<Entry> next(std::less<Entry>(), std::move(heap));
  while (!next.empty() && a.left > 0) {
    size_t i = next.top().second;
    next.pop();
    const Step step = step_of(a, i);
    const int64_t cost = step.workers * a.claims[i].cpu_per_worker;
    if (cost > a.left) continue;
    a.out[i] += step.workers;
    a.left -= cost;
    if (const Step after = step_of(a, i); after.workers > 0) next.push({after.value, i});
  }
}

// What no whole segment fits: single workers of measured claims, the
// highest exact marginal value first, while one saves time.
void grant_single_workers(Allocation& a) {
  while (!a.hulls.empty() && a.left > 0) {
    size_t best = a.claims.size();
    double best_value = 0;
    for (size_t i : a.open) {
      if (!a.measured_at(i) || a.out[i] >= a.cap[i] || a.claims[i].cpu_per_worker > a.left) continue;
      const double v = marginal_value(a.claims[i], a.out[i]);
      if (v > best_value) best = i, best_value = v;
    }
    if (best == a.claims.size()) break;
    ++a.out[best];
    a.left -= a.claims[best].cpu_per_worker;
  }
}

// `limit`: per claim, at most this many workers (below its own cap), or
// -1; null: none. Floors first, then water-filling, then the leftover by
// exact marginal value (a measured claim: one hull segment at a time,
// then single workers; see dw_allocation.h).
std::vector<int> allocate_within_caps(const std::vector<DwClaim>& claims, int64_t cpu_capacity,
                                      const std::vector<int>* limit) {
  Allocation a{claims, {}, {}, {}, 0, {}, {}};
  if (set_caps(a, cpu_capacity, limit)) return a.cap;  // enough for everyone: the common case
  grant_floors(a, cpu_capacity);
  water_fill(a);
  grant_steps(a);
  grant_single_workers(a);
  return a.out;
}

}  // namespace

std::vector<int> allocate_workers(const std::vector<DwClaim>& claims, int64_t cpu_capacity) {
  const auto probes = [](const DwClaim& c) { return c.probe > 0 && c.cap >= 0; };
  if (std::none_of(claims.begin(), claims.end(), probes)) return allocate_within_caps(claims, cpu_capacity, nullptr);
  // Every claim first up to its cap less its probe; the probes then share
  // what is left, the most valuable next worker first.
  std::vector<int> below(claims.size(), -1);
  for (size_t i = 0; i < claims.size(); ++i)
    if (probes(claims[i]))
      below[i] = std::max(claims[i].cap - claims[i].probe, std::min(claims[i].cap, claims[i].held));
  std::vector<int> out = allocate_within_caps(claims, cpu_capacity, &below);
  int64_t left = cpu_capacity;
  for (size_t i = 0; i < claims.size(); ++i) left -= out[i] * claims[i].cpu_per_worker;
  std::vector<std::pair<double, size_t>> order;
  for (size_t i = 0; i < claims.size(); ++i)
    if (probes(claims[i]) && out[i] >= below[i]) order.push_back({marginal_value(claims[i], out[i]), i});
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (const auto& [value, i] : order) {
    const int64_t cpu = std::max<int64_t>(1, claims[i].cpu_per_worker);
    const int add = static_cast<int>(std::min<int64_t>(claims[i].cap - out[i], std::max<int64_t>(0, left) / cpu));
    if (add <= 0) continue;
    out[i] += add;
    left -= add * cpu;
  }
  return out;
}

}  // namespace goldminer
