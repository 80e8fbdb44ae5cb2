// goldminer-sim end to end: the built binary on small CSV files.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "sim/test_util.h"
#include "tests/test_util.h"

namespace goldminer::sim {
namespace {

using testing::kNodeHeader;
using testing::kPodHeader;
using testing::TempFile;

using SimRun = goldminer::testing::CommandResult;  // out: stdout and stderr

// Runs goldminer-sim (GOLDMINER_SIM, set by make check) with `args`.
SimRun run_sim(const std::string& args) {
  const char* sim = std::getenv("GOLDMINER_SIM");
  if (sim == nullptr) return SimRun();
  return goldminer::testing::run_command(std::string(sim) + " " + args + " 2>&1");
}

// The first line of `out` (an error's; usage follows it).
std::string first_line(const std::string& out) { return out.substr(0, out.find('\n')); }

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::getenv("GOLDMINER_SIM") == nullptr)
      GTEST_SKIP() << "GOLDMINER_SIM is not set (make check sets it to the built goldminer-sim)";
  }
  TempFile nodes_{std::string(kNodeHeader) + "g1,24000,1,8,x\nc1,8000,1,0,\n"};
  TempFile pods_{std::string(kPodHeader) + "cpu,12000,1,0,0,,BE,Running,0,1000,0\n"
                                           "gpu,16000,1,1,1000,,LS,Running,1,101,1\n"};
};

// --jobs-csv: one row per job with its model and its times; the GPU job
// (16 CPUs asked, D x 1 GPU needed) waits for CPUs until the CPU job ends,
// then runs at the speed its request gives it.
TEST_F(CliTest, WritesTheJobRecords) {
  TempFile out("");
  SimRun r = run_sim("--trace " + pods_.path() + " --nodes " + nodes_.path() +
                     " --policy bundled --json --demand-sigma 0 --demand-median 32 --jobs-csv " + out.path());
  ASSERT_EQ(r.status, 0) << r.out;
  std::ifstream in(out.path());
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(),
            "name,gpus,cpus_requested,cpus_needed,cpus_trainer,work_s,bundled_speed,arrival_s,start_s,finish_s\n"
            "cpu,0.000,12.000,12.000,0.000,1000.000,1.0000,0.000,0.000,1000.000\n"
            "gpu,1.000,16.000,32.000,1.000,50.000,0.5000,1.000,1000.000,1100.000\n");
  r = run_sim("--trace " + pods_.path() + " --nodes " + nodes_.path() + " --policy bundled --jobs-csv /nonexistent/x.csv");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("goldminer-sim: --jobs-csv: cannot write /nonexistent/x.csv"), std::string::npos) << r.out;
}

TEST_F(CliTest, PrintsOneJsonObject) {
  SimRun r = run_sim("--trace " + pods_.path() + " --nodes " + nodes_.path() + " --policy bundled --json");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out.rfind("{\"policy\": \"bundled\", \"jobs\": 2, \"gpus\": 8, \"avg_jct_s\": 1049.5,", 0), 0u)
      << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << "one line: " << r.out;
}

TEST_F(CliTest, PlotsAllThreePolicies) {
  TempFile svg("");
  SimRun r = run_sim("--trace " + pods_.path() + " --nodes " + nodes_.path() +
                  " --policy goldminer --plot " + svg.path());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("policy goldminer: 2 jobs"), std::string::npos) << r.out;
  std::ifstream in(svg.path());
  std::stringstream text;
  text << in.rdbuf();
  for (const char* name : {">bundled<", ">goldminer<", ">goldminer-joblevel<"})
    EXPECT_NE(text.str().find(name), std::string::npos) << name;
}

TEST_F(CliTest, MalformedCsvNamesFileAndLine) {
  TempFile bad(std::string(kPodHeader) + "p,1000,1,1,1000,,LS,Running,0,10,0\np,x,1,1,1000,,LS,Running,0,10,0\n");
  SimRun r = run_sim("--trace " + bad.path() + " --nodes " + nodes_.path() + " --policy goldminer --json");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, "goldminer-sim: " + bad.path() + ":3: column 'cpu_milli': invalid number 'x'\n");
}

