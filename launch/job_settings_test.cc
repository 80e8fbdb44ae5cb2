#include "launch/job_settings.h"

#include <gtest/gtest.h>

#include "gmcore/log.h"

namespace goldminer {
namespace {

TEST(JobSettingsTest, JobWithoutTheOptionGetsNothing) {
  JobSettings s;
  ASSERT_TRUE(s.configure({}).ok());
  EXPECT_FALSE(s.requested());
  EXPECT_TRUE(s.take_environment().empty());
}

TEST(JobSettingsTest, EnvironmentIsExportedOncePerStep) {
  JobSettings s;
  ASSERT_TRUE(s.configure({"dw_partition=cpu"}).ok());
  ASSERT_TRUE(s.set_option("dw=3").ok());
  auto first = s.take_environment();
  ASSERT_FALSE(first.empty());
  EXPECT_EQ(first.front(), (std::pair<std::string, std::string>{"GOLDMINER_DW", "3"}));
  bool has_partition = false;
  for (const auto& kv : first) has_partition |= kv.first == "GOLDMINER_DW_PARTITION";
  EXPECT_TRUE(has_partition);
  EXPECT_TRUE(s.take_environment().empty()) << "second user_init of the same step";
}

TEST(JobSettingsTest, OptionWithoutValueTakesDefaults) {
  JobSettings s;
  ASSERT_TRUE(s.configure({}).ok());
  ASSERT_TRUE(s.set_option(nullptr).ok());
  ASSERT_TRUE(s.requested());
  EXPECT_EQ(s.options()->canonical(), "dw=1,dw-max=8,cpus-per-dw=2,transport=ucx,mode=elastic");
  // What sbatch hands back for a bare --goldminer in a hetjob's components.
  JobSettings het;
  ASSERT_TRUE(het.configure({}).ok());
  ASSERT_TRUE(het.set_option("(null)").ok());
  EXPECT_EQ(het.options()->canonical(), "dw=1,dw-max=8,cpus-per-dw=2,transport=ucx,mode=elastic");
}

TEST(JobSettingsTest, SiteLimitApplies) {
  JobSettings s;
  ASSERT_TRUE(s.configure({"max_dw_per_job=2"}).ok());
  Status st = s.set_option("dw-max=3");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(),
            "goldminer: dw-max: invalid value '3': exceeds this cluster's limit of 2 "
            "(plugstack.conf max_dw_per_job)");
  EXPECT_FALSE(s.requested()) << "a refused value leaves the job untouched";
}

TEST(JobSettingsTest, BadSiteConfigIsRefused) {
  JobSettings s;
  Status st = s.configure({"max_cpus_per_dw=lots"});
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message(),
            "goldminer: plugstack.conf: max_cpus_per_dw: invalid value 'lots': expected an "
            "integer from 1 to 1024");
}

TEST(LogTest, SinkReceivesLinesAndLevels) {
  std::vector<std::pair<log::Level, std::string>> seen;
  auto previous = log::set_sink([&](log::Level l, const std::string& s) { seen.emplace_back(l, s); });
  log::error("goldminer: a");
  log::debug("goldminer: b");
  log::set_sink(previous);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].first, log::Level::kError);
  EXPECT_EQ(seen[1].second, "goldminer: b");
}

}  // namespace
}  // namespace goldminer
