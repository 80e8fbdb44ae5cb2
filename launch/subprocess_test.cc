#include "launch/subprocess.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

namespace goldminer {
namespace {

CommandSpec shell(const std::string& script) {
  CommandSpec s;
  s.argv = {"/bin/sh", "-c", script};
  return s;
}

TEST(SubprocessTest, CapturesOutputAndExitWithExactlyTheGivenEnvironment) {
  setenv("GM_SUBPROCESS_TEST_PARENT", "inherited", 1);
  CommandSpec s = shell("echo out; echo err >&2; echo \"A=$A B=${GM_SUBPROCESS_TEST_PARENT-unset}\"; exit 3");
  s.env = {"A=1"};
  auto r = run_command(s);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_FALSE(r->timed_out);
  EXPECT_EQ(r->output, "out\nerr\nA=1 B=unset\n");
  EXPECT_EQ(describe(*r), "exit 3: A=1 B=unset");
}

int prepared = 0;  // pthread_atfork prepare handler calls

// Commands run without the process's pthread_atfork handlers (a library's,
// OpenBLAS's, would break the caller's other threads), except where the
// child changes its ids; under a sanitizer every fork runs them.
TEST(SubprocessTest, ChildrenThatOnlyExecRunNoAtforkHandlers) {
  static bool registered = pthread_atfork([] { ++prepared; }, nullptr, nullptr) == 0;
  ASSERT_TRUE(registered);
  prepared = 0;
  auto r = run_command(shell("echo ran"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->output, "ran\n");
  auto fd = spawn_detached(shell("exit 0"), "/dev/null");
  ASSERT_TRUE(fd.ok()) << fd.status().message();
  stop_detached(*fd, 5, 1);
  const pid_t child = fork_for_exec();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(7);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_EQ(WEXITSTATUS(status), 7);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  EXPECT_GT(prepared, 0) << "a sanitizer's build forks";
#else
  EXPECT_EQ(prepared, 0);
#endif
  const pid_t with_ids = fork_for_exec(/*credentials=*/true);
  ASSERT_GE(with_ids, 0);
  if (with_ids == 0) _exit(0);
  ASSERT_EQ(waitpid(with_ids, &status, 0), with_ids);
  EXPECT_GT(prepared, 0) << "a child that changes its ids is fork()ed";
}

TEST(SubprocessTest, RunsInTheGivenDirectoryElseTheRoot) {
  CommandSpec s;
  s.argv = {"/bin/pwd"};
  s.cwd = "/tmp";
  auto r = run_command(s);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->output, "/tmp\n");
  s.cwd = "/nonexistent/dir";
  r = run_command(s);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->output, "/\n");
}

std::string wait_for_file(const std::string& path, const std::string& last);

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST(SubprocessTest, KillsACommandThatOverrunsItsTime) {
  CommandSpec s = shell("echo started; exec sleep 30");
  s.timeout_s = 0.3;
  auto start = std::chrono::steady_clock::now();
  auto r = run_command(s);
  double took = seconds_since(start);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->timed_out);
  EXPECT_EQ(r->exit_code, -1);
  EXPECT_EQ(r->output, "started\n");
  EXPECT_LT(took, 0.3 + kKillGraceS) << "sleep ends on SIGTERM";
  EXPECT_EQ(describe(*r), "timed out after 0.3 s: started");
}

