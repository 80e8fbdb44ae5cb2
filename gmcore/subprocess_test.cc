#include "gmcore/subprocess.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
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

TEST(SubprocessTest, KillsACommandThatOverrunsItsTime) {
  CommandSpec s = shell("echo started; exec sleep 30");
  s.timeout_s = 0.3;
  auto start = std::chrono::steady_clock::now();
  auto r = run_command(s);
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->timed_out);
  EXPECT_EQ(r->exit_code, -1);
  EXPECT_EQ(r->output, "started\n");
  EXPECT_LT(took, 10.0);
  EXPECT_EQ(describe(*r), "timed out: started");
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