TEST_F(CliTest, BadOptionsExitTwo) {
  const std::string files = "--trace " + pods_.path() + " --nodes " + nodes_.path() + " --policy bundled";
  // Refused with exactly this first line.
  struct Refused {
    std::string args, line;
  };
  std::vector<Refused> refused = {
      {"--trace " + pods_.path() + " --nodes " + nodes_.path() + " --policy fifo",
       "goldminer-sim: --policy: invalid value 'fifo': expected one of bundled, goldminer, "
       "goldminer-joblevel, goldminer-measured, oracle, cachew"},
      {files + " --demand-model guess",
       "goldminer-sim: --demand-model: invalid value 'guess': expected one of calibrated, request"},
      {files + " --cpu-demand-factor 2", "goldminer-sim: --cpu-demand-factor applies to --demand-model request only"},
      {files + " --demand-sigma -1",
       "goldminer-sim: --demand-sigma: invalid value '-1': expected a number >= 0 (see --help)"},
      {files + " --speed-curve cubic",
       "goldminer-sim: --speed-curve: invalid value 'cubic': expected one of linear, concave"},
      {files + " --measure-noise -0.1",
       "goldminer-sim: --measure-noise: invalid value '-0.1': expected a number >= 0 and < 1 (see --help)"},
      {files + " --window-s 0", "goldminer-sim: --window-s: invalid value '0': expected a number > 0 (see --help)"},
  };
  for (const char* latency : {"--worker-start-s", "--job-start-s", "--dispatch-s"})
    refused.push_back({files + " " + latency + " -0.5", std::string("goldminer-sim: ") + latency +
                                                           ": invalid value '-0.5': expected a number >= 0 (see --help)"});
  for (const Refused& c : refused) {
    SimRun r = run_sim(c.args);
    EXPECT_EQ(r.status, 2) << c.args;
    EXPECT_EQ(first_line(r.out), c.line) << c.args;
  }
  SimRun missing = run_sim("--nodes " + nodes_.path() + " --policy bundled");
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.out.find("--trace"), std::string::npos) << missing.out;
  // What those refusals' options accept.
  EXPECT_EQ(run_sim(files + " --demand-model request --cpu-demand-factor 2").status, 0);
  EXPECT_EQ(run_sim(files + " --job-start-s 1.5 --worker-start-s 0 --dispatch-s 0.5").status, 0);
}

// Each row's range, as its table states it; and the one check that
// relates two rows.
TEST_F(CliTest, EachOptionsRangeIsItsRowsCheck) {
  const std::string files = "--trace " + pods_.path() + " --nodes " + nodes_.path() + " --policy bundled";
  const std::vector<std::pair<std::string, std::string>> refused = {
      {" --load -1", "--load: invalid value '-1': expected a number >= 0 (see --help)"},
      {" --remote-efficiency 0", "--remote-efficiency: invalid value '0': expected a number > 0 and <= 1 (see --help)"},
      {" --remote-efficiency 1.5", "--remote-efficiency: invalid value '1.5': expected a number > 0 and <= 1 (see --help)"},
      {" --cpus-per-dw 0", "--cpus-per-dw: invalid value '0': expected a number > 0 (see --help)"},
      {" --dw-floor -1", "--dw-floor: invalid value '-1': expected an integer >= 0 (see --help)"},
      {" --dw-max 0", "--dw-max: invalid value '0': expected an integer >= 1 (see --help)"},
      {" --demand-median 0", "--demand-median: invalid value '0': expected a number > 0 (see --help)"},
      {" --demand-model request --cpu-demand-factor 0.5",
       "--cpu-demand-factor: invalid value '0.5': expected a number >= 1 (see --help)"},
      {" --measure-noise 1", "--measure-noise: invalid value '1': expected a number >= 0 and < 1 (see --help)"},
      {" --demand-max 8", "--demand-max: invalid value '8': expected at least --demand-median (12)"},
  };
  for (const auto& [args, line] : refused) {
    SimRun r = run_sim(files + args);
    EXPECT_EQ(r.status, 2) << args;
    EXPECT_EQ(first_line(r.out), "goldminer-sim: " + line) << args;
  }
  EXPECT_EQ(run_sim(files + " --remote-efficiency 1 --dw-floor 0 --dw-max 1 --demand-max 12").status, 0);
}

TEST_F(CliTest, MeasuredPolicyReportsWastedWorkerCpu) {
  SimRun r = run_sim("--trace " + pods_.path() + " --nodes " + nodes_.path() +
                     " --policy goldminer-measured --speed-curve concave --measure-noise 0.05");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("policy goldminer-measured: 2 jobs"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("CPU-s by workers that added nothing; "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("CPU-s of them by workers that did not pay (under half of a first worker's gain)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find(" growths undone, "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" jobs ended with their knee above their useful workers"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace goldminer::sim
