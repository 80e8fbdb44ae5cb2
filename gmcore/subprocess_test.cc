#include "gmcore/subprocess.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>

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

}  // namespace
}  // namespace goldminer
