#include "gmcore/select_decision.h"

#include <gtest/gtest.h>

#include <string>

namespace {

TEST(SelectDecisionTest, DescribesSuccessfulHetComponent) {
  gm_job_test_record r{};
  r.job_id = 12;
  r.het_job_id = 11;
  r.het_job_offset = 1;
  r.mode = GM_MODE_RUN_NOW;
  r.min_nodes = r.max_nodes = r.req_nodes = 1;
  r.candidate_nodes = 2;
  r.selected = "c1";
  char buf[256];
  size_t n = gm_format_job_test(&r, buf, sizeof(buf));
  EXPECT_EQ(std::string(buf),
            "job_test job 12 (het 11+1) mode run_now nodes 1-1 candidates 2 -> selected c1");
  EXPECT_EQ(n, std::string(buf).size());
}

TEST(SelectDecisionTest, DescribesRefusalWithGres) {
  gm_job_test_record r{};
  r.job_id = 5;
  r.mode = GM_MODE_WILL_RUN;
  r.min_nodes = 1;
  r.max_nodes = 2;
  r.req_nodes = 2;
  r.gres = "gres/gpu:4";
  r.candidate_nodes = 4;
  r.rc = 2014;
  char buf[256];
  gm_format_job_test(&r, buf, sizeof(buf));
  EXPECT_EQ(std::string(buf),
            "job_test job 5 mode will_run nodes 1-2 req 2 gres gres/gpu:4 candidates 4 -> refused "
            "rc 2014");
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