// What a Slurm command stuck on a slow slurmctld looks like: it ignores
// SIGTERM, its child holds the output pipe, and it never ends. Injected:
// a shell that traps TERM and a background sleep in its process group;
// checked: the caller has an error naming the program, the limit and
// where it is set within timeout + grace + 1 s, and nothing of the group
// is left.
TEST(SubprocessTest, ACommandThatNeverEndsIsKilledWithItsGroupAndTheCallerGetsAnErrorNamingIt) {
  char dir[] = "/tmp/gm-subprocess-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string pid_file = std::string(dir) + "/sleep.pid";
  CommandSpec s = shell("trap '' TERM; sleep 1000 & echo $! >" + pid_file + "; echo waiting for slurmctld; wait");
  s.env = {"PATH=/usr/bin:/bin"};
  s.timeout_s = 0.5;
  auto start = std::chrono::steady_clock::now();
  auto r = run_command_within(s, "plugstack.conf slurm_command_timeout");
  double took = seconds_since(start);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "sh (/bin/sh) did not end within 0.5 s (plugstack.conf slurm_command_timeout): killed (SIGTERM to its "
            "process group, SIGKILL 1 s later); its last output: waiting for slurmctld");
  EXPECT_GE(took, 0.5 + kKillGraceS - 0.1) << "SIGKILL only after the grace";
  EXPECT_LT(took, 0.5 + kKillGraceS + 1.5);
  std::ifstream in(pid_file);
  pid_t sleeper = 0;
  ASSERT_TRUE(in >> sleeper) << "the script wrote its child's pid";
  // Killed: gone, or a zombie until init reaps it.
  auto state = [](pid_t pid) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string text;
    std::getline(stat, text);
    size_t paren = text.rfind(')');
    return paren == std::string::npos || paren + 2 >= text.size() ? 'X' : text[paren + 2];
  };
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {
    char st = state(sleeper);
    gone = st == 'X' || st == 'Z';
    if (!gone) usleep(10 * 1000);
  }
  EXPECT_TRUE(gone) << "the background sleep " << sleeper << " of its process group was left running";
  std::remove(pid_file.c_str());
  rmdir(dir);
}

// A command that ends in time is a result as run_command's, whatever its exit.
TEST(SubprocessTest, RunCommandWithinPassesOnACommandThatEndsInTime) {
  CommandSpec s = shell("echo no; exit 4");
  s.timeout_s = 10;
  auto r = run_command_within(s, "x");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->exit_code, 4);
  EXPECT_EQ(describe(*r), "exit 4: no");
}

// What a child reports about itself, exec'd directly (a shell would
// change its own mask around its forks): its descriptors (ls's own
// directory is the lowest free one, 3 when nothing above 2 was
// inherited), and its blocked and ignored signals and descriptor limit.
CommandSpec list_own_fds() {
  CommandSpec s;
  s.argv = {"/bin/ls", "-1", "/proc/self/fd"};
  return s;
}
CommandSpec grep_own_signals_and_nofile(bool daemon_limits = true) {
  CommandSpec s;
  s.argv = {"/bin/grep", "-hE", "^(SigBlk|SigIgn):|^Max open files", "/proc/self/status", "/proc/self/limits"};
  s.daemon_limits = daemon_limits;
  return s;
}

// The soft descriptor limit in grep_own_signals_and_nofile's output.
std::string soft_nofile(const std::string& state) {
  const size_t at = state.find("Max open files");
  if (at == std::string::npos) return "(none)";
  std::istringstream limits(state.substr(at + std::strlen("Max open files")));
  std::string soft;
  limits >> soft;
  return soft;
}
const char kNoFds[] = "0\n1\n2\n3\n";

// Checks the child's state against what was injected: no descriptor above
// 2 (3 is ls's own), no signal blocked or ignored, a soft limit of 1024.
void expect_clean_state(const std::string& fds, const std::string& state) {
  EXPECT_EQ(fds, kNoFds);
  EXPECT_NE(state.find("SigBlk:\t0000000000000000\n"), std::string::npos) << state;
  EXPECT_NE(state.find("SigIgn:\t0000000000000000\n"), std::string::npos) << state;
  EXPECT_EQ(soft_nofile(state), "1024") << state;
}

void expect_clean_child(const std::string& how) {
  SCOPED_TRACE(how);
  auto fds = run_command(list_own_fds());
  ASSERT_TRUE(fds.ok()) << fds.status().message();
  auto state = run_command(grep_own_signals_and_nofile());
  ASSERT_TRUE(state.ok()) << state.status().message();
  expect_clean_state(fds->output, state->output);
}

