// Job-level data-worker autosizing: one job's controller decides, from the
// state of the queue between its data workers and its trainer, whether to
// add or remove workers. Grows while the trainer waits and the next worker
// would be put to use; shrinks when the queue stays full and one worker
// fewer still keeps the trainer busy. Acts only after `patience`
// consecutive observations agree (hysteresis), within [min, max].
#ifndef GOLDMINER_SCHED_AUTOSIZER_H_
#define GOLDMINER_SCHED_AUTOSIZER_H_

#include "goldminer/elastic.h"  // AutosizerConfig

namespace goldminer {

// What the trainer session measures over one observation window.
struct QueueMetrics {
  int workers = 0;                  // data workers connected
  int joined = 0;                   // data workers that ever joined the session
  double arrival_rate = 0;          // batches/s into the queue
  double consumption_rate = 0;      // batches/s taken by the trainer
  double trainer_wait_fraction = 0; // share of the window the trainer waited
  double per_worker_rate = 0;       // batches/s one worker produces
  double queue_fill = 0;            // 0 empty .. 1 full
  double samples_per_s = 0;         // samples/s the trainer took
  int warming = 0;                  // connected workers that have delivered no batch yet
  int starting = 0;                 // of those, the ones still starting: they asked for no split yet
  int local_workers = 0;            // of `workers`, those on the trainer's own node
};

// Thread-compatible; one per job.
class Autosizer {
 public:
  explicit Autosizer(AutosizerConfig config) : config_(config) {}

  // Returns the change in workers to make now: > 0 add, < 0 remove, 0 keep.
  int observe(const QueueMetrics& m);

  const AutosizerConfig& config() const { return config_; }

 private:
  AutosizerConfig config_;
  int grow_streak_ = 0;
  int shrink_streak_ = 0;
};

}  // namespace goldminer

#endif  // GOLDMINER_SCHED_AUTOSIZER_H_
