#include "sched/autosizer.h"

#include <algorithm>
#include <cmath>

namespace goldminer {

int Autosizer::observe(const QueueMetrics& m) {
  const AutosizerConfig& c = config_;
  // Out of bounds (the job's settings changed): correct at once.
  if (m.workers < c.min_workers) return c.min_workers - m.workers;
  if (m.workers > c.max_workers) return c.max_workers - m.workers;

  bool grow = false, shrink = false;
  int want = 0;
  if (m.trainer_wait_fraction > c.grow_wait_fraction && m.workers < c.max_workers) {
    // What the trainer could consume if it never waited, and the gap.
    double wait = std::min(m.trainer_wait_fraction, 0.999);
    double gap = m.consumption_rate * wait / (1 - wait);
    double per_worker = m.per_worker_rate > 0 ? m.per_worker_rate : 0;
    if (m.workers == 0 || m.consumption_rate <= 0) {
      grow = true;  // nothing flows yet: any worker is used
      want = 1;
    } else if (per_worker > 0 && std::min(gap, per_worker) >= c.min_worker_use * per_worker) {
      grow = true;
      // Clamped as a double: a tiny per-worker rate must not overflow int.
      want = static_cast<int>(std::min<double>(std::ceil(gap / per_worker), c.max_workers - m.workers));
    }
  } else if (m.queue_fill >= c.shrink_queue_fill && m.trainer_wait_fraction <= c.grow_wait_fraction &&
             m.workers > c.min_workers && m.per_worker_rate > 0 &&
             (m.workers - 1) * m.per_worker_rate >= c.shrink_headroom * m.consumption_rate) {
    shrink = true;
  }

  grow_streak_ = grow ? grow_streak_ + 1 : 0;
  shrink_streak_ = shrink ? shrink_streak_ + 1 : 0;
  if (grow_streak_ >= c.patience) {
    grow_streak_ = 0;
    return std::clamp(want, 1, c.max_workers - m.workers);
  }
  if (shrink_streak_ >= c.patience) {
    shrink_streak_ = 0;
    return -1;
  }
  return 0;
}

}  // namespace goldminer