// Injected: extra descriptors (one at 3, one high up, neither
// close-on-exec, as a daemon leaks them), SIGUSR1 blocked, SIGPIPE and
// SIGHUP ignored, a soft descriptor limit of 65536 (slurmd raises its own
// to the hard one). Checked from the child, for each way of closing and
// for a detached command (the SPANK plugin's srun); the descriptor limit
// is capped for a daemon's child only.
TEST(SubprocessTest, AChildInheritsNoDescriptorSignalStateOrHighFileLimit) {
  int low = open("/dev/null", O_RDONLY);  // no O_CLOEXEC: a daemon's leak
  ASSERT_GE(low, 3);
  rlimit nofile{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &nofile), 0);
  const rlimit saved = nofile;
  if (nofile.rlim_max > 4096) {
    nofile.rlim_cur = std::min<rlim_t>(nofile.rlim_max, 65536);  // as slurmd raises it
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &nofile), 0);
  }
  const int high_at = static_cast<int>(std::min<rlim_t>(nofile.rlim_cur - 1, 4000));
  int high = dup2(low, high_at);
  ASSERT_EQ(high, high_at);
  sigset_t usr1, old_mask;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &usr1, &old_mask), 0);
  struct sigaction ign {}, old_pipe {}, old_hup {};
  ign.sa_handler = SIG_IGN;
  ASSERT_EQ(sigaction(SIGPIPE, &ign, &old_pipe), 0);
  ASSERT_EQ(sigaction(SIGHUP, &ign, &old_hup), 0);

  expect_clean_child("close_range");
  set_fd_closing_for_testing(FdClosing::kProcSelfFd);
  expect_clean_child("/proc/self/fd");
  set_fd_closing_for_testing(FdClosing::kEveryNumber);
  expect_clean_child("every number below the limit");
  set_fd_closing_for_testing(FdClosing::kAuto);
  // Not a daemon's child (a job's own process): its own limit is passed on.
  auto own = run_command(grep_own_signals_and_nofile(/*daemon_limits=*/false));
  ASSERT_TRUE(own.ok()) << own.status().message();
  EXPECT_EQ(soft_nofile(own->output), std::to_string(nofile.rlim_cur)) << own->output;

  char dir[] = "/tmp/gm-subprocess-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string text[2];
  int i = 0;
  for (const CommandSpec& s : {list_own_fds(), grep_own_signals_and_nofile()}) {
    const std::string out = std::string(dir) + "/out" + std::to_string(i);
    auto pidfd = spawn_detached(s, out);
    ASSERT_TRUE(pidfd.ok()) << pidfd.status().message();
    EXPECT_TRUE(stop_detached(*pidfd, 5, 1));
    text[i++] = wait_for_file(out, "\n");
    std::remove(out.c_str());
  }
  rmdir(dir);
  {
    SCOPED_TRACE("detached");
    expect_clean_state(text[0], text[1]);
  }

  sigaction(SIGPIPE, &old_pipe, nullptr);
  sigaction(SIGHUP, &old_hup, nullptr);
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  close(high);
  close(low);
  setrlimit(RLIMIT_NOFILE, &saved);
}

// The job's own soft limits, given in the spec, are set after the
// descriptor cap (and may raise it again), each capped at its hard limit.
TEST(SubprocessTest, AChildTakesTheGivenSoftLimitsCappedAtTheHardOnes) {
  rlimit nofile{}, stack{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &nofile), 0);
  ASSERT_EQ(getrlimit(RLIMIT_STACK, &stack), 0);
  if (nofile.rlim_max < 2048) GTEST_SKIP() << "RLIMIT_NOFILE's hard limit is below 2048 here";
  CommandSpec s = grep_own_signals_and_nofile();
  s.argv = {"/bin/grep", "-E", "^Max (open files|core file size|stack size)", "/proc/self/limits"};
  s.soft_limits = {{RLIMIT_NOFILE, 2048}, {RLIMIT_CORE, 0}, {RLIMIT_STACK, RLIM_INFINITY}};
  auto r = run_command(s);
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto soft = [&](const std::string& name) {
    std::istringstream line(r->output.substr(std::min(r->output.size(), r->output.find(name) + name.size())));
    std::string v;
    line >> v;
    return v;
  };
  EXPECT_EQ(soft("Max open files"), "2048") << r->output;
  EXPECT_EQ(soft("Max core file size"), "0") << r->output;
  EXPECT_EQ(soft("Max stack size"),
            stack.rlim_max == RLIM_INFINITY ? "unlimited" : std::to_string(stack.rlim_max))
      << "capped at the hard limit: " << r->output;
}

