#include "launch/subprocess.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iterator>

#ifndef SYS_close_range
#define SYS_close_range 436  // the same number on every Linux architecture
#endif

namespace goldminer {
namespace {

constexpr size_t kMaxOutput = 64 * 1024;
// RLIMIT_NOFILE's soft limit in a child at most: Linux's own default.
constexpr rlim_t kChildNofile = 1024;

FdClosing fd_closing = FdClosing::kAuto;  // set by tests only, read by children

// What the child reports on its status pipe when it cannot exec.
struct ChildFailure {
  int step;  // index into kSteps
  int error;
};
const char* const kSteps[] = {"cannot open /dev/null",
                              "cannot redirect its output",
                              "cannot regain root to set its ids",
                              "cannot set its groups",
                              "cannot set its group id",
                              "cannot set its user id",
                              "it could become root again after dropping its ids",
                              "cannot execute it",
                              "cannot open its output file",
                              "cannot start a session",
                              "cannot fork",
                              "cannot close its inherited descriptors",
                              "cannot move a descriptor above 2"};

[[noreturn]] void child_fail(int status_fd, int step) {
  ChildFailure f{step, errno};
  ssize_t ignored = write(status_fd, &f, sizeof f);
  (void)ignored;
  _exit(127);
}

// getdents64's record; glibc declares none.
struct LinuxDirent64 {
  uint64_t d_ino;
  int64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[1];
};

// Closes every descriptor above 2 but `keep`: async-signal-safe (no
// opendir, which allocates). False when none of the ways worked.
bool close_inherited_fds(int keep) {
  const unsigned lo = 3, hi = ~0U;
  if (fd_closing == FdClosing::kAuto) {
    bool ok = keep < 3 ? syscall(SYS_close_range, lo, hi, 0) == 0
                       : (keep == 3 || syscall(SYS_close_range, lo, static_cast<unsigned>(keep - 1), 0) == 0) &&
                             syscall(SYS_close_range, static_cast<unsigned>(keep + 1), hi, 0) == 0;
    if (ok) return true;  // else ENOSYS (before Linux 5.9): the ways below
  }
  if (fd_closing != FdClosing::kEveryNumber) {
    int dir = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir >= 0) {
      alignas(8) char buf[4096];
      long n;
      // Closing entries meanwhile is safe: this directory's offset is the
      // descriptor number.
      while ((n = syscall(SYS_getdents64, dir, buf, sizeof buf)) > 0) {
        for (long off = 0; off < n;) {
          const auto* d = reinterpret_cast<const LinuxDirent64*>(buf + off);
          off += d->d_reclen;
          int fd = 0;
          const char* c = d->d_name;
          if (*c < '0' || *c > '9') continue;  // "." and ".."
          for (; *c >= '0' && *c <= '9'; ++c) fd = fd * 10 + (*c - '0');
          if (fd > 2 && fd != keep && fd != dir) close(fd);
        }
      }
      close(dir);
      if (n == 0) return true;
    }
  }
  // No /proc: every number up to the soft limit (descriptors above it
  // cannot be opened now, but could have been before it was lowered).
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0) return false;
  const rlim_t top = r.rlim_cur == RLIM_INFINITY || r.rlim_cur > (1u << 30) ? (1u << 30) : r.rlim_cur;
  for (rlim_t fd = 3; fd < top; ++fd)
    if (static_cast<int>(fd) != keep) close(static_cast<int>(fd));
  return true;
}

// Every signal's disposition back to SIG_DFL, then an empty mask. The
// parent blocked every signal around the fork (block_all_signals), so no
// handler of the parent's runs in the child before this. By the system
// call: glibc's sigaction() refuses its own signals (32 and 33), and an
// ignored one stays ignored across exec (slurmstepd's, or make's, were
// seen so). The kernel's struct sigaction all zero is SIG_DFL, no flags
// and an empty mask, whatever the architecture's field order.
void reset_signals() {
  const unsigned long dfl[4] = {0, 0, 0, 0};
  for (int sig = 1; sig <= 64; ++sig)
    if (sig != SIGKILL && sig != SIGSTOP) syscall(SYS_rt_sigaction, sig, dfl, nullptr, sizeof(unsigned long));
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
}

