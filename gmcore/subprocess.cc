#include "gmcore/subprocess.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <iterator>

namespace goldminer {
namespace {

constexpr size_t kMaxOutput = 64 * 1024;

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
                              "cannot fork"};

[[noreturn]] void child_fail(int status_fd, int step) {
  ChildFailure f{step, errno};
  ssize_t ignored = write(status_fd, &f, sizeof f);
  (void)ignored;
  _exit(127);
}

// Between fork and exec: async-signal-safe calls only. Output goes to
// `out_fd`, or when that is -1 to `output_path`, opened for appending once
// the ids are the user's (so the user's permissions decide).
[[noreturn]] void child(const CommandSpec& spec, char* const* argv, char* const* envp, int out_fd,
                        const char* output_path, int status_fd) {
  int null_fd = open("/dev/null", O_RDONLY);
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
  execve(argv[0], argv, envp);
  child_fail(status_fd, 7);
}

void close_fd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
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

Expected<CommandResult> run_command(const CommandSpec& spec) {
  if (Status st = check_program(spec, "run_command"); !st.ok()) return st;
  const std::string& program = spec.argv[0];
  std::vector<char*> argv = c_strings(spec.argv);
  std::vector<char*> envp = c_strings(spec.env);

  int out[2] = {-1, -1}, status[2] = {-1, -1};
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(status, O_CLOEXEC) != 0) {
    int err = errno;
    close_fd(out[0]);
    close_fd(out[1]);
    return Status::error("cannot run " + program + ": pipe: " + std::strerror(err));
  }
  pid_t pid = fork_for_exec(spec.as.has_value());
  if (pid < 0) {
    int err = errno;
    for (int* fd : {&out[0], &out[1], &status[0], &status[1]}) close_fd(*fd);
    return Status::error("cannot run " + program + ": fork: " + std::strerror(err));
  }
  if (pid == 0) child(spec, argv.data(), envp.data(), out[1], nullptr, status[1]);
  close_fd(out[1]);
  close_fd(status[1]);

  CommandResult result;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<long>(spec.timeout_s * 1000));
  auto killed_at = std::chrono::steady_clock::time_point::max();
  char buf[4096];
  while (out[0] >= 0) {
    auto now = std::chrono::steady_clock::now();
    if (!result.timed_out && now >= deadline) {
      result.timed_out = true;
      kill(pid, SIGKILL);
      killed_at = now;
    }
    // After the kill, a grandchild may still hold the pipe: stop reading.
    if (now - killed_at > std::chrono::seconds(1)) break;
    auto wait = result.timed_out ? std::chrono::milliseconds(100)
                                 : std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
    pollfd p{out[0], POLLIN, 0};
    int n = poll(&p, 1, static_cast<int>(std::max<long>(1, std::min<long>(wait.count(), 1000))));
    if (n < 0 && errno != EINTR) break;
    if (n <= 0) continue;
    ssize_t got = read(out[0], buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    size_t room = kMaxOutput - std::min(kMaxOutput, result.output.size());
    result.output.append(buf, std::min(room, static_cast<size_t>(got)));
  }
  close_fd(out[0]);

  int wstatus = 0;
  pid_t waited;
  do {
    waited = waitpid(pid, &wstatus, 0);
  } while (waited < 0 && errno == EINTR);

  Status failed = child_status(status[0], "run " + program);
  close_fd(status[0]);
  if (!failed.ok()) return failed;
  if (waited == pid && WIFEXITED(wstatus)) result.exit_code = WEXITSTATUS(wstatus);
  return result;
}

Expected<int> spawn_detached(const CommandSpec& spec, const std::string& output_path) {
  if (Status st = check_program(spec, "spawn_detached"); !st.ok()) return st;
  if (output_path.empty() || output_path[0] != '/')
    return Status::error("spawn_detached: the output file must be an absolute path");
  const std::string& program = spec.argv[0];
  std::vector<char*> argv = c_strings(spec.argv);
  std::vector<char*> envp = c_strings(spec.env);
  int status[2] = {-1, -1}, pid_pipe[2] = {-1, -1};
  if (pipe2(status, O_CLOEXEC) != 0 || pipe2(pid_pipe, O_CLOEXEC) != 0) {
    int err = errno;
    close_fd(status[0]);
    close_fd(status[1]);
    return Status::error("cannot start " + program + ": pipe: " + std::strerror(err));
  }
  pid_t pid = fork_for_exec(spec.as.has_value());
  if (pid < 0) {
    int err = errno;
    for (int* fd : {&status[0], &status[1], &pid_pipe[0], &pid_pipe[1]}) close_fd(*fd);
    return Status::error("cannot start " + program + ": fork: " + std::strerror(err));
  }
  if (pid == 0) {
    // The middle process: a new session, then the command in a grandchild
    // that init adopts, so the caller never has to reap it.
    if (setsid() < 0) child_fail(status[1], 9);
    pid_t grandchild = fork_for_exec(spec.as.has_value());
    if (grandchild < 0) child_fail(status[1], 10);
    if (grandchild == 0) child(spec, argv.data(), envp.data(), -1, output_path.c_str(), status[1]);
    ssize_t ignored = write(pid_pipe[1], &grandchild, sizeof grandchild);
    (void)ignored;
    _exit(0);
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
  std::string what = r.timed_out ? "timed out" : r.exit_code < 0 ? "killed" : "exit " + std::to_string(r.exit_code);
  std::string text = r.output;
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  size_t nl = text.rfind('\n');
  if (nl != std::string::npos) text = text.substr(nl + 1);
  return text.empty() ? what : what + ": " + text;
}

}  // namespace goldminer
