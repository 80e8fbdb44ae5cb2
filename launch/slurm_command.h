// Slurm's commands as every part of goldminer runs them: the SPANK plugin
// (sbatch, squeue, scancel, srun from slurmstepd as the job's user), the
// trainer's session (squeue about its companion job; sbatch, squeue and
// scancel for elastic workers), goldminer-dw (squeue about its trainer's
// job) and goldminer-ctld (squeue about jobs' owners). Here: the type a
// caller runs a command through, the environment and limits such a
// command gets from the job's, and what their output means. How a
// command is run (fork, credentials, timeout) is launch/subprocess.h's.
// Slurm-free: only the commands' text crosses.
#ifndef GOLDMINER_LAUNCH_SLURM_COMMAND_H_
#define GOLDMINER_LAUNCH_SLURM_COMMAND_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "gmcore/status.h"
#include "launch/subprocess.h"

namespace goldminer {

// Runs Slurm command NAME (sbatch, squeue, scancel) with ARGS: as the job's
// user from the plugin, as the user themself from a session. Tests pass a
// fake.
using SlurmCommand =
    std::function<Expected<CommandResult>(const std::string& name, const std::vector<std::string>& args)>;

// The value of NAME in an environment of "NAME=value" strings (a job's, as
// SPANK or the process gives it); "" if unset.
std::string env_value(const std::vector<std::string>& env, const std::string& name);

// The environment for the plugin's squeue and scancel: the job's PATH and
// SLURM_CONF (which a configless site sets in the job), nothing else: no
// loader variable (LD_PRELOAD, ...) and none of the SQUEUE_*/SLURM_*
// settings that would change the output the plugin reads. (The programs
// themselves come from the configuration: launch/subprocess.h command_in.)
std::vector<std::string> slurm_command_env(const std::vector<std::string>& job_env);

// The soft limits the job's tasks get, from the SLURM_RLIMIT_<NAME>
// variables sbatch, salloc or srun put in the job's environment for each
// limit PropagateResourceLimits propagates ("U" first when the user asked
// with --propagate): CPU, FSIZE, DATA, STACK, CORE, RSS, NPROC, NOFILE,
// MEMLOCK, AS. The plugin's commands run with them, so that sbatch and
// srun, which propagate their own limits, give the workers the job's
// limits, not slurmstepd's. A value that is not a number is skipped.
std::vector<SoftLimit> job_soft_limits(const std::vector<std::string>& job_env);

// The job id in `sbatch --parsable` output ("J" or "J;CLUSTER" on its last
// line, after any warnings); an error quoting the output otherwise.
Expected<uint32_t> parse_submitted_job_id(const std::string& output);

// Where a job the plugin or a session submitted stands, from its state as
// `squeue -o %T` prints it (exit code and output): kRunning (running,
// configuring), kWaiting (pending, suspended, requeued, ...: cancelled
// rather than waited for) or kGone (ended, or no longer known to Slurm).
enum class JobState { kGone, kWaiting, kRunning };
JobState parse_job_state(int squeue_exit_code, const std::string& squeue_output);

// Job id -> state from `squeue --noheader --format="%i %T"` output; lines
// that are not "ID STATE" are skipped.
std::map<uint32_t, JobState> parse_job_states(const std::string& squeue_output);

// Whether squeue failed because it knows none of the jobs it was asked
// about ("slurm_load_jobs error: Invalid job id specified": they left the
// queue, or never were), from its output; other failures (slurmctld
// unreachable, a timeout) are not.
bool squeue_knows_none(const std::string& squeue_output);

// "7,8,9": job ids as squeue --jobs and scancel take them.
std::string job_list(const std::vector<uint32_t>& ids);

// Whether trainer job `job` has ended, from `squeue --noheader
// --states=all --jobs=JOB --format=%T` (its exit code and output): why, in
// words ("job 12 is NODE_FAIL", "job 12 is no longer known to Slurm"), or
// "" while it may still run (pending, running, suspended, requeued), and
// when squeue fails otherwise (slurmctld restarting must not end workers).
// goldminer-dw --trainer-job asks it while its trainer is out of reach.
std::string trainer_job_ended(uint32_t job, int squeue_exit_code, const std::string& squeue_output);

}  // namespace goldminer

#endif  // GOLDMINER_LAUNCH_SLURM_COMMAND_H_