// Slurm's commands come from the configured directory, never from the
// PATH the job chose. Injected: a PATH whose first directory holds a fake
// squeue; checked: the configured one runs, and a directory without the
// command is an error naming the path and the setting.
TEST(SubprocessTest, SlurmCommandsComeFromTheConfiguredDirectoryNotThePath) {
  char fake[] = "/tmp/gm-fake-bin-XXXXXX", real[] = "/tmp/gm-slurm-bin-XXXXXX";
  ASSERT_NE(mkdtemp(fake), nullptr);
  ASSERT_NE(mkdtemp(real), nullptr);
  auto write_script = [](const std::string& path, const std::string& text) {
    std::ofstream(path) << "#!/bin/sh\necho " << text << " \"$@\"\n";
    chmod(path.c_str(), 0755);
  };
  write_script(std::string(fake) + "/squeue", "fake squeue");
  write_script(std::string(real) + "/squeue", "configured squeue");
  std::vector<std::string> env = {"PATH=" + std::string(fake) + ":" + real + ":/usr/bin:/bin"};
  auto on_path = command_on_path("squeue", {"-h"}, env);
  ASSERT_TRUE(on_path.ok()) << on_path.status().message();
  EXPECT_EQ(on_path->argv[0], std::string(fake) + "/squeue") << "the PATH a job chose would win";

  auto spec = command_in(real, "plugstack.conf slurm_bindir", "squeue", {"-h"}, env);
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->argv[0], std::string(real) + "/squeue");
  spec->timeout_s = 10;
  auto r = run_command(*spec);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->output, "configured squeue -h\n");

  auto missing = command_in(fake, "plugstack.conf slurm_bindir", "scancel", {}, env);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), "no scancel at " + std::string(fake) +
                                            "/scancel (plugstack.conf slurm_bindir): No such file or directory");
  EXPECT_EQ(command_in("bin", "plugstack.conf slurm_bindir", "squeue", {}, env).status().message(),
            "Slurm's commands: 'bin' is not an absolute directory (plugstack.conf slurm_bindir)");
  EXPECT_FALSE(command_in(real, "", "../squeue", {}, env).ok());
  chmod((std::string(real) + "/squeue").c_str(), 0644);
  EXPECT_EQ(command_in(real, "", "squeue", {}, env).status().message(),
            std::string(real) + "/squeue is not an executable file");
  for (const char* d : {fake, real}) {
    std::remove((std::string(d) + "/squeue").c_str());
    rmdir(d);
  }
}

TEST(SubprocessTest, ErrorsNameTheProgramAndWhatFailed) {
  CommandSpec s;
  s.argv = {"sh"};
  auto r = run_command(s);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "run_command: the program must be an absolute path");
  s.argv = {"/nonexistent/sbatch"};
  r = run_command(s);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "cannot run /nonexistent/sbatch: cannot execute it: No such file or directory");
}

TEST(SubprocessTest, FindsExecutablesOnAPath) {
  auto sh = find_executable("sh", "relative:/nonexistent:/bin:/usr/bin");
  ASSERT_TRUE(sh.ok()) << sh.status().message();
  EXPECT_EQ(*sh, "/bin/sh");
  EXPECT_EQ(*find_executable("/x/y", ""), "/x/y");
  auto missing = find_executable("no-such-goldminer-tool", "/nonexistent:/bin");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), "no executable no-such-goldminer-tool in PATH (/nonexistent:/bin)");
  EXPECT_EQ(find_executable("sh", "").status().message(), "no executable sh in PATH (empty)");
}

constexpr uid_t kNobody = 65534;
constexpr gid_t kNogroup = 65534;

CommandSpec id_as_nobody() {
  CommandSpec s;
  s.argv = {"/usr/bin/id"};
  s.as = Credentials{kNobody, kNogroup, {kNogroup}};
  return s;
}

TEST(SubprocessTest, RootRunsTheCommandAsTheJobsUser) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (the tests CI runs are root)";
  auto r = run_command(id_as_nobody());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->exit_code, 0) << r->output;
  EXPECT_EQ(r->output.rfind("uid=65534(nobody) gid=65534(nogroup) groups=65534(nogroup)", 0), 0u) << r->output;
}

