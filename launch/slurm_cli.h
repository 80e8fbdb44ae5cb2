// Slurm's client commands (sbatch, squeue, scontrol, scancel) as every part
// of goldminer calls them: one typed call per question, each running its
// command through one SlurmCommand (the caller's: as the job's user from
// the SPANK plugin, on the user's PATH from a session or goldminer-dw,
// with the daemon's PATH from goldminer-ctld, a fake in tests) and reading
// its output here, the one place that knows Slurm's output text. The
// arguments a call passes are part of its contract (the unit tests check
// them). Slurm-free: only the commands' text crosses; how a command is run
// (fork, credentials, timeout) is launch/subprocess.h's, the environment
// it gets launch/slurm_command.h's.
//
// Errors are values naming the command: "squeue: exit 1: <its last line>"
// when it failed, the runner's own error (which names the program: "no
// executable squeue in PATH ...", "sbatch (/usr/bin/sbatch) did not end
// within 10 s ...") when it could not run. A call whose answer is "Slurm
// does not know that job" says so as a value, not an error, where its
// callers act on it.
#ifndef GOLDMINER_LAUNCH_SLURM_CLI_H_
#define GOLDMINER_LAUNCH_SLURM_CLI_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "gmcore/status.h"
#include "launch/subprocess.h"

