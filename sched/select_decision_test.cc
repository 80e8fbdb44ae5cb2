#include "sched/select_decision.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <string>

namespace {

// A fresh directory for a slurm.conf and the goldminer.conf beside it, as
// slurmctld finds them; removed when it goes out of scope.
struct SiteDir {
  char dir[32] = "/tmp/goldminer-select-XXXXXX";
  bool made = mkdtemp(dir) != nullptr;
  std::string conf = std::string(dir) + "/goldminer.conf";

  ~SiteDir() {
    std::remove(conf.c_str());
    rmdir(dir);
  }

  // Writes `text` as goldminer.conf and loads the settings from it: null,
  // with the cause in `err`, on error.
  gm_select_config* load(const char* text, char* err, size_t size) const {
    FILE* f = std::fopen(conf.c_str(), "w");
    if (f == nullptr) {
      std::snprintf(err, size, "cannot write %s", conf.c_str());
      return nullptr;
    }
    std::fputs(text, f);
    std::fclose(f);
    return gm_select_config_load((std::string(dir) + "/slurm.conf").c_str(), err, size);
  }
};

// A 2-CPU data worker's claim on a running trainer job of the same user
// whose SPANK environment is the one string `env[0]`.
gm_worker_claim claim_of_running_trainer(const char** env) {
  gm_worker_claim claim{};
  claim.worker_uid = claim.trainer_uid = 5;
  claim.worker_cpus = 2;
  claim.trainer_found = claim.trainer_running = 1;
  claim.trainer_spank_env = env;
  claim.trainer_spank_env_size = 1;
  return claim;
}

// The record of job `job_id`'s job_test call in `mode`: min_nodes to
// max_nodes nodes (requesting min_nodes), of `candidates` offered.
gm_job_test_record record(uint32_t job_id, int mode, uint32_t min_nodes, uint32_t max_nodes, uint32_t candidates) {
  gm_job_test_record r{};
  r.job_id = job_id;
  r.mode = mode;
  r.min_nodes = r.req_nodes = min_nodes;
  r.max_nodes = max_nodes;
  r.candidate_nodes = candidates;
  return r;
}

// The line gm_format_job_test writes of `r`.
std::string described(const gm_job_test_record& r) {
  char buf[512];
  gm_format_job_test(&r, buf, sizeof(buf));
  return buf;
}

TEST(SelectDecisionTest, DescribesSuccessfulHetComponent) {
  gm_job_test_record r = record(12, GM_MODE_RUN_NOW, 1, 1, 2);
  r.het_job_id = 11;
  r.het_job_offset = 1;
  r.selected = "c1";
  char buf[256];
  size_t n = gm_format_job_test(&r, buf, sizeof(buf));
  EXPECT_EQ(std::string(buf),
            "job_test job 12 (het 11+1) mode run_now nodes 1-1 candidates 2 -> selected c1");
  EXPECT_EQ(n, std::string(buf).size());
}

TEST(SelectDecisionTest, DescribesRefusalWithGres) {
  gm_job_test_record r = record(5, GM_MODE_WILL_RUN, 1, 2, 4);
  r.req_nodes = 2;
  r.gres = "gres/gpu:4";
  r.rc = 2014;
  EXPECT_EQ(described(r),
            "job_test job 5 mode will_run nodes 1-2 req 2 gres gres/gpu:4 candidates 4 -> refused "
            "rc 2014");
}

// The overhead log: ours excludes every cons_tres call, cons_tres is the
// call whose answer was used, and placement tiers tried before it are
// their own figure (a tiered call must not count them as ours).
TEST(SelectDecisionTest, TimesSeparateOursTheAnsweringCallAndEarlierTiers) {
  gm_job_test_record r = record(7, GM_MODE_RUN_NOW, 1, 1, 3);
  r.selected = "g2";
  r.policy = "data worker: 0 nodes dropped, 4 cores reserved, tiered";
  r.policy_us = 12.25;
  r.cons_tres_us = 900;
  r.tiers_us = 850.5;
  EXPECT_EQ(described(r),
            "job_test job 7 mode run_now nodes 1-1 candidates 3 [data worker: 0 nodes dropped, 4 cores reserved, "
            "tiered] -> selected g2 (us ours 12.2 cons_tres 900.0 tiers 850.5)");
  r.tiers_us = 0;
  EXPECT_NE(described(r).find("(us ours 12.2 cons_tres 900.0)"), std::string::npos) << described(r);
}

TEST(SelectDecisionTest, TruncatesLikeSnprintf) {
  gm_job_test_record r{};
  r.job_id = 123456;
  char buf[10];
  size_t n = gm_format_job_test(&r, buf, sizeof(buf));
  EXPECT_EQ(std::string(buf), "job_test ");
  EXPECT_GT(n, sizeof(buf));
}

}  // namespace

