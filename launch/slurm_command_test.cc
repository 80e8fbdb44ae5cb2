#include "launch/slurm_command.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include "launch/admin_config.h"

namespace goldminer {
namespace {

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
