// Each command's table refuses, while it parses, the values out of its
// options' ranges (gmcore/command_line.h `checked`), in the table's form
// "--KEY: invalid value 'V': WHY", and takes the values at their bounds:
// no main re-checks a range by hand. The commands' tables are built and
// parsed here without running the programs.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tools/goldminer_ctld_options.h"
#include "tools/goldminer_sim_options.h"
#include "tools/goldminer_split_options.h"
#include "tools/goldminer_top_options.h"

namespace goldminer {
namespace {

struct Case {
  std::vector<std::string> args;
  std::string message;  // "" = accepted
};

// Parses each case's arguments after `required` with the table `make`
// builds over fresh arguments of type ARGS.
template <class Args, class Make>
void expect_checks(Make make, const std::vector<std::string>& required, const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    Args a;
    std::vector<std::string> args = required;
    args.insert(args.end(), c.args.begin(), c.args.end());
    auto parsed = parse_command_line(make(&a), args);
    const std::string got = parsed.ok() ? "" : parsed.status().message();
    EXPECT_EQ(got, c.message) << c.args.front();
  }
}

TEST(OptionChecksTest, GoldminerCtld) {
  expect_checks<CtldArgs>(ctld_command, {},
                          {
                              {{"--worker-cpus", "10000001"}, "--worker-cpus: invalid value '10000001': expected a number from 0 to 10000000"},
                              {{"--worker-cpus", "0"}, ""},
                              {{"--stale-after", "0"}, "--stale-after: invalid value '0': expected a number > 0 and <= 86400"},
                              {{"--stale-after", "86400"}, ""},
                              {{"--max-user-share", "0"}, "--max-user-share: invalid value '0': expected a number > 0 and <= 1"},
                              {{"--max-user-share", "1"}, ""},
                              {{"--max-connections", "4097"}, "--max-connections: invalid value '4097': expected an integer from 1 to 4096"},
                              {{"--max-connections-per-peer", "0"}, "--max-connections-per-peer: invalid value '0': expected an integer from 1 to 4096"},
                              {{"--request-timeout", "0.05"}, "--request-timeout: invalid value '0.05': expected a number from 0.1 to 60"},
                              {{"--request-timeout", "60"}, ""},
                              {{"--lookups-per-uid", "1001"}, "--lookups-per-uid: invalid value '1001': expected a number from 0 to 1000"},
                              {{"--lookup-burst", "0.5"}, "--lookup-burst: invalid value '0.5': expected a number from 1 to 10000"},
                              {{"--reserve-cpus-per-gpu", "-1"}, "--reserve-cpus-per-gpu: invalid value '-1': expected a number from 0 to 1024"},
                              {{"--reserve-cpus-per-gpu", "1024"}, ""},
                          });
}

TEST(OptionChecksTest, GoldminerTop) {
  expect_checks<TopArgs>(top_command, {},
                         {
                             {{"--interval", "0.05"}, "--interval: invalid value '0.05': expected a number from 0.1 to 3600"},
                             {{"--interval", "3601"}, "--interval: invalid value '3601': expected a number from 0.1 to 3600"},
                             {{"--interval", "0.1"}, ""},
                         });
}

TEST(OptionChecksTest, GoldminerSplit) {
  expect_checks<SplitArgs>(split_command, {"m.pt", "--example", "e.pt"},
                           {
                               {{"--transfer-gbps", "-1"}, "--transfer-gbps: invalid value '-1': expected a number >= 0"},
                               {{"--batch-size", "-4"}, "--batch-size: invalid value '-4': expected an integer >= 0"},
                               {{"--gpus-per-node", "-1"}, "--gpus-per-node: invalid value '-1': expected an integer >= 0"},
                               {{"--keep-margin", "1"}, "--keep-margin: invalid value '1': expected a number >= 0 and < 1"},
                               {{"--keep-margin", "0"}, ""},
                               {{"--repeat", "0"}, "--repeat: invalid value '0': expected an integer >= 1"},
                               {{"--max-workers", "0"}, "--max-workers: invalid value '0': expected an integer >= 1"},
                               {{"--transfer-gbps", "0", "--batch-size", "0", "--gpus-per-node", "0"}, ""},
                           });
}

TEST(OptionChecksTest, GoldminerSim) {
  expect_checks<SimArgs>(sim_command, {"--trace", "p.csv", "--nodes", "n.csv", "--policy", "bundled"},
                         {
                             {{"--load", "-1"}, "--load: invalid value '-1': expected a number >= 0"},
                             {{"--remote-efficiency", "1.01"}, "--remote-efficiency: invalid value '1.01': expected a number > 0 and <= 1"},
                             {{"--cpus-per-dw", "0"}, "--cpus-per-dw: invalid value '0': expected a number > 0"},
                             {{"--dw-floor", "-1"}, "--dw-floor: invalid value '-1': expected an integer >= 0"},
                             {{"--dw-max", "0"}, "--dw-max: invalid value '0': expected an integer >= 1"},
                             {{"--demand-median", "0"}, "--demand-median: invalid value '0': expected a number > 0"},
                             {{"--demand-sigma", "-0.1"}, "--demand-sigma: invalid value '-0.1': expected a number >= 0"},
                             {{"--demand-max", "0"}, "--demand-max: invalid value '0': expected a number > 0"},
                             {{"--cpu-demand-factor", "0.9"}, "--cpu-demand-factor: invalid value '0.9': expected a number >= 1"},
                             {{"--measure-noise", "1"}, "--measure-noise: invalid value '1': expected a number >= 0 and < 1"},
                             {{"--window-s", "0"}, "--window-s: invalid value '0': expected a number > 0"},
                             {{"--worker-start-s", "0", "--job-start-s", "0", "--dispatch-s", "0", "--measure-noise", "0"}, ""},
                         });
  expect_checks<SimJobArgs>(sim_job_command, {"--scenario", "s.csv"},
                            {
                                {{"--duration", "0"}, "--duration: invalid value '0': expected a number > 0"},
                                {{"--start-workers", "0"}, "--start-workers: invalid value '0': expected an integer from 1 to 65536"},
                                {{"--max-workers", "65537"}, "--max-workers: invalid value '65537': expected an integer from 1 to 65536"},
                                {{"--noise", "1"}, "--noise: invalid value '1': expected a number >= 0 and < 1"},
                                {{"--window-s", "0"}, "--window-s: invalid value '0': expected a number > 0"},
                                {{"--max-workers", "65536", "--noise", "0"}, ""},
                            });
}

}  // namespace
}  // namespace goldminer
