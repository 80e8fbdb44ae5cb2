#include "sim/cachew.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace goldminer::sim {

CachewScaler::CachewScaler(const CachewConfig& config)
    : config_(config), want_(std::clamp(std::max(1, config.min_workers), 0, config.max_workers)) {}

bool CachewScaler::measured(int workers, double rate, double* mean) {
  if (workers != count_) {
    count_ = workers;
    recent_.clear();
  }
  recent_.push_back(rate);
  const size_t n = static_cast<size_t>(std::max(1, config_.windows));
  if (recent_.size() > n) recent_.erase(recent_.begin());
  if (recent_.size() < n) return false;
  *mean = std::accumulate(recent_.begin(), recent_.end(), 0.0) / static_cast<double>(n);
  return true;
}

void CachewScaler::settle_at(int workers, double rate) {
  phase_ = Phase::kSettled;
  want_ = workers;
  settled_rate_ = rate;
}

int CachewScaler::observe(int workers, double rate) {
  const int floor = std::max(1, config_.min_workers);
  if (workers < floor) {
    // Granted fewer than any count it would keep (the CPUs are taken):
    // nothing to judge; it still asks.
    count_ = -1;
    recent_.clear();
    return want_;
  }
  double mean = 0;
  if (!measured(workers, rate, &mean)) return want_;
  switch (phase_) {
    case Phase::kUp: {
      const auto below = rate_.find(workers - 1);
      rate_[workers] = mean;
      if (below != rate_.end() && mean <= below->second * (1 + config_.grow_gain)) {
        // The last worker did not pay: taken back; then try fewer.
        best_ = workers - 1;
        phase_ = Phase::kDown;
        want_ = std::max(floor, best_ - 1);
        if (want_ == best_) settle_at(best_, below->second);
        return want_;
      }
      if (workers >= config_.max_workers || workers < want_) {
        // At dw-max, or granted fewer than asked: what it has is its best.
        best_ = workers;
        phase_ = Phase::kDown;
        want_ = std::max(floor, workers - 1);
        if (want_ == workers) settle_at(workers, mean);
        return want_;
      }
      want_ = workers + 1;
      return want_;
    }
    case Phase::kDown: {
      if (workers > want_) return want_;  // the removal has not happened yet
      rate_[workers] = mean;
      const double best_rate = rate_.count(best_) ? rate_[best_] : mean;
      if (workers < best_ && mean >= best_rate * (1 - config_.shrink_tolerance)) {
        best_ = workers;  // the removal cost (almost) nothing: keep it, try one more
        rate_[best_] = std::max(mean, best_rate);
        want_ = std::max(floor, workers - 1);
        if (want_ == workers) settle_at(workers, mean);
        return want_;
      }
      settle_at(best_, best_rate);
      return want_;
    }
    case Phase::kSettled: {
      if (workers == want_ && std::fabs(mean - settled_rate_) > config_.signal_shift * settled_rate_) {
        // A signal: conditions changed. Scale up again from here.
        ++signals_;
        rate_.clear();
        rate_[workers] = mean;
        phase_ = Phase::kUp;
        want_ = std::min(config_.max_workers, workers + 1);
        recent_.clear();
      }
      return want_;
    }
  }
  return want_;
}

}  // namespace goldminer::sim
