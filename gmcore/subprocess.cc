#include "gmcore/subprocess.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
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
                              "cannot execute it"};

[[noreturn]] void child_fail(int status_fd, int step) {
  ChildFailure f{step, errno};
  ssize_t ignored = write(status_fd, &f, sizeof f);
  (void)ignored;
  _exit(127);
}

// Between fork and exec: async-signal-safe calls only.
[[noreturn]] void child(const CommandSpec& spec, char* const* argv, char* const* envp, int out_fd,
                        int status_fd) {
  int null_fd = open("/dev/null", O_RDONLY);
  if (null_fd < 0) child_fail(status_fd, 0);
  if (dup2(null_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(out_fd, 2) < 0) child_fail(status_fd, 1);
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
  execve(argv[0], argv, envp);
  child_fail(status_fd, 7);
}

std::vector<char*> c_strings(const std::vector<std::string>& v) {
  std::vector<char*> out;
  out.reserve(v.size() + 1);
  for (const std::string& s : v) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

void close_fd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

}  // namespace

Expected<CommandResult> run_command(const CommandSpec& spec) {
  if (spec.argv.empty() || spec.argv[0].empty() || spec.argv[0][0] != '/')
    return Status::error("run_command: the program must be an absolute path");
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
  pid_t pid = fork();
  if (pid < 0) {
    int err = errno;
    for (int* fd : {&out[0], &out[1], &status[0], &status[1]}) close_fd(*fd);
    return Status::error("cannot run " + program + ": fork: " + std::strerror(err));
  }
  if (pid == 0) child(spec, argv.data(), envp.data(), out[1], status[1]);
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

  ChildFailure failure{};
  ssize_t got = read(status[0], &failure, sizeof failure);
  close_fd(status[0]);
  if (got == static_cast<ssize_t>(sizeof failure)) {
    int step = failure.step >= 0 && failure.step < static_cast<int>(std::size(kSteps)) ? failure.step : 7;
    return Status::error("cannot run " + program + ": " + kSteps[step] + ": " +
                         std::strerror(failure.error));
  }
  if (waited == pid && WIFEXITED(wstatus)) result.exit_code = WEXITSTATUS(wstatus);
  return result;
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

std::string describe(const CommandResult& r) {
  std::string what = r.timed_out ? "timed out" : r.exit_code < 0 ? "killed" : "exit " + std::to_string(r.exit_code);
  std::string text = r.output;
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  size_t nl = text.rfind('\n');
  if (nl != std::string::npos) text = text.substr(nl + 1);
  return text.empty() ? what : what + ": " + text;
}

}  // namespace goldminer