// slurmstepd calls SPANK user_init with its effective ids dropped to the
// user's and root as its saved id: the command must still run as the user
// for good, with no way back to root.
TEST(SubprocessTest, AProcessWithRootOnlySavedDropsForGood) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (the tests CI runs are root)";
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (setegid(kNogroup) != 0 || seteuid(kNobody) != 0) _exit(10);
    CommandSpec s = shell("id -u; id -ru");
    s.as = Credentials{kNobody, kNogroup, {}};
    auto r = run_command(s);
    if (!r.ok()) _exit(11);
    if (r->exit_code != 0) _exit(12);
    if (r->output != "65534\n65534\n") _exit(13);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10: could not drop; 11: run_command failed; 12: id failed; 13: wrong ids";
}

// The text of `path` once it ends with `last`, or after 10 s.
std::string wait_for_file(const std::string& path, const std::string& last) {
  std::string text;
  for (int i = 0; i < 200; ++i) {
    if (FILE* f = std::fopen(path.c_str(), "r")) {
      char buf[256];
      text.assign(buf, std::fread(buf, 1, sizeof buf, f));
      std::fclose(f);
      if (text.size() >= last.size() && text.compare(text.size() - last.size(), last.size(), last) == 0) break;
    }
    usleep(50 * 1000);
  }
  return text;
}

TEST(SubprocessTest, ADetachedCommandRunsOnInASessionOfItsOwn) {
  char dir[] = "/tmp/gm-spawn-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string out = std::string(dir) + "/out";
  // It still runs after spawn_detached returned, in its own directory,
  // environment and session, appending to the file.
  CommandSpec s = shell("sleep 0.2; pwd; echo \"A=$A\"; ps -o sid= -p $$ | tr -d ' '; echo err >&2");
  s.env = {"A=2", "PATH=/usr/bin:/bin"};
  s.cwd = dir;
  auto pidfd = spawn_detached(s, out);
  ASSERT_TRUE(pidfd.ok()) << pidfd.status().message();
  std::string text = wait_for_file(out, "err\n");
  EXPECT_TRUE(stop_detached(*pidfd, 5, 5)) << "it ends by itself";
  EXPECT_EQ(text.rfind(std::string(dir) + "\nA=2\n", 0), 0u) << text;
  EXPECT_EQ(text.find("\n" + std::to_string(getsid(0)) + "\n"), std::string::npos) << "ran in our session: " << text;
  std::remove(out.c_str());
  rmdir(dir);
}

TEST(SubprocessTest, ADetachedCommandThatCannotStartSaysWhy) {
  CommandSpec s;
  s.argv = {"/nonexistent/srun"};
  auto r = spawn_detached(s, "/tmp/gm-spawn-never.out");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "cannot start /nonexistent/srun: cannot execute it: No such file or directory");
  std::remove("/tmp/gm-spawn-never.out");
  s.argv = {"/bin/true"};
  r = spawn_detached(s, "/nonexistent/dir/out");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "cannot start /bin/true: cannot open its output file: No such file or directory");
  EXPECT_EQ(spawn_detached(s, "relative.out").status().message(),
            "spawn_detached: the output file must be an absolute path");
}

TEST(SubprocessTest, StoppingADetachedCommandTermsItThenKillsIt) {
  // One that drains on SIGTERM ends within the grace time.
  CommandSpec s = shell("trap 'echo drained; exit 0' TERM; echo up; while :; do sleep 0.05; done");
  s.env = {"PATH=/usr/bin:/bin"};
  char dir[] = "/tmp/gm-spawn-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string out = std::string(dir) + "/out";
  auto pidfd = spawn_detached(s, out);
  ASSERT_TRUE(pidfd.ok()) << pidfd.status().message();
  ASSERT_EQ(wait_for_file(out, "up\n"), "up\n");
  EXPECT_TRUE(stop_detached(*pidfd, 0.1, 10));
  EXPECT_EQ(wait_for_file(out, "drained\n"), "up\ndrained\n");
  // One that ignores it is killed after the grace time.
  std::remove(out.c_str());
  s = shell("trap '' TERM; echo up; exec sleep 60");
  pidfd = spawn_detached(s, out);
  ASSERT_TRUE(pidfd.ok()) << pidfd.status().message();
  ASSERT_EQ(wait_for_file(out, "up\n"), "up\n");
  auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(stop_detached(*pidfd, 0.1, 0.3));
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 5.0);
  std::remove(out.c_str());
  rmdir(dir);
}

}  // namespace
}  // namespace goldminer
