// goldminer-sim job: one job's elastic workers under the shipped job-level
// policy (sched/scaling_policy.h, through its autosizer), unchanged, over a
// scenario of what its workers and trainer deliver as time goes on.
//
//   scenario CSV, one row a line:  from_s,workers,samples_per_s
//     from time from_s on, `workers` workers deliver samples_per_s (the
//     worker rows of the latest from_s at or before t are the curve at
//     t: a new time gives a new curve); workers `*`: the trainer takes at
//     most samples_per_s from then on (none: it takes everything). A first line "from_s,workers,samples_per_s" is a
//     header; blank lines and lines from '#' are skipped.
//
// A count without a row at time t delivers what the line through its
// nearest counts with rows says (linear between them, the largest's rate
// above it, proportional below the smallest). Each window the trainer
// takes the lesser of that and its limit, times (1 + noise x Z), Z
// standard normal (sim/speed_curve.h measured()). Modelling assumptions,
// stated with the numbers they make: a window's rate is its count's at
// its end (a resize takes effect in the next window, its workers joining
// at once); the trainer waits 1 - taken / limit of a window while the
// workers are the limit (0.5 without a limit), not at all while it is;
// the queue is full while the trainer is the limit; a batch is one sample.
// Slurm-free; deterministic in its seed.
#ifndef GOLDMINER_SIM_JOB_SCENARIO_H_
#define GOLDMINER_SIM_JOB_SCENARIO_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "gmcore/status.h"

namespace goldminer::sim {

struct ScenarioRow {
  double from_s = 0;
  int workers = 0;       // -1: the trainer's limit ('*')
  double samples_per_s = 0;
};

class JobScenario {
 public:
  // Parses the CSV text; errors name `source`, the line and what is wrong.
  static Expected<JobScenario> parse(const std::string& text, const std::string& source);

  // What k workers deliver at time t, before the trainer's limit.
  double workers_rate(double t, int k) const;
  // The trainer's limit at time t (infinity when none).
  double trainer_limit(double t) const;
  // The largest worker count with a row.
  int largest_count() const;
  // The latest from_s of any row.
  double last_change_s() const;

 private:
  std::vector<ScenarioRow> rows_;  // in from_s order, as written within one from_s
};

struct JobRunOptions {
  double duration_s = 7200;
  int start_workers = 1;
  int max_workers = 64;
  double noise = 0;    // a window's relative sd
  uint64_t seed = 1;
  double window_s = 5;
};

// One window: its end, the workers it ran with, what the trainer took,
// the policy's change after it and its line ("" when it judged nothing).
struct ScenarioWindow {
  double t_s = 0;
  int workers = 0;
  double samples_per_s = 0;
  int change = 0;
  std::string why;
};

std::vector<ScenarioWindow> run_job_scenario(const JobScenario& scenario, const JobRunOptions& options);

// {"t_s": .., "workers": .., "samples_per_s": .., "change": .., "why": ".."}
std::string window_json(const ScenarioWindow& w);

}  // namespace goldminer::sim

#endif  // GOLDMINER_SIM_JOB_SCENARIO_H_
