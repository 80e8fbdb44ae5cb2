// goldminer-sim job: scenario files of the kinds the scaling policy's
// tests use (sched/scaling_policy_test.cc), run through the shipped policy
// by the library and by the built program.
#include "sim/job_scenario.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "sim/test_util.h"
#include "tests/test_util.h"

namespace goldminer::sim {
namespace {

using testing::TempFile;

// Rows for a linear curve: k workers deliver r x k up to `best`, then no
// more (the rows at `best` and `best + 1` make the line flat above).
std::string linear_rows(double from_s, int best, double r = 1000) {
  std::ostringstream out;
  out << from_s << ",1," << r << "\n" << from_s << "," << best << "," << r * best << "\n"
      << from_s << "," << best + 1 << "," << r * best << "\n";
  return out.str();
}

JobScenario parsed(const std::string& text) {
  auto s = JobScenario::parse(text, "scenario.csv");
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? *s : JobScenario();
}

TEST(JobScenarioTest, RowsHoldFromTheirTimeAndCountsBetweenThemAreInterpolated) {
  const JobScenario s = parsed("from_s,workers,samples_per_s\n# a file system that frees up at 1200 s\n0,*,1e9\n" +
                               linear_rows(0, 4) + linear_rows(1200, 16));
  EXPECT_DOUBLE_EQ(s.workers_rate(0, 3), 3000);
  EXPECT_DOUBLE_EQ(s.workers_rate(0, 10), 4000) << "flat above 5";
  EXPECT_DOUBLE_EQ(s.workers_rate(1200, 10), 10000) << "the later rows from 1200 s";
  EXPECT_DOUBLE_EQ(s.workers_rate(1200, 40), 16000);
  EXPECT_DOUBLE_EQ(s.workers_rate(5, 0), 0);
  EXPECT_DOUBLE_EQ(s.trainer_limit(5), 1e9);
  EXPECT_EQ(s.largest_count(), 17);
}

TEST(JobScenarioTest, ABadRowIsNamedByFileAndLine) {
  auto expect_error = [](const std::string& text, const std::string& what) {
    auto s = JobScenario::parse(text, "s.csv");
    ASSERT_FALSE(s.ok()) << text;
    EXPECT_EQ(s.status().message(), what) << text;
  };
  expect_error("0,1,1000\n5,two,2000\n", "s.csv:2: workers 'two': expected a count from 0 to 65536, or * (the trainer)");
  expect_error("0,1,-3\n", "s.csv:1: samples_per_s '-3': expected a rate from 0");
  expect_error("10,1,1000\n5,2,2000\n", "s.csv:2: from_s 5 is before the row above: rows go forward in time");
  expect_error("0,1\n", "s.csv:1: expected from_s,workers,samples_per_s: '0,1'");
  expect_error("0,*,1000\n", "s.csv: no row says what workers deliver");
}

// Linear to 16, 32 and 64 with 2 % noise: the job ends within 10 % of its
// best count's throughput and holds no worker above best + 10 % at the end.
TEST(JobScenarioTest, LinearScenariosEndAtTheirBest) {
  for (int best : {16, 32, 64}) {
    const JobScenario s = parsed(linear_rows(0, best));
    JobRunOptions o;
    o.max_workers = best + best / 4;
    o.noise = 0.02;
    const auto w = run_job_scenario(s, o);
    ASSERT_EQ(w.size(), 1440u);
    const int end = w.back().workers + w.back().change;
    EXPECT_GE(s.workers_rate(0, end), 0.9 * best * 1000) << best << ": ended at " << end;
    EXPECT_LE(end, best + std::max(1, best / 10)) << best;
  }
}

// A knee that moves up at 20 minutes and down at 100 (no noise): the job
// follows each (4, then 16, then 6; within one worker).
TEST(JobScenarioTest, AKneeThatMovesIsFollowed) {
  const JobScenario s = parsed(linear_rows(0, 4) + linear_rows(1200, 16) + linear_rows(6000, 6));
  JobRunOptions o;
  o.max_workers = 20;
  o.duration_s = 9600;
  const auto w = run_job_scenario(s, o);
  auto at = [&](double t) { return w[static_cast<size_t>(t / o.window_s) - 1].workers; };
  EXPECT_NEAR(at(1150), 4, 1);
  EXPECT_NEAR(at(5950), 16, 1);
  EXPECT_NEAR(at(9600), 6, 1);
}

// Flat after 2 with the trainer pausing (taking 1 % of it) 30 s every 10
// minutes: the job keeps 2 through the pauses.
TEST(JobScenarioTest, APausingTrainerKeepsItsWorkers) {
  std::string rows = "0,1,5000\n0,2,10000\n0,3,10000\n0,*,1e9\n";
  for (int t = 570; t < 7200; t += 600) rows += std::to_string(t) + ",*,100\n" + std::to_string(t + 30) + ",*,1e9\n";
  JobRunOptions o;
  o.start_workers = 2;
  o.max_workers = 8;
  o.noise = 0.02;
  const auto w = run_job_scenario(parsed(rows), o);
  int above = 0;
  for (const auto& x : w) above += x.workers > 3;
  EXPECT_LE(above, 8) << "held above 3 for at most two settle windows";
  EXPECT_EQ(w.back().workers, 2);
}

class JobCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::getenv("GOLDMINER_SIM") == nullptr)
      GTEST_SKIP() << "GOLDMINER_SIM is not set (make check sets it to the built goldminer-sim)";
  }
  goldminer::testing::CommandResult run(const std::string& args) {
    return goldminer::testing::run_command(std::string(std::getenv("GOLDMINER_SIM")) + " job " + args + " 2>&1");
  }
};

