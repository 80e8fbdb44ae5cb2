#include "launch/slurm_command.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include "launch/admin_config.h"

namespace goldminer {
namespace {

// What goldminer-dw --trainer-job makes of squeue's answers.
TEST(SlurmCommandTest, TellsATrainerJobThatEndedFromOneThatMayStillRun) {
  EXPECT_EQ(trainer_job_ended(12, 0, "RUNNING\n"), "");
  EXPECT_EQ(trainer_job_ended(12, 0, "PENDING\n"), "") << "requeued: it comes back";
  EXPECT_EQ(trainer_job_ended(12, 0, "SUSPENDED\n"), "");
  EXPECT_EQ(trainer_job_ended(12, 0, "NODE_FAIL\n"), "job 12 is NODE_FAIL");
  EXPECT_EQ(trainer_job_ended(12, 0, "CANCELLED\n"), "job 12 is CANCELLED");
  EXPECT_EQ(trainer_job_ended(12, 0, "COMPLETING\n"), "job 12 is COMPLETING");
  EXPECT_EQ(trainer_job_ended(12, 0, ""), "job 12 is no longer listed by squeue");
  EXPECT_EQ(trainer_job_ended(12, 1, "slurm_load_jobs error: Invalid job id specified\n"),
            "job 12 is no longer known to Slurm");
  EXPECT_EQ(trainer_job_ended(12, 1, "slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n"),
            "")
      << "a controller restarting ends no worker";
}

// The one reading of squeue's "none of those jobs" failure, which every
// caller (a session's launcher, goldminer-ctld, goldminer-dw) tells from
// squeue failing for other reasons.
TEST(SlurmCommandTest, TellsSqueueKnowingNoneOfTheJobsFromItFailing) {
  EXPECT_TRUE(squeue_knows_none("slurm_load_jobs error: Invalid job id specified\n"));
  EXPECT_FALSE(squeue_knows_none("slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n"));
  EXPECT_FALSE(squeue_knows_none(""));
}

TEST(SlurmCommandTest, ReadsTheJobIdSbatchPrinted) {
  EXPECT_EQ(*parse_submitted_job_id("123\n"), 123u);
  EXPECT_EQ(*parse_submitted_job_id("123;cluster\n"), 123u);
  EXPECT_EQ(*parse_submitted_job_id("sbatch: warning: something\n456\n"), 456u);
  for (const char* bad : {"", "\n", "sbatch: error: Invalid partition name specified", "0\n",
                          "99999999999\n", "12a\n"}) {
    auto r = parse_submitted_job_id(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().message().rfind("sbatch printed no job id: '", 0), 0u) << r.status().message();
  }
}

TEST(SlurmCommandTest, TellsRunningWaitingAndGoneJobsApart) {
  EXPECT_EQ(parse_job_state(0, "RUNNING\n"), JobState::kRunning);
  EXPECT_EQ(parse_job_state(0, "CONFIGURING\n"), JobState::kRunning);
  EXPECT_EQ(parse_job_state(0, "PENDING\n"), JobState::kWaiting);
  EXPECT_EQ(parse_job_state(0, "SUSPENDED\n"), JobState::kWaiting);
  EXPECT_EQ(parse_job_state(0, "COMPLETING\n"), JobState::kGone);
  EXPECT_EQ(parse_job_state(0, "CANCELLED\n"), JobState::kGone);
  EXPECT_EQ(parse_job_state(0, ""), JobState::kGone);
  EXPECT_EQ(parse_job_state(1, "slurm_load_jobs error: Invalid job id specified\n"), JobState::kGone);
}

// plugstack.conf's slurm_bindir and slurm_command_timeout: defaults, values
// and refusals.
TEST(SlurmCommandTest, TheSiteSetsWhereSlurmCommandsComeFromAndTheirTimeLimit) {
  auto defaults = parse_admin_config({});
  ASSERT_TRUE(defaults.ok()) << defaults.status().message();
  EXPECT_EQ(defaults->slurm_command_timeout_s, 10);
  EXPECT_EQ(defaults->slurm_bindir.rfind('/', 0), 0u) << "configure's Slurm prefix: " << defaults->slurm_bindir;
  auto set = parse_admin_config({"slurm_bindir=/opt/slurm/bin", "slurm_command_timeout=30"});
  ASSERT_TRUE(set.ok()) << set.status().message();
  EXPECT_EQ(set->slurm_bindir, "/opt/slurm/bin");
  EXPECT_EQ(set->slurm_command_timeout_s, 30);
  EXPECT_FALSE(parse_admin_config({"slurm_bindir=bin"}).ok());
  EXPECT_FALSE(parse_admin_config({"slurm_command_timeout=0"}).ok());
  EXPECT_FALSE(parse_admin_config({"slurm_command_timeout=301"}).ok());
}

// The job's propagated limits, as sbatch writes them (a "U" when the user
// asked with --propagate; RLIM_INFINITY as its number); other variables
// and bad values ignored.
TEST(SlurmCommandTest, TheJobsSoftLimitsComeFromItsSlurmRlimitVariables) {
  const std::vector<SoftLimit> limits =
      job_soft_limits({"SLURM_RLIMIT_NOFILE=4096", "SLURM_RLIMIT_CORE=U0", "SLURM_RLIMIT_STACK=18446744073709551615",
                       "SLURM_RLIMIT_AS=12x", "SLURM_RLIMIT_FOO=1", "SLURM_RLIMIT_NPROC=", "PATH=/bin"});
  EXPECT_EQ(limits, (std::vector<SoftLimit>{{RLIMIT_STACK, RLIM_INFINITY}, {RLIMIT_CORE, 0}, {RLIMIT_NOFILE, 4096}}));
  EXPECT_TRUE(job_soft_limits({"SLURM_RLIMIT_NOFILE=99999999999999999999999"}).empty()) << "out of range";
}

TEST(SlurmCommandTest, SlurmCommandsGetOnlyPathAndConf) {
  EXPECT_EQ(slurm_command_env({"HOME=/h", "PATH=/usr/bin", "SLURM_JOB_ID=3", "SLURM_CONF=/etc/s.conf"}),
            (std::vector<std::string>{"PATH=/usr/bin", "SLURM_CONF=/etc/s.conf"}));
  EXPECT_EQ(slurm_command_env({"HOME=/h"}), std::vector<std::string>{});
}

TEST(SlurmCommandTest, EnvValue) {
  std::vector<std::string> env = {"A=1", "AB=2", "C="};
  EXPECT_EQ(env_value(env, "A"), "1");
  EXPECT_EQ(env_value(env, "AB"), "2");
  EXPECT_EQ(env_value(env, "C"), "");
  EXPECT_EQ(env_value(env, "D"), "");
}

}  // namespace
}  // namespace goldminer
