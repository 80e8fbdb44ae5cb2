// Which job_test calls are for data workers (select_policy.h's kDataWorker).
//
// The SPANK plugin names a --goldminer job J's companion worker jobs
// "goldminer-dw.J" (launch/companion_job.h). A name is something any user
// can give any job, so the select plugin grants a job the data-worker
// placement only when slurmctld's own records back it: job J exists, runs,
// belongs to the same user, was submitted with --goldminer (its SPANK
// option, kept by slurmctld), and its running workers plus this one hold
// no more than dw-max x cpus-per-dw CPUs, its --goldminer value read under
// the site's limits (goldminer.conf max_dw_per_job and max_cpus_per_dw,
// select_config.h: slurmctld does not read plugstack.conf). A forged name
// gets no more than the job's own elastic session could start, and is
// otherwise an ordinary CPU job (reserve, no tiers).
#ifndef GOLDMINER_SCHED_DATA_WORKER_H_
#define GOLDMINER_SCHED_DATA_WORKER_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "sched/select_config.h"

namespace goldminer {

// J from "goldminer-dw.J"; 0 for any other name.
uint32_t companion_trainer_id(const char* job_name);

// The --goldminer value among a job's SPANK option variables as slurmctld
// keeps them ("_SLURM_SPANK_OPTION_goldminer_goldminer=VALUE"); nullopt
// when the job was submitted without the option.
std::optional<std::string> goldminer_option_in_spank_env(const char* const* env, size_t count);

struct WorkerClaim {
  uint32_t worker_uid = 0;
  uint32_t worker_cpus = 0;  // the CPUs the pending worker job asks for
  bool trainer_found = false;
  uint32_t trainer_uid = 0;
  bool trainer_running = false;
  std::optional<std::string> trainer_option;  // its --goldminer value
  uint32_t cpus_held = 0;  // by the trainer's other running companion jobs
};

// "" when the claim is backed as the header says; else why not, for the
// log ("job 12 is not a --goldminer job"). `site` gives the limits.
std::string verify_data_worker(uint32_t trainer_id, const WorkerClaim& claim, const SelectConfig& site);

}  // namespace goldminer

#endif  // GOLDMINER_SCHED_DATA_WORKER_H_