// One JSON line a window; the decisions alone without --json; bad options
// exit 2, a bad file 1, naming it.
TEST_F(JobCliTest, PrintsOneLineAWindowAndRefusesBadInput) {
  TempFile scenario("from_s,workers,samples_per_s\n" + linear_rows(0, 8));
  auto r = run("--scenario " + scenario.path() + " --duration 600 --max-workers 12 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  std::istringstream lines(r.out);
  std::string line, last;
  int n = 0;
  while (std::getline(lines, line)) {
    EXPECT_EQ(line.rfind("{\"t_s\": ", 0), 0u) << line;
    last = line;
    ++n;
  }
  EXPECT_EQ(n, 120);
  EXPECT_NE(last.find("\"t_s\": 600, \"workers\": 8, \"samples_per_s\": 8000, \"change\": 0, \"why\": "),
            std::string::npos)
      << r.out;
  r = run("--scenario " + scenario.path() + " --duration 600 --max-workers 12");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("workers: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("at 600 s: 8 workers, 8000 samples/s"), std::string::npos) << r.out;
  // Each bad option's error, in the table's form.
  const std::vector<std::pair<std::string, std::string>> refused = {
      {" --noise 1.5", "goldminer-sim job: --noise: invalid value '1.5': expected a number >= 0 and < 1"},
      {" --start-workers 20 --max-workers 4",
       "goldminer-sim job: --start-workers: invalid value '20': expected at most --max-workers (4)"},
      {" --max-workers 65537", "--max-workers: invalid value '65537': expected an integer from 1 to 65536"},
      {" --duration 100000000 --window-s 1",
       "--duration: invalid value '100000000': expected at most 10^7 windows of --window-s"},
  };
  for (const auto& [args, message] : refused) {
    r = run("--scenario " + scenario.path() + args);
    EXPECT_EQ(r.status, 2) << args;
    EXPECT_NE(r.out.find(message), std::string::npos) << r.out;
  }
  TempFile bad("0,1,1000\nnot a row\n");
  r = run("--scenario " + bad.path());
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find(bad.path() + ":2: expected from_s,workers,samples_per_s"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace goldminer::sim
