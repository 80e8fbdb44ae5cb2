// Elastic data workers as a Session is given them (SessionOptions::elastic):
// the bounds and thresholds it sizes its workers within, and the launcher
// that starts more. The controller that acts on them is internal
// (sched/elastic.h: ElasticController; launch/elastic_setup.h:
// SlurmWorkerLauncher and elastic_from_environment, which fills an
// ElasticSetup from the environment spank_goldminer.so gives a
// mode=elastic job).
#ifndef GOLDMINER_INCLUDE_ELASTIC_H_
#define GOLDMINER_INCLUDE_ELASTIC_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "gmcore/status.h"

namespace goldminer {

// What a session tells goldminer-ctld each interval (sched/worker_registry.h).
struct SessionReport;

// One job's autosizer (sched/autosizer.h): grows while the trainer waits
// and the next worker would be put to use; shrinks when the queue stays
// full and one worker fewer still keeps the trainer busy; acts only after
// `patience` consecutive observations agree, within [min, max].
struct AutosizerConfig {
  int min_workers = 0;
  int max_workers = 8;
  double grow_wait_fraction = 0.05;  // trainer waiting more than this: starved
  double min_worker_use = 0.5;       // next worker must be used at least this much
  double shrink_queue_fill = 0.9;    // queue at least this full: oversupplied
  double shrink_headroom = 1.1;      // one fewer must still make consumption x this
  int patience = 3;                  // agreeing observations before acting
  // Measured scaling (sched/scaling_policy.h): a step is judged once the
  // new count has `measure_windows` windows after `settle_windows` dropped
  // ones (up to twice as many while undecided); the workers of a step pay
  // when their gain exceeds `pay_fraction` of one worker's measured rate
  // each, beyond the noise (a window's relative noise, pooled over the
  // job's counts, taken as at least `noise_floor`). A growth that did not
  // pay is undone and the job stays at that knee for `reprobe_after_s`
  // (doubled after each probe that did not pay, up to `reprobe_max_s`).
  // Under goldminer-ctld the knee is soft: workers are kept when they add
  // `useful_fraction` of one worker's rate each, and those that add less
  // than `pay_fraction` compete with other jobs' workers on their measured
  // marginal value (goldminer-ctld grants them only where no other job's
  // worker is worth more).
  double pay_fraction = 0.5;
  double useful_fraction = 0.1;
  double noise_floor = 0.01;
  int settle_windows = 1;
  int measure_windows = 3;
  double reprobe_after_s = 60;
  double reprobe_max_s = 960;
};

// Starts data workers that connect to the session by themselves later.
class WorkerLauncher {
 public:
  virtual ~WorkerLauncher() = default;
  // Starts up to `n` more; returns how many it started, with `error` saying
  // why when fewer.
  virtual int start(int n, std::string* error) = 0;
  // How many of those it started still wait for resources (pending).
  virtual int waiting() = 0;
  // How many of those it started have not ended (waiting or running).
  virtual int live() = 0;
  // Cancels up to `n` of the waiting ones, newest first; returns how many.
  virtual int cancel_waiting(int n) = 0;
  // The session ends: cancels those that wait and stops those that run
  // (they drain). Later calls do nothing.
  virtual void end() = 0;
  // Workers on the trainer's own node did not pay: those started from now
  // on run on other nodes, where the launcher can say so. By default it
  // cannot (nothing changes).
  virtual void avoid_trainer_node() {}
};

struct ElasticConfig {
  AutosizerConfig autosizer;  // min_workers, max_workers and the thresholds
  // Workers started with the job (its first companion job), still to join
  // when the controller is created.
  int initial_workers = 0;
  // Started workers that have not joined within this long no longer hold
  // growth back (one that failed to start, a node that went away).
  double join_grace_s = 120;
  // After a start that failed, no new start for this long.
  double retry_after_s = 60;
};

// What the session reads from the environment spank_goldminer.so gives a
// batch job with mode=elastic (GOLDMINER_MODE, GOLDMINER_DW,
// GOLDMINER_DW_MAX, GOLDMINER_DW_SBATCH, GOLDMINER_TRAINER,
// GOLDMINER_AUTH_JOB, SLURM_JOB_ID; GOLDMINER_AUTOSCALE_INTERVAL,
// GOLDMINER_CTLD, GOLDMINER_MUNGE_SOCKET, GOLDMINER_CTLD_USER optional).
struct ElasticSetup {
  ElasticConfig config;
  double interval_s = 5;
  std::shared_ptr<WorkerLauncher> launcher;
  uint32_t job_id = 0;     // SLURM_JOB_ID
  double cpus_per_dw = 1;  // --cpus-per-task of the workers' sbatch
  // goldminer-ctld (GOLDMINER_CTLD, HOST:PORT; "" none: the session sizes
  // itself), the munged socket to reach it through (GOLDMINER_MUNGE_SOCKET;
  // "" munge's default) and the user it runs as (GOLDMINER_CTLD_USER).
  std::string ctld, munge_socket, ctld_user;
  // Sends a report and returns the job's target (set by the session when
  // `ctld` is; tests give their own).
  std::function<Expected<int>(const SessionReport&)> report;
};

}  // namespace goldminer

#endif  // GOLDMINER_INCLUDE_ELASTIC_H_
