#include "sched/data_worker.h"

#include <gtest/gtest.h>

namespace goldminer {
namespace {

TEST(DataWorkerTest, TrainerIdFromCompanionName) {
  EXPECT_EQ(companion_trainer_id("goldminer-dw.42"), 42u);
  EXPECT_EQ(companion_trainer_id("goldminer-dw.4294967295"), 4294967295u);
  for (const char* name : {"goldminer-dw.", "goldminer-dw.0", "goldminer-dw.042", "goldminer-dw.4x",
                           "goldminer-dw.4294967296", "xgoldminer-dw.4", "train", ""})
    EXPECT_EQ(companion_trainer_id(name), 0u) << name;
  EXPECT_EQ(companion_trainer_id(nullptr), 0u);
}

TEST(DataWorkerTest, OptionFromSpankEnvironment) {
  const char* env[] = {"_SLURM_SPANK_OPTION_other_x=1", "_SLURM_SPANK_OPTION_goldminer_goldminer=dw=2,dw-max=4"};
  auto v = goldminer_option_in_spank_env(env, 2);
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(*v, "dw=2,dw-max=4");
  const char* bare[] = {"_SLURM_SPANK_OPTION_goldminer_goldminer="};
  EXPECT_EQ(goldminer_option_in_spank_env(bare, 1).value_or("unset"), "");
  EXPECT_FALSE(goldminer_option_in_spank_env(env, 1).has_value());
  EXPECT_FALSE(goldminer_option_in_spank_env(nullptr, 0).has_value());
}

WorkerClaim backed() {
  WorkerClaim c;
  c.worker_uid = c.trainer_uid = 1000;
  c.worker_cpus = 4;
  c.trainer_found = c.trainer_running = true;
  c.trainer_option = "dw=2,dw-max=4";  // cpus-per-dw 2: at most 8 CPUs
  return c;
}

TEST(DataWorkerTest, BackedClaimIsVerified) {
  EXPECT_EQ(verify_data_worker(7, backed(), SelectConfig{}), "");
  WorkerClaim defaults = backed();
  defaults.trainer_option = "";  // --goldminer alone: dw-max 8 x 2 CPUs
  defaults.worker_cpus = 16;
  EXPECT_EQ(verify_data_worker(7, defaults, SelectConfig{}), "");
}

TEST(DataWorkerTest, ForgedClaimsSayWhy) {
  WorkerClaim c = backed();
  c.trainer_found = false;
  EXPECT_EQ(verify_data_worker(7, c, SelectConfig{}), "job 7 does not exist");
  c = backed();
  c.trainer_uid = 0;
  EXPECT_EQ(verify_data_worker(7, c, SelectConfig{}), "job 7 belongs to uid 0, not 1000");
  c = backed();
  c.trainer_running = false;
  EXPECT_EQ(verify_data_worker(7, c, SelectConfig{}), "job 7 is not running");
  c = backed();
  c.trainer_option.reset();
  EXPECT_EQ(verify_data_worker(7, c, SelectConfig{}), "job 7 is not a --goldminer job");
  c = backed();
  c.cpus_held = 6;  // 6 + 4 > 4 x 2
  EXPECT_EQ(verify_data_worker(7, c, SelectConfig{}),
            "job 7's workers would hold 10 CPUs, more than dw-max x cpus-per-dw = 8");
  c = backed();
  c.trainer_option = "dw=junk";
  EXPECT_NE(verify_data_worker(7, c, SelectConfig{}).find("job 7: goldminer: dw: invalid value 'junk'"), std::string::npos);
}

// Injects site limits in goldminer.conf that differ from the built-in
// defaults (64 workers, 16 CPUs each); checks that the same claim's
// decision follows the site's values, both tighter and looser.
TEST(DataWorkerTest, SiteLimitsFromGoldminerConfChangeTheDecision) {
  // --goldminer=dw=2: dw-max defaults to min(8, max_dw_per_job).
  WorkerClaim c = backed();
  c.trainer_option = "dw=2";
  c.worker_cpus = 6;  // 2 CPUs per worker: 3 workers' worth
  EXPECT_EQ(verify_data_worker(7, c, SelectConfig{}), "");  // 6 <= 8 x 2
  auto tight = parse_select_config("max_dw_per_job=2\n", "/etc/slurm/goldminer.conf");
  ASSERT_TRUE(tight.ok()) << tight.status().message();
  EXPECT_EQ(verify_data_worker(7, c, *tight),
            "job 7's workers would hold 6 CPUs, more than dw-max x cpus-per-dw = 4");

  // dw-max=100 exceeds the built-in 64: not backed, and the log names
  // goldminer.conf; a site allowing 128 backs it.
  c = backed();
  c.trainer_option = "dw=2,dw-max=100,cpus-per-dw=1";
  c.worker_cpus = 80;
  EXPECT_EQ(verify_data_worker(7, c, SelectConfig{}),
            "job 7: goldminer: dw-max: invalid value '100': exceeds this cluster's limit of 64 "
            "(goldminer.conf max_dw_per_job)");
  auto loose = parse_select_config("max_dw_per_job=128\n", "g.conf");
  ASSERT_TRUE(loose.ok()) << loose.status().message();
  EXPECT_EQ(verify_data_worker(7, c, *loose), "");

  // cpus-per-dw=32 exceeds the built-in 16; a site allowing 32 backs it.
  c = backed();
  c.trainer_option = "dw=1,cpus-per-dw=32";
  c.worker_cpus = 32;
  EXPECT_NE(verify_data_worker(7, c, SelectConfig{}).find("cpus-per-dw: invalid value '32'"), std::string::npos);
  auto wide = parse_select_config("max_cpus_per_dw=32\n", "g.conf");
  ASSERT_TRUE(wide.ok()) << wide.status().message();
  EXPECT_EQ(verify_data_worker(7, c, *wide), "");
}

}  // namespace
}  // namespace goldminer