// `fd` moved above 2 when it is 0, 1 or 2 (a daemon that started with one
// of them closed), so that setting up stdin/stdout/stderr cannot clobber it.
int above_stdio(int fd, int status_fd) {
  if (fd < 0 || fd > 2) return fd;
  int moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  if (moved < 0) child_fail(status_fd, 12);
  return moved;
}

// Between fork and exec: async-signal-safe calls only. Output goes to
// `out_fd`, or when that is -1 to `output_path`, opened for appending once
// the ids are the user's (so the user's permissions decide). With
// `own_group`, the child leads a process group of its own.
// With `daemon`, RLIMIT_NOFILE's soft limit down to kChildNofile; then
// `limits`, each capped at its hard limit. Lowering a soft limit cannot
// fail; a resource the kernel does not know is skipped.
void set_soft_limits(bool daemon, const std::vector<SoftLimit>& limits) {
  rlimit r{};
  if (daemon && getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur > kChildNofile) {
    r.rlim_cur = std::min(kChildNofile, r.rlim_max);
    setrlimit(RLIMIT_NOFILE, &r);
  }
  for (const SoftLimit& l : limits) {
    const auto resource = static_cast<__rlimit_resource_t>(l.resource);
    if (getrlimit(resource, &r) != 0) continue;
    r.rlim_cur = std::min(l.value, r.rlim_max);  // RLIM_INFINITY is the largest value
    setrlimit(resource, &r);
  }
}

[[noreturn]] void child(const CommandSpec& spec, char* const* argv, char* const* envp, int out_fd,
                        const char* output_path, int status_fd, bool own_group) {
  reset_signals();
  if (own_group) setpgid(0, 0);  // the parent does it too; whichever comes first
  status_fd = above_stdio(status_fd, status_fd);
  out_fd = above_stdio(out_fd, status_fd);
  int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd < 0) child_fail(status_fd, 0);
  if (dup2(null_fd, 0) < 0) child_fail(status_fd, 1);
  if (out_fd >= 0 && (dup2(out_fd, 1) < 0 || dup2(out_fd, 2) < 0)) child_fail(status_fd, 1);
  if (spec.as) {
    const Credentials& c = *spec.as;
    uid_t r = 0, e = 0, s = 0;
    getresuid(&r, &e, &s);
    // slurmstepd's user_init runs with its effective ids dropped to the
    // user's and root kept as the saved id: take root back to drop for good.
    if (e != 0 && (r == 0 || s == 0) && seteuid(0) != 0) child_fail(status_fd, 2);
    if (geteuid() == 0 && setgroups(c.groups.size(), c.groups.data()) != 0) child_fail(status_fd, 3);
    if (setresgid(c.gid, c.gid, c.gid) != 0) child_fail(status_fd, 4);
    if (setresuid(c.uid, c.uid, c.uid) != 0) child_fail(status_fd, 5);
    if (c.uid != 0 && (setuid(0) == 0 || seteuid(0) == 0)) {
      errno = EPERM;
      child_fail(status_fd, 6);
    }
  }
  if (chdir(spec.cwd.c_str()) != 0 && chdir("/") != 0) {
    // Nowhere to stand is no reason not to run: the command may not care.
  }
  if (out_fd < 0) {
    int fd = open(output_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) child_fail(status_fd, 8);
    if (dup2(fd, 1) < 0 || dup2(fd, 2) < 0) child_fail(status_fd, 1);
  }
  // The status pipe (close-on-exec) stays: it reports a failure up to exec.
  if (!close_inherited_fds(status_fd)) child_fail(status_fd, 11);
  // After the closing, which may walk every number below the old limit.
  set_soft_limits(spec.daemon_limits, spec.soft_limits);
  execve(argv[0], argv, envp);
  child_fail(status_fd, 7);
}

// Blocks every signal in the calling thread until destroyed: around a
// fork, so that the child runs none of the parent's handlers before it
// has reset them (reset_signals).
class AllSignalsBlocked {
 public:
  AllSignalsBlocked() {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old_);
  }
  ~AllSignalsBlocked() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  AllSignalsBlocked(const AllSignalsBlocked&) = delete;
  AllSignalsBlocked& operator=(const AllSignalsBlocked&) = delete;

 private:
  sigset_t old_;
};

// `sig` to the process group `pid` leads, else (not yet its own group) to it.
void signal_group(pid_t pid, int sig) {
  if (kill(-pid, sig) != 0) kill(pid, sig);
}

std::string program_name(const std::string& path) { return path.substr(path.rfind('/') + 1); }

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

