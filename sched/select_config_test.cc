#include "sched/select_config.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include <unistd.h>

namespace goldminer {
namespace {

// The file's text, and what it sets: defaults for keys it leaves out
// (plugstack.conf's for the data-worker limits); keys with spaces and
// comments around them.
struct ConfigCase {
  std::string text;
  double reserve;
  SelectConfig::Mode mode;
  bool inject_fault;
};
class SelectConfigTextTest : public ::testing::TestWithParam<ConfigCase> {};

TEST_P(SelectConfigTextTest, ReadsWhatTheFileSetsAndDefaultsTheRest) {
  const ConfigCase& c = GetParam();
  auto config = parse_select_config(c.text, "/etc/slurm/goldminer.conf");
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_DOUBLE_EQ(config->reserve_cpus_per_gpu, c.reserve);
  EXPECT_EQ(config->mode, c.mode);
  EXPECT_EQ(config->inject_fault, c.inject_fault);
  EXPECT_EQ(config->max_dw_per_job, 64);
  EXPECT_EQ(config->max_cpus_per_dw, 16);
}

INSTANTIATE_TEST_SUITE_P(
    SelectConfigTest, SelectConfigTextTest,
    ::testing::Values(ConfigCase{"# nothing set\n\n", 1.0, SelectConfig::Mode::kEnforce, false},
                      ConfigCase{" reserve_cpus_per_gpu = 2.5  # per GPU\nmode=observe\ninject_fault=decision\n",
                                 2.5, SelectConfig::Mode::kObserve, true}));

// The site's data-worker limits: plugstack.conf's rows, same checks.
TEST(SelectConfigTest, SiteDataWorkerLimits) {
  auto c = parse_select_config("max_dw_per_job=4\nmax_cpus_per_dw=32\n", "g.conf");
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->max_dw_per_job, 4);
  EXPECT_EQ(c->max_cpus_per_dw, 32);
  auto zero = parse_select_config("max_dw_per_job=0\n", "g.conf");
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.status().message().rfind("g.conf:1: max_dw_per_job: invalid value '0': ", 0), 0u)
      << zero.status().message();
}


TEST(SelectConfigTest, ErrorsNameFileLineKeyAndReason) {
  auto bad_value = parse_select_config("mode=observe\nreserve_cpus_per_gpu=-1\n", "/e/goldminer.conf");
  ASSERT_FALSE(bad_value.ok());
  EXPECT_EQ(bad_value.status().message(),
            "/e/goldminer.conf:2: reserve_cpus_per_gpu: invalid value '-1': expected a number from 0 to 1024");
  auto unknown = parse_select_config("\nreserve=1\n", "g.conf");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().message().rfind("g.conf:2: reserve: unknown key (known: ", 0), 0u)
      << unknown.status().message();
  auto twice = parse_select_config("mode=observe\nmode=enforce\n", "g.conf");
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.status().message(), "g.conf:2: mode: given more than once (first on line 1)");
  auto no_eq = parse_select_config("mode observe\n", "g.conf");
  ASSERT_FALSE(no_eq.ok());
  EXPECT_EQ(no_eq.status().message(), "g.conf:1: 'mode observe': expected key=value");
  auto choice = parse_select_config("mode=strict\n", "g.conf");
  ASSERT_FALSE(choice.ok());
  EXPECT_NE(choice.status().message().find("g.conf:1: mode: invalid value 'strict'"), std::string::npos);
  for (const char* junk : {"reserve_cpus_per_gpu=1x", "reserve_cpus_per_gpu=", "reserve_cpus_per_gpu=nan"})
    EXPECT_FALSE(parse_select_config(junk, "g.conf").ok()) << junk;
}

TEST(SelectConfigTest, AbsentFileGivesDefaultsUnreadableFileIsAnError) {
  auto absent = load_select_config("/nonexistent-dir-goldminer/goldminer.conf");
  ASSERT_TRUE(absent.ok());
  EXPECT_DOUBLE_EQ(absent->reserve_cpus_per_gpu, 1.0);
  auto dir = load_select_config("/");
  EXPECT_FALSE(dir.ok());
  char path[] = "/tmp/goldminer-conf-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  std::string text = "reserve_cpus_per_gpu=0\n";
  ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
  auto loaded = load_select_config(path);
  std::remove(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_DOUBLE_EQ(loaded->reserve_cpus_per_gpu, 0.0);
}

TEST(SelectConfigTest, PathIsBesideSlurmConf) {
  EXPECT_EQ(select_config_path("/etc/slurm/slurm.conf"), "/etc/slurm/goldminer.conf");
  EXPECT_EQ(select_config_path("slurm.conf"), "goldminer.conf");
}

}  // namespace
}  // namespace goldminer
