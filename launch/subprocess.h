// Running a Slurm command (sbatch, squeue, scancel, srun) from a Slurm
// daemon process (slurmstepd, through the SPANK plugin) on behalf of a
// job's user: a fresh process with exactly the environment, working
// directory and credentials given, its output captured, killed when it
// overruns its time.
//
// What a child gets, whoever starts it (run_command, spawn_detached):
// stdin from /dev/null; no descriptor above 2 (close_range, else the
// entries of /proc/self/fd, else every number below RLIMIT_NOFILE); every
// signal's disposition SIG_DFL and an empty signal mask (slurmstepd
// blocks and ignores signals its commands must not inherit: an ignored
// SIGPIPE or SIGTERM survives exec); with CommandSpec::daemon_limits,
// RLIMIT_NOFILE's soft limit at most 1024, the hard one kept (slurmd
// raises its soft limit to the hard one, often 2^20, which a program that
// walks or select()s its descriptors pays for; Slurm's commands raise it
// themselves where they need more); then CommandSpec::soft_limits. Other
// limits are the caller's (slurmstepd's: Slurm applies a job's own limits
// in each task, not in slurmstepd; a job's own process passes its own
// on, which its sbatch propagates to the workers it submits).
// run_command's child leads a process group of its own, which the timeout
// ends.
//
// The child does only async-signal-safe work between fork and exec (the
// daemon has other threads), so everything it needs is prepared first.
#ifndef GOLDMINER_LAUNCH_SUBPROCESS_H_
#define GOLDMINER_LAUNCH_SUBPROCESS_H_

#include <sys/resource.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "gmcore/status.h"

namespace goldminer {

// Who the command runs as. The caller must be root, or a root process whose
// effective ids were dropped to these (slurmstepd in SPANK user_init): the
// child then takes them for good (real, effective and saved), and is
// refused if it could still become root again.
struct Credentials {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary groups; set only where the caller is root
};

// A soft resource limit a child sets before exec: RLIMIT_*, and its value
// (capped at the hard limit, which a child never raises).
struct SoftLimit {
  int resource = 0;
  rlim_t value = 0;
  bool operator==(const SoftLimit& o) const { return resource == o.resource && value == o.value; }
};

struct CommandSpec {
  std::vector<std::string> argv;  // argv[0]: an absolute path
  std::vector<std::string> env;   // "NAME=value": the child's whole environment
  std::string cwd = "/";          // "/" when it cannot be entered
  std::optional<Credentials> as;  // unset: this process's own
  // Then SIGTERM to its process group, and SIGKILL kKillGraceS later.
  double timeout_s = 60;
  // A daemon's child (the SPANK plugin's): RLIMIT_NOFILE's soft limit at
  // most 1024 first.
  bool daemon_limits = false;
  // Set after that cap, so they may raise it back: the SPANK plugin gives
  // the job's own (slurm_command.h job_soft_limits).
  std::vector<SoftLimit> soft_limits;
};

// Between a command's SIGTERM and its SIGKILL, after its timeout.
constexpr double kKillGraceS = 1;

struct CommandResult {
  int exit_code = -1;    // -1 when killed by a signal (or the timeout)
  bool timed_out = false;
  double timeout_s = 0;  // the limit it overran, when timed_out
  std::string output;    // stdout and stderr together, at most 64 KiB
};

// An error only when the command could not be run at all (fork, pipe, exec
// or the credentials failed) or did not end even after SIGKILL; its own
// failure, a timeout included, is in the result. Returns at the latest
// about timeout_s + kKillGraceS + 1 s after it started.
Expected<CommandResult> run_command(const CommandSpec& spec);

// run_command for a caller that cannot use a command that overran its
// time: that is an error naming the program and the limit, with
// `limit_source` (where the limit is set, e.g. "plugstack.conf
// slurm_command_timeout"; "" for none) and its last line of output.
Expected<CommandResult> run_command_within(const CommandSpec& spec, const std::string& limit_source);

// The first executable `name` in the colon-separated `path`; `name` itself
// when it holds a '/'. An error names `name` and the directories searched.
Expected<std::string> find_executable(const std::string& name, const std::string& path);

// fork() for a child that only makes async-signal-safe system calls and
// then execs or _exits (no malloc, no set*id): without `credentials` it
// runs none of the process's pthread_atfork handlers (a bare clone), since
// a library's prepare handler breaks whatever another thread is doing in
// that library: OpenBLAS's (Debian 12) shuts its thread pool down, and a
// DDP rank's matrix product running meanwhile then spins forever in
// exec_blas_async (seen when its session started a worker). With
// `credentials` (the child changes its ids, which glibc does for every
// thread it believes the process has) and under a sanitizer (which must
// see the fork), plain fork().
pid_t fork_for_exec(bool credentials = false);

// argv/envp for execve: pointers into `v` (which must outlive them), then
// a null one. Made before the fork, as the child may not allocate.
std::vector<char*> c_strings(const std::vector<std::string>& v);

// Starts the command and does not wait for it: it runs in a session of
// its own, as a grandchild that init adopts, with stdin from /dev/null and
// stdout and stderr appended to `output_path` (absolute; created 0644 as
// the user the command runs as). Returns once the command has been
// exec'd, with a pidfd that holds it (close it, or give it to
// stop_detached); an error says which step failed before that.
// spec.timeout_s is not used. How the SPANK plugin starts a step that
// outlives user_init.
Expected<int> spawn_detached(const CommandSpec& spec, const std::string& output_path);

// Ends the process behind `pidfd` (spawn_detached's): up to `self_end_s`
// seconds to end by itself, then SIGTERM and up to `grace_s` more, then
// SIGKILL; closes the pidfd. True when it ended before SIGKILL. -1:
// nothing to do.
bool stop_detached(int pidfd, double self_end_s, double grace_s);

// A spec that runs `bindir`/`name` with `args` and exactly `env`: how the
// SPANK plugin runs Slurm's commands, from the directory the site
// configured (plugstack.conf slurm_bindir), never looked up on a PATH (the
// job's PATH is its user's to choose). An error names the path when it is
// not an executable file, and `bindir_source` (where bindir is set).
// The caller sets cwd, credentials and the timeout.
Expected<CommandSpec> command_in(const std::string& bindir, const std::string& bindir_source, const std::string& name,
                                 const std::vector<std::string>& args, std::vector<std::string> env);

// A spec that runs `name`, found on the PATH in `env`, with `args` and
// exactly `env`: how a job's own processes (a session, goldminer-dw) run
// Slurm's commands as their user, where the PATH is that user's. Never
// from a daemon (command_in). The caller sets cwd, credentials and the
// timeout.
Expected<CommandSpec> command_on_path(const std::string& name, const std::vector<std::string>& args,
                                      std::vector<std::string> env);

// This process's environment as "NAME=value" strings.
std::vector<std::string> process_environment();

// "exit 1: <last line of output>" style summary for error messages;
// "timed out after 10 s: <last line>" for one that overran.
std::string describe(const CommandResult& r);

// How a child closes its inherited descriptors above 2: close_range(2)
// where the kernel has it (5.9), else each entry of /proc/self/fd, else
// every number up to RLIMIT_NOFILE's soft limit. kAuto takes the first
// that works; tests force the others, which a recent kernel never reaches.
enum class FdClosing { kAuto, kProcSelfFd, kEveryNumber };
void set_fd_closing_for_testing(FdClosing how);

}  // namespace goldminer

#endif  // GOLDMINER_LAUNCH_SUBPROCESS_H_