void close_fd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

// Two close-on-exec pipes, or neither: where the second cannot be made, the
// first is closed. `what` begins the error ("cannot run PROGRAM").
Status make_pipes(int first[2], int second[2], const std::string& what) {
  if (pipe2(first, O_CLOEXEC) == 0 && pipe2(second, O_CLOEXEC) == 0) return Status();
  int err = errno;
  close_fd(first[0]);
  close_fd(first[1]);
  return Status::error(what + ": pipe: " + std::strerror(err));
}

// `caller`'s refusal of a spec whose program is not an absolute path.
Status check_program(const CommandSpec& spec, const char* caller) {
  if (spec.argv.empty() || spec.argv[0].empty() || spec.argv[0][0] != '/')
    return Status::error(std::string(caller) + ": the program must be an absolute path");
  return Status();
}

// What a child reported on its status pipe: OK when it reached exec (the
// pipe closed with nothing written).
Status child_status(int status_fd, const std::string& what) {
  ChildFailure failure{};
  ssize_t got;
  do {
    got = read(status_fd, &failure, sizeof failure);
  } while (got < 0 && errno == EINTR);
  if (got != static_cast<ssize_t>(sizeof failure)) return Status();
  int step = failure.step >= 0 && failure.step < static_cast<int>(std::size(kSteps)) ? failure.step : 7;
  return Status::error("cannot " + what + ": " + kSteps[step] + ": " + std::strerror(failure.error));
}

}  // namespace

std::vector<char*> c_strings(const std::vector<std::string>& v) {
  std::vector<char*> out;
  out.reserve(v.size() + 1);
  for (const std::string& s : v) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

pid_t fork_for_exec(bool credentials) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  (void)credentials;
  return fork();
#else
  if (credentials) return fork();
  return static_cast<pid_t>(syscall(SYS_clone, SIGCHLD, nullptr, nullptr, nullptr, nullptr));
#endif
}

void set_fd_closing_for_testing(FdClosing how) { fd_closing = how; }

Expected<CommandResult> run_command(const CommandSpec& spec) {
  if (Status st = check_program(spec, "run_command"); !st.ok()) return st;
  const std::string& program = spec.argv[0];
  std::vector<char*> argv = c_strings(spec.argv);
  std::vector<char*> envp = c_strings(spec.env);

  int out[2] = {-1, -1}, status[2] = {-1, -1};
  if (Status st = make_pipes(out, status, "cannot run " + program); !st.ok()) return st;
  pid_t pid;
  {
    AllSignalsBlocked blocked;
    pid = fork_for_exec(spec.as.has_value());
    if (pid == 0) child(spec, argv.data(), envp.data(), out[1], nullptr, status[1], /*own_group=*/true);
  }
  if (pid < 0) {
    int err = errno;
    for (int* fd : {&out[0], &out[1], &status[0], &status[1]}) close_fd(*fd);
    return Status::error("cannot run " + program + ": fork: " + std::strerror(err));
  }
  setpgid(pid, pid);  // also in the child: the group exists before either signals it
  close_fd(out[1]);
  close_fd(status[1]);
  // Readable once the child has ended (Linux 5.3); without it, a 20 ms tick.
  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));

  using Clock = std::chrono::steady_clock;
  CommandResult result;
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(spec.timeout_s));
  const auto grace = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(kKillGraceS));
  auto termed_at = Clock::time_point::max(), killed_at = Clock::time_point::max();
  // Ended: seen with WNOWAIT, so that it stays a zombie, and its pid and
  // process group id stay its own, until the group has been dealt with.
  bool ended = false, lost = false;
  char buf[4096];
  // Until it has ended and its output is closed; after SIGKILL, at most 1 s
  // more (a grandchild of another group may still hold the pipe, a child
  // in uninterruptible sleep may not end yet).
  while (!ended || out[0] >= 0) {
    if (!ended) {
      siginfo_t info{};
      if (waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0) {
        ended = info.si_pid == pid;
      } else if (errno == ECHILD) {
        ended = lost = true;  // another thread reaped it
      }
    }
    if (ended && out[0] < 0) break;
    auto now = Clock::now();
    if (!result.timed_out && now >= deadline) {
      result.timed_out = true;
      result.timeout_s = spec.timeout_s;
      if (!lost) signal_group(pid, SIGTERM);
      termed_at = now;
    }
    if (result.timed_out && killed_at == Clock::time_point::max() && now - termed_at >= grace) {
      if (!lost) signal_group(pid, SIGKILL);
      killed_at = now;
    }
    if (now - killed_at > std::chrono::seconds(1)) break;
    auto until = !result.timed_out ? deadline : killed_at == Clock::time_point::max() ? termed_at + grace
                                                                                      : killed_at + std::chrono::seconds(1);
    long wait_ms = std::chrono::duration_cast<std::chrono::milliseconds>(until - now).count();
    pollfd p[2];
    nfds_t n = 0;
    if (out[0] >= 0) p[n++] = {out[0], POLLIN, 0};
    if (!ended && pidfd >= 0) p[n++] = {pidfd, POLLIN, 0};
    if (!ended && pidfd < 0) wait_ms = std::min(wait_ms, 20L);
    int ready = poll(p, n, static_cast<int>(std::max(1L, std::min(wait_ms, 1000L))));
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0 || out[0] < 0 || (p[0].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
    ssize_t got = read(out[0], buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      close_fd(out[0]);
      continue;
    }
    size_t room = kMaxOutput - std::min(kMaxOutput, result.output.size());
    result.output.append(buf, std::min(room, static_cast<size_t>(got)));
  }
  close_fd(out[0]);
  if (pidfd >= 0) close(pidfd);
  // What is left of its group after a timeout (a grandchild that ignored
  // SIGTERM and let go of the pipe) goes too; its leader is not reaped
  // yet, so the group's id is still its own.
  if (result.timed_out && !lost) signal_group(pid, SIGKILL);
  if (!ended) {
    close_fd(status[0]);
    return Status::error("cannot end " + program + ": it did not exit within 1 s of SIGKILL (process " +
                         std::to_string(pid) + ", left unreaped)");
  }
  Status failed = child_status(status[0], "run " + program);
  close_fd(status[0]);
  int wstatus = 0;
  if (!lost) {
    while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
    }
  }
  if (!failed.ok()) return failed;
  if (!lost && WIFEXITED(wstatus)) result.exit_code = WEXITSTATUS(wstatus);
  return result;
}