namespace {

TEST(SelectDecisionTest, PlanThroughTheCInterface) {
  char err[256] = "";
  gm_select_config* config = gm_select_config_load("/nonexistent-goldminer/slurm.conf", err, sizeof(err));
  ASSERT_NE(config, nullptr) << err;
  char text[128];
  gm_select_config_describe(config, text, sizeof(text));
  EXPECT_EQ(std::string(text), "reserve_cpus_per_gpu=1 mode=enforce max_dw_per_job=64 max_cpus_per_dw=16");
  EXPECT_EQ(gm_select_config_observe(config), 0);
  gm_node_usage nodes[2] = {{8, 8, 1, 4, 4}, {8, 4, 1, 4, 0}};
  gm_node_plan plan[2];
  gm_plan_summary summary;
  ASSERT_EQ(gm_plan_job_test(config, GM_JOB_DATA_WORKER, GM_MODE_RUN_NOW, nodes, 2, plan, &summary, err,
                             sizeof(err)),
            0)
      << err;
  EXPECT_EQ(plan[0].hidden_cores, 4u);
  EXPECT_EQ(plan[0].tier, 2);
  EXPECT_EQ(plan[1].tier, 0);
  EXPECT_EQ(plan[0].hide_allocated, 0);
  EXPECT_EQ(summary.tiers, 3);
  // Will-run: the reserve of all 4 GPUs on both, busy cores included.
  ASSERT_EQ(gm_plan_job_test(config, GM_JOB_CPU, GM_MODE_WILL_RUN, nodes, 2, plan, &summary, err, sizeof(err)), 0)
      << err;
  EXPECT_EQ(plan[1].usable, 1);
  EXPECT_EQ(plan[1].hidden_cores, 4u);
  EXPECT_EQ(plan[1].hide_allocated, 1);
  // Bad arguments are errors, not crashes.
  EXPECT_EQ(gm_plan_job_test(config, 7, GM_MODE_RUN_NOW, nodes, 2, plan, &summary, err, sizeof(err)), -1);
  EXPECT_EQ(std::string(err), "internal error: bad job kind");
  EXPECT_EQ(gm_plan_job_test(nullptr, GM_JOB_CPU, GM_MODE_RUN_NOW, nodes, 2, plan, &summary, err, sizeof(err)), -1);
  gm_select_config_free(config);
}

TEST(SelectDecisionTest, InjectedFaultIsAnErrorValueNotAnException) {
  SiteDir site;
  ASSERT_TRUE(site.made);
  char err[256] = "";
  gm_select_config* config = site.load("inject_fault=decision\n", err, sizeof(err));
  ASSERT_NE(config, nullptr) << err;
  gm_node_usage nodes[1] = {{8, 8, 1, 4, 4}};
  gm_node_plan plan[1];
  gm_plan_summary summary;
  EXPECT_EQ(gm_plan_job_test(config, GM_JOB_CPU, GM_MODE_RUN_NOW, nodes, 1, plan, &summary, err, sizeof(err)), -1);
  EXPECT_EQ(std::string(err), "internal error: fault injected (inject_fault=decision)");
  gm_select_config_free(config);
  // A bad file: NULL and the file, line and reason.
  EXPECT_EQ(site.load("mode=sometimes\n", err, sizeof(err)), nullptr);
  EXPECT_EQ(std::string(err).rfind(site.conf + ":1: mode: invalid value 'sometimes'", 0), 0u) << err;
}

TEST(SelectDecisionTest, WorkerClaimThroughTheCInterface) {
  EXPECT_EQ(gm_companion_trainer_id("goldminer-dw.9"), 9u);
  EXPECT_EQ(gm_tres_requests_gpu("gres:gpu:1"), 1);
  const char* env[] = {"_SLURM_SPANK_OPTION_goldminer_goldminer=dw=1"};
  gm_worker_claim claim = claim_of_running_trainer(env);
  char why[160];
  char err[256] = "";
  gm_select_config* config = gm_select_config_load("/nonexistent-goldminer/slurm.conf", err, sizeof(err));
  ASSERT_NE(config, nullptr) << err;
  EXPECT_EQ(gm_verify_data_worker(config, 9, &claim, why, sizeof(why)), 1);
  claim.trainer_spank_env_size = 0;
  EXPECT_EQ(gm_verify_data_worker(config, 9, &claim, why, sizeof(why)), 0);
  EXPECT_EQ(std::string(why), "job 9 is not a --goldminer job");
  EXPECT_EQ(gm_verify_data_worker(config, 9, nullptr, why, sizeof(why)), -1);
  EXPECT_EQ(gm_verify_data_worker(nullptr, 9, &claim, why, sizeof(why)), -1);
  EXPECT_EQ(std::string(why), "internal error: no settings");
  gm_select_config_free(config);
}

// A site's goldminer.conf max_cpus_per_dw=1 (built-in 16) injected through
// the file slurmctld reads: the same claim is no longer a data worker.
TEST(SelectDecisionTest, SiteLimitInGoldminerConfChangesTheWorkerDecision) {
  char err[256] = "";
  gm_select_config* builtin = gm_select_config_load("/nonexistent-goldminer/slurm.conf", err, sizeof(err));
  ASSERT_NE(builtin, nullptr) << err;
  SiteDir dir;
  ASSERT_TRUE(dir.made);
  gm_select_config* site = dir.load("max_cpus_per_dw=1\n", err, sizeof(err));
  ASSERT_NE(site, nullptr) << err;
  const char* env[] = {"_SLURM_SPANK_OPTION_goldminer_goldminer=dw=1,cpus-per-dw=2"};
  gm_worker_claim claim = claim_of_running_trainer(env);
  char why[256];
  EXPECT_EQ(gm_verify_data_worker(builtin, 9, &claim, why, sizeof(why)), 1) << why;
  EXPECT_EQ(gm_verify_data_worker(site, 9, &claim, why, sizeof(why)), 0);
  EXPECT_EQ(std::string(why),
            "job 9: goldminer: cpus-per-dw: invalid value '2': exceeds this cluster's limit of 1 "
            "(goldminer.conf max_cpus_per_dw)");
  gm_select_config_free(site);
  gm_select_config_free(builtin);
}

}  // namespace
