// The environment and limits Slurm's commands get from a job's: the SPANK
// plugin's (sbatch, squeue, scancel, srun from slurmstepd as the job's
// user), a session's, goldminer-dw's and goldminer-ctld's. What the
// commands are asked and what their output means is launch/slurm_cli.h's;
// how a command is run (fork, credentials, timeout) launch/subprocess.h's.
// Slurm-free: only the commands' text crosses.
#ifndef GOLDMINER_LAUNCH_SLURM_COMMAND_H_
#define GOLDMINER_LAUNCH_SLURM_COMMAND_H_

#include <string>
#include <vector>

#include "launch/subprocess.h"

namespace goldminer {

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

}  // namespace goldminer

#endif  // GOLDMINER_LAUNCH_SLURM_COMMAND_H_