Expected<CommandResult> run_command_within(const CommandSpec& spec, const std::string& limit_source) {
  auto r = run_command(spec);
  if (!r.ok() || !r->timed_out) return r;
  std::string text = r->output;
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  text = text.substr(text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1);
  return Status::error(program_name(spec.argv[0]) + " (" + spec.argv[0] + ") did not end within " +
                       seconds_text(spec.timeout_s) + " s" + (limit_source.empty() ? "" : " (" + limit_source + ")") +
                       ": killed (SIGTERM to its process group, SIGKILL " + seconds_text(kKillGraceS) + " s later)" +
                       (text.empty() ? "" : "; its last output: " + text));
}

Expected<int> spawn_detached(const CommandSpec& spec, const std::string& output_path) {
  if (Status st = check_program(spec, "spawn_detached"); !st.ok()) return st;
  if (output_path.empty() || output_path[0] != '/')
    return Status::error("spawn_detached: the output file must be an absolute path");
  const std::string& program = spec.argv[0];
  std::vector<char*> argv = c_strings(spec.argv);
  std::vector<char*> envp = c_strings(spec.env);
  int status[2] = {-1, -1}, pid_pipe[2] = {-1, -1};
  if (Status st = make_pipes(status, pid_pipe, "cannot start " + program); !st.ok()) return st;
  pid_t pid;
  {
    AllSignalsBlocked blocked;  // in the middle process too, until the grandchild resets them
    pid = fork_for_exec(spec.as.has_value());
    if (pid == 0) {
      // The middle process: a new session, then the command in a grandchild
      // that init adopts, so the caller never has to reap it.
      if (setsid() < 0) child_fail(status[1], 9);
      pid_t grandchild = fork_for_exec(spec.as.has_value());
      if (grandchild < 0) child_fail(status[1], 10);
      if (grandchild == 0)
        child(spec, argv.data(), envp.data(), -1, output_path.c_str(), status[1], /*own_group=*/false);
      ssize_t ignored = write(pid_pipe[1], &grandchild, sizeof grandchild);
      (void)ignored;
      _exit(0);
    }
  }
  if (pid < 0) {
    int err = errno;
    for (int* fd : {&status[0], &status[1], &pid_pipe[0], &pid_pipe[1]}) close_fd(*fd);
    return Status::error("cannot start " + program + ": fork: " + std::strerror(err));
  }
  close_fd(status[1]);
  close_fd(pid_pipe[1]);
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  pid_t grandchild = -1;
  ssize_t got;
  do {
    got = read(pid_pipe[0], &grandchild, sizeof grandchild);
  } while (got < 0 && errno == EINTR);
  close_fd(pid_pipe[0]);
  // Blocks until the grandchild has exec'd (the pipe closes) or failed.
  Status failed = child_status(status[0], "start " + program);
  close_fd(status[0]);
  if (!failed.ok()) return failed;
  if (got != static_cast<ssize_t>(sizeof grandchild) || grandchild <= 0)
    return Status::error("cannot start " + program + ": its process id did not come back");
  // Held by a pidfd from here on, so that a reused pid is never signalled.
  // It exec'd an instant ago: it cannot have been reaped and its pid reused.
  int fd = static_cast<int>(syscall(SYS_pidfd_open, grandchild, 0));
  if (fd < 0) return Status::error("started " + program + " but cannot hold it: pidfd_open: " + std::strerror(errno));
  return fd;
}

