// A Cachew-style autoscaler, a baseline of goldminer-sim (policy
// "cachew"): each job scales its own data workers as Cachew's dispatcher
// does (Graur et al., "Cachew: Machine Learning Input Data Processing as a
// Service", USENIX ATC 2022), from the throughput its trainer sees, with
// no model and no cluster-level sharing (workers go to jobs first come,
// first served, as under goldminer-joblevel). Modelling assumptions,
// stated in goldminer-sim(1):
// - A count is measured over `windows` windows (their mean rate).
// - Up: from its first count, a job adds one worker while the last one
//   raised its rate by more than grow_gain (7 %); the first that did not
//   is taken back.
// - Down: then it removes one worker at a time while the rate stays
//   within shrink_tolerance (3 %) of the best count's; the first removal
//   that cost more is taken back, and the job settles.
// - Settled, it re-scales only on a signal, not a timer: the mean of its
//   last `windows` windows moved by more than signal_shift (10 %) from
//   the rate it settled at; it then scales up again from where it is.
// The counts it asks for are the caller's to grant; a window of a count it
// did not ask for (fewer were granted) is measured as any other.
#ifndef GOLDMINER_SIM_CACHEW_H_
#define GOLDMINER_SIM_CACHEW_H_

#include <map>
#include <vector>

namespace goldminer::sim {

struct CachewConfig {
  double grow_gain = 0.07;
  double shrink_tolerance = 0.03;
  double signal_shift = 0.10;
  int windows = 3;
  int min_workers = 1;
  int max_workers = 256;
};

class CachewScaler {
 public:
  explicit CachewScaler(const CachewConfig& config);
  // One window: `workers` delivered `rate` (samples/s). Returns the count
  // wanted from now on.
  int observe(int workers, double rate);
  int wanted() const { return want_; }
  bool settled() const { return phase_ == Phase::kSettled; }
  // Re-scalings started by a signal so far.
  int signals() const { return signals_; }

 private:
  enum class Phase { kUp, kDown, kSettled };
  // The mean of the current count's windows once it has `windows` of them.
  bool measured(int workers, double rate, double* mean);
  void settle_at(int workers, double rate);

  CachewConfig config_;
  Phase phase_ = Phase::kUp;
  int want_ = 1;
  int count_ = -1;              // the count the windows below are of
  std::vector<double> recent_;  // its windows
  std::map<int, double> rate_;  // mean rate per count measured in this scaling
  int best_ = -1;               // the count scaling down is judged against
  double settled_rate_ = 0;
  int signals_ = 0;
};

}  // namespace goldminer::sim

#endif  // GOLDMINER_SIM_CACHEW_H_