namespace goldminer {

// Runs Slurm command NAME (sbatch, squeue, scontrol, scancel) with ARGS and
// returns its exit code and output; an error only when it could not run.
// Every call below takes one; tests pass a fake.
using SlurmCommand =
    std::function<Expected<CommandResult>(const std::string& name, const std::vector<std::string>& args)>;

// A SlurmCommand running `name` found on the PATH of `env`, with exactly
// `env`, killed after `timeout_s`: how a job's own processes (a session,
// goldminer-dw) and goldminer-ctld run Slurm's commands.
SlurmCommand slurm_command_on_path(std::vector<std::string> env, double timeout_s);

// The same for a job's own processes: this process's PATH and SLURM_CONF
// only (launch/slurm_command.h slurm_command_env).
SlurmCommand user_slurm_command(double timeout_s);

// --- sbatch --------------------------------------------------------------

// The job id in `sbatch --parsable` output ("J" or "J;CLUSTER" on its last
// line, after any warnings); an error quoting the output otherwise.
Expected<uint32_t> parse_submitted_job_id(const std::string& output);

// Submits a job: `sbatch ARGS` (ARGS carry --parsable); its job id, or an
// error "sbatch: exit N: <its last line>" (also when it printed no job id).
Expected<uint32_t> submit(const SlurmCommand& run, const std::vector<std::string>& sbatch_args);

// --- squeue: job states --------------------------------------------------

// Where a job the plugin or a session submitted stands, from its state as
// `squeue -o %T` prints it (exit code and output): kRunning (running,
// configuring), kWaiting (pending, suspended, requeued, ...: cancelled
// rather than waited for) or kGone (ended, or no longer known to Slurm).
enum class JobState { kGone, kWaiting, kRunning };
JobState parse_job_state(int squeue_exit_code, const std::string& squeue_output);

// Job id -> state from `squeue --noheader --format="%i %T"` output; lines
// that are not "ID STATE" (a warning on stderr, which comes with the
// output) are skipped.
std::map<uint32_t, JobState> parse_job_states(const std::string& squeue_output);

// Whether squeue failed because it knows none of the jobs it was asked
// about ("slurm_load_jobs error: Invalid job id specified": they left the
// queue, or never were), from its output; other failures (slurmctld
// unreachable, a timeout) are not.
bool squeue_knows_none(const std::string& squeue_output);

// "7,8,9": job ids as squeue --jobs and scancel take them.
std::string job_list(const std::vector<uint32_t>& ids);

// One job as squeue lists it.
struct JobStatus {
  bool listed = false;        // false: squeue no longer lists it (it ended)
  JobState state = JobState::kGone;
  std::string state_name;     // as squeue prints it: PENDING, RUNNING, ...
  std::string reason;         // why it waits ("Resources"); "" for none
};

// `squeue --noheader --jobs=JOB --format="%T %r"`: job `job`'s state and
// reason. An error when squeue fails otherwise than not knowing the job,
// or prints something that is not a state.
Expected<JobStatus> job_status(const SlurmCommand& run, uint32_t job);

// `squeue --noheader --format="%i %T" --jobs=IDS`: each of `ids`'s state;
// a job squeue does not list (or none, "Invalid job id") is kGone. An
// error when squeue fails otherwise (slurmctld unreachable, a timeout).
Expected<std::map<uint32_t, JobState>> job_states(const SlurmCommand& run, const std::vector<uint32_t>& ids);

// `squeue --noheader --format="%i %T" --name=NAME --user=UID`: the states
// of user `uid`'s jobs named `name`; an error when squeue fails.
Expected<std::map<uint32_t, JobState>> named_job_states(const SlurmCommand& run, const std::string& name, uid_t uid);

// Whether trainer job `job` has ended, from `squeue --noheader
// --states=all --jobs=JOB --format=%T` (its exit code and output): why, in
// words ("job 12 is NODE_FAIL", "job 12 is no longer known to Slurm"), or
// "" while it may still run (pending, running, suspended, requeued), and
// when squeue fails otherwise (slurmctld restarting must not end workers).
std::string trainer_job_ended(uint32_t job, int squeue_exit_code, const std::string& squeue_output);

// The same, asking squeue: goldminer-dw --trainer-job asks it while its
// trainer is out of reach. "" when squeue cannot run or overran its time.
std::string trainer_job_ended(const SlurmCommand& run, uint32_t job);

// --- squeue: owners and the queue ------------------------------------------

// The error message of job_owner for a job Slurm does not know.
extern const char kNotKnownToSlurm[];

struct JobOwner {
  uid_t uid = 0;
  std::string state;  // as squeue prints it: RUNNING, PENDING, ...
  std::string partition;  // the job's partition(s), as squeue prints them
};

// `squeue --noheader --jobs=JOB --format="%U %T %P"`: who owns job `job`,
// its state and partition. An error kNotKnownToSlurm when squeue does not list it, else
// "squeue: ..." (it failed, or printed no "UID STATE PARTITION").
Expected<JobOwner> job_owner(const SlurmCommand& run, uint32_t job);

// A row of the queue.
struct QueuedJob {
  uid_t uid = 0;
  double cpus = 0;    // %C: the CPUs it holds (running) or asks (pending)
  std::string state;  // RUNNING, PENDING
  std::string name;   // may hold spaces
};

// `squeue --format="%U %C %T %j"` rows; an error names the first row
// without a uid, CPUs and a state.
Expected<std::vector<QueuedJob>> parse_queued_jobs(const std::string& squeue_output);

// `squeue --noheader --states=PENDING,RUNNING --format="%U %C %T %j"`:
// every pending and running job, one squeue for all.
Expected<std::vector<QueuedJob>> pending_and_running_jobs(const SlurmCommand& run);

// --- squeue: a job's components and its Comment -----------------------------

// `squeue --noheader --jobs=J --Format=<this>`: one line per component of
// job J (one line for a job that is not heterogeneous), fields ended by '|'.
extern const char kJobComponentsFormat[];

// One component of a job as squeue lists it (launch/het_step.h starts
// data workers in one).
struct JobComponent {
  uint32_t job_id = 0;
  uint32_t het_job_id = 0;  // the leader's id; 0: not a heterogeneous job
  int offset = -1;          // its place in the hetjob; -1: not heterogeneous
  int ntasks = 1;
  int cpus_per_task = 1;
  bool asks_gpus = false;   // --gpus*, --gres=gpu in any of its TRES requests
  bool batch = false;       // sbatch's (its batch step starts the workers), not salloc's or srun's
  std::string work_dir;     // "" when squeue names none
  std::string time_left;    // as squeue prints it ("9:58", "1-00:00:00"); "" when unlimited
};

// Reads that squeue output; an error quotes the line it cannot read.
Expected<std::vector<JobComponent>> parse_job_components(const std::string& squeue_output);

// `squeue --noheader --jobs=JOB --Format=kJobComponentsFormat`: job
// `job`'s components. An error "squeue: exit 1: <its last line>" when
// squeue fails (a job it does not know: "Invalid job id specified";
// slurmctld down), or the line it cannot read.
Expected<std::vector<JobComponent>> job_components(const SlurmCommand& run, uint32_t job);

// `squeue --noheader --states=all --jobs=JOB --format=%k`: job `job`'s
// Comment as squeue prints it ("(null)" for none), without its line end.
// An error "squeue (reading job JOB's Comment): ..." when squeue fails.
Expected<std::string> job_comment(const SlurmCommand& run, uint32_t job);

// `scontrol update JobId=JOB Comment=COMMENT` (as the job's owner or an
// operator: slurmctld refuses anyone else). An error "scontrol update
// JobId=JOB Comment=...: ..." when it fails.
Status set_job_comment(const SlurmCommand& run, uint32_t job, const std::string& comment);

// --- scancel -------------------------------------------------------------

// Which of the jobs scancel ends: all, only those still pending (one that
// started meanwhile is left to run), or the running ones asked to drain
// with SIGTERM.
enum class CancelScope { kAll, kPending, kTerminate };

// `scancel --quiet [--state=PENDING | --signal=TERM] IDS`; an error names
// scancel's failure. Nothing runs when `ids` is empty.
Status cancel_jobs(const SlurmCommand& run, const std::vector<uint32_t>& ids, CancelScope scope);

// `scancel --quiet --name=NAME --user=UID`: every job of user `uid` named
// `name`.
Status cancel_named(const SlurmCommand& run, const std::string& name, uid_t uid);

// --- scontrol ------------------------------------------------------------

// A node as `scontrol --details --oneliner show node` lists it, with what
// its callers read.
struct SlurmNode {
  std::string name;
  std::string state;                    // "MIXED", "IDLE+DRAIN", "IDLE*", ...
  std::vector<std::string> partitions;
  int64_t cpus_total = 0, cpus_allocated = 0;
  int64_t gpus = 0, gpus_used = 0;      // from Gres= and GresUsed=
};

// Whether a node can take jobs: not down, drained, failed, powered down or
// not responding ("*").
bool node_takes_jobs(const SlurmNode& node);

// Each line one node; an error names the line that lacks NodeName, CPUTot
// or CPUAlloc, or has a bad number.
Expected<std::vector<SlurmNode>> parse_node_lines(const std::string& text);

// `scontrol --details --oneliner show node`: every node.
Expected<std::vector<SlurmNode>> node_lines(const SlurmCommand& run);

// The host names `scontrol show hostnames` prints, one word each; an
// error when there are none.
Expected<std::vector<std::string>> parse_host_names(const std::string& text);

// `scontrol show hostnames NODELIST`: a node list ("g[1-2],c1") expanded
// into host names. An error "scontrol show hostnames NODELIST: ..." when
// scontrol fails or names none.
Expected<std::vector<std::string>> host_names(const SlurmCommand& run, const std::string& nodelist);

// What goldminer reads of `scontrol show config`.
struct SlurmConfig {
  uid_t slurm_user = 0;      // SlurmUser's uid
  bool private_jobs = true;  // PrivateData has "jobs"
};

// An error names the line that is missing or bad.
Expected<SlurmConfig> parse_slurm_config(const std::string& show_config);

// `scontrol show config`.
Expected<SlurmConfig> slurm_config(const SlurmCommand& run);

}  // namespace goldminer

#endif  // GOLDMINER_LAUNCH_SLURM_CLI_H_