bool stop_detached(int pidfd, double self_end_s, double grace_s) {
  if (pidfd < 0) return true;
  // A pidfd polls readable once its process has ended.
  auto ends_within = [&](double s) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<long>(s * 1000));
    do {
      pollfd p{pidfd, POLLIN, 0};
      if (poll(&p, 1, 50) > 0) return true;
    } while (std::chrono::steady_clock::now() < deadline);
    return false;
  };
  bool ended = ends_within(self_end_s);
  if (!ended && syscall(SYS_pidfd_send_signal, pidfd, SIGTERM, nullptr, 0) == 0) ended = ends_within(grace_s);
  if (!ended) syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0);
  close(pidfd);
  return ended;
}

Expected<CommandSpec> command_on_path(const std::string& name, const std::vector<std::string>& args,
                                      std::vector<std::string> env) {
  std::string path;
  for (const std::string& e : env)
    if (e.rfind("PATH=", 0) == 0) path = e.substr(5);
  auto program = find_executable(name, path);
  if (!program.ok()) return program.status();
  CommandSpec spec;
  spec.argv = {*program};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.env = std::move(env);
  return spec;
}

Expected<CommandSpec> command_in(const std::string& bindir, const std::string& bindir_source, const std::string& name,
                                 const std::vector<std::string>& args, std::vector<std::string> env) {
  const std::string where = bindir_source.empty() ? "" : " (" + bindir_source + ")";
  if (bindir.empty() || bindir[0] != '/')
    return Status::error("Slurm's commands: '" + bindir + "' is not an absolute directory" + where);
  if (name.empty() || name.find('/') != std::string::npos)
    return Status::error("Slurm's commands: '" + name + "' is not a command name");
  const std::string program = (bindir.back() == '/' ? bindir : bindir + "/") + name;
  struct stat st {};
  if (stat(program.c_str(), &st) != 0)
    return Status::error("no " + name + " at " + program + where + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode) || (st.st_mode & 0111) == 0)
    return Status::error(program + where + " is not an executable file");
  CommandSpec spec;
  spec.argv = {program};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.env = std::move(env);
  return spec;
}

Expected<std::string> find_executable(const std::string& name, const std::string& path) {
  if (name.find('/') != std::string::npos) return name;
  std::string searched;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(start, end - start);
    start = end + 1;
    if (dir.empty() || dir[0] != '/') continue;  // relative entries mean nothing in a daemon
    std::string candidate = dir + "/" + name;
    struct stat st {};
    if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111) != 0)
      return candidate;
    searched += (searched.empty() ? "" : ":") + dir;
  }
  return Status::error("no executable " + name + " in PATH (" + (searched.empty() ? "empty" : searched) +
                       ")");
}

std::vector<std::string> process_environment() {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  return env;
}

std::string describe(const CommandResult& r) {
  std::string what = r.timed_out ? "timed out after " + seconds_text(r.timeout_s) + " s" : r.exit_code < 0 ? "killed" : "exit " + std::to_string(r.exit_code);
  std::string text = r.output;
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  size_t nl = text.rfind('\n');
  if (nl != std::string::npos) text = text.substr(nl + 1);
  return text.empty() ? what : what + ": " + text;
}

}  // namespace goldminer
