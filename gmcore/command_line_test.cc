#include "gmcore/command_line.h"

#include <gtest/gtest.h>

#include <cstdint>

#include "tests/test_util.h"

namespace goldminer {
namespace {

// A small command over its own variables, as a main declares one.
struct Args {
  std::string input;
  uint32_t epochs = 0;
  double interval = 0;
  std::string transport;
  bool verbose = false;
  std::vector<std::string> command;
};

CommandOptions sample_command(Args* a) {
  return {"sample",
          "sample --input PATH [options] [-- COMMAND...]",
          "Reads PATH.",
          {
              help_flag(),
              required_option("input", "PATH", "what to read", &a->input),
              option("epochs", "E", "1", "epochs to read", &a->epochs,
                     "Epochs to read, at least 1.\nWith \\fB\\-\\-resume\\fR the first is the rest."),
              option("interval", "S", "0.5", "seconds between reports", &a->interval),
              option("transport", "ucx|mpi", "ucx", "how batches come", &a->transport),
              flag("json", "print JSON"),
              flag("verbose,v", "log more", &a->verbose),
              option("command", "COMMAND", "", "what to run, after --", &a->command),
          },
          {{"command", -1}}};
}

TEST(CommandLineTest, StoresGivenValuesAndDefaults) {
  Args a;
  auto cl = parse_command_line(sample_command(&a), {"--input", "x.tsv", "--epochs=3", "-v"});
  ASSERT_TRUE(cl.ok()) << cl.status().message();
  EXPECT_EQ(a.input, "x.tsv");
  EXPECT_EQ(a.epochs, 3u);
  EXPECT_DOUBLE_EQ(a.interval, 0.5);
  EXPECT_EQ(a.transport, "ucx");
  EXPECT_TRUE(a.verbose);
  EXPECT_TRUE(cl->given("epochs"));
  EXPECT_TRUE(cl->given("verbose"));
  EXPECT_FALSE(cl->given("interval")) << "a default is not given";
  EXPECT_FALSE(cl->given("json")) << "a switch left out is not given";
  EXPECT_FALSE(cl->help());
}

TEST(CommandLineTest, SwitchesWithoutTargetAndPositionalWords) {
  Args a;
  auto cl = parse_command_line(sample_command(&a), {"--input", "x", "--json", "--", "train.py", "--lr", "1"});
  ASSERT_TRUE(cl.ok()) << cl.status().message();
  EXPECT_TRUE(cl->given("json"));
  EXPECT_EQ(a.command, (std::vector<std::string>{"train.py", "--lr", "1"}));
}

TEST(CommandLineTest, HelpNeedsNoRequiredOption) {
  Args a;
  auto cl = parse_command_line(sample_command(&a), {"-h"});
  ASSERT_TRUE(cl.ok()) << cl.status().message();
  EXPECT_TRUE(cl->help());
}

TEST(CommandLineTest, ErrorsNameTheOptionAndTheValue) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  for (const Case& c : std::vector<Case>{
           {{"--epochs", "2"}, "the option '--input' is required but missing"},
           {{"--input", "x", "--epochs", "many"}, "the argument ('many') for option '--epochs' is invalid"},
           {{"--input", "x", "--interval", "1s"}, "the argument ('1s') for option '--interval' is invalid"},
           {{"--input", "x", "--bogus"}, "unrecognised option '--bogus'"},
           {{"--input"}, "the required argument for option '--input' is missing"},
       }) {
    Args a;
    auto cl = parse_command_line(sample_command(&a), c.args);
    ASSERT_FALSE(cl.ok()) << c.args.back();
    EXPECT_EQ(cl.status().message(), c.message);
  }
}

TEST(CommandLineTest, RowsApplyTheirChecksBeforeStoringAValue) {
  Args a;
  CommandOptions spec = sample_command(&a);
  for (OptionSpec& row : spec.options) {
    if (row.key == "epochs") row = checked(row, integer_in_range(1, 1000));
    if (row.key == "interval") row = checked(row, number_above(0));
    if (row.key == "transport") row = checked(row, one_of({"ucx", "mpi"}));
  }
  auto bad = parse_command_line(spec, {"--input", "x", "--epochs", "0"});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "--epochs: invalid value '0': expected an integer from 1 to 1000");
  EXPECT_EQ(a.epochs, 0u) << "nothing is stored from a refused command line";
  bad = parse_command_line(spec, {"--input", "x", "--interval=0"});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "--interval: invalid value '0': expected a number > 0");
  bad = parse_command_line(spec, {"--input", "x", "--transport", "tcp"});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "--transport: invalid value 'tcp': expected one of ucx, mpi");
  auto good = parse_command_line(spec, {"--input", "x", "--epochs", "1000", "--interval", "0.25"});
  ASSERT_TRUE(good.ok()) << good.status().message();
  EXPECT_EQ(a.epochs, 1000u);
  EXPECT_DOUBLE_EQ(a.interval, 0.25);
}

TEST(CommandLineTest, DescribesEachOptionAndWhereItsValueCameFrom) {
  Args a;
  const CommandOptions spec = sample_command(&a);
  auto cl = parse_command_line(spec, {"--input", "x.tsv", "--epochs=3", "-v", "--", "run", "it"});
  ASSERT_TRUE(cl.ok()) << cl.status().message();
  const std::string text = describe_command_line(spec, *cl);
  EXPECT_TRUE(testing::contains_all(text, {"--input=x.tsv  # command line\n", "--epochs=3  # command line\n",
                                           "--interval=0.5  # default\n", "--verbose  # command line\n",
                                           "--command=run it  # command line\n"}));
  EXPECT_EQ(text.find("--json"), std::string::npos) << "a switch not given: " << text;
}

TEST(CommandLineTest, MainPrintsHelpOrTheErrorWithTheUsage) {
  Args a;
  CommandLine cl;
  std::vector<std::string> words = {"sample", "--input", "x", "--epochs", "-"};
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(parse_main_command_line(sample_command(&a), static_cast<int>(argv.size()), argv.data(), &cl), 2);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            "sample: the argument ('-') for option '--epochs' is invalid (see --help)\n"
            "Usage: sample --input PATH [options] [-- COMMAND...]\n");
  words = {"sample", "--help"};
  argv.clear();
  for (auto& w : words) argv.push_back(w.data());
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(parse_main_command_line(sample_command(&a), static_cast<int>(argv.size()), argv.data(), &cl), 0);
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), render_command_help(sample_command(&a)));
  words = {"sample", "--input", "y"};
  argv.clear();
  for (auto& w : words) argv.push_back(w.data());
  EXPECT_EQ(parse_main_command_line(sample_command(&a), static_cast<int>(argv.size()), argv.data(), &cl), -1);
  EXPECT_EQ(a.input, "y");
}

TEST(CommandLineTest, HelpListsEveryOptionWithValueNameAndDefault) {
  Args a;
  const std::string help = render_command_help(sample_command(&a));
  EXPECT_EQ(help.rfind("Usage: sample --input PATH [options] [-- COMMAND...]\nReads PATH.\nOptions:\n", 0), 0u) << help;
  for (const char* entry : {"-h [ --help ]", "--input PATH ", "--epochs E (=1)", "--interval S (=0.5)",
                            "--transport ucx|mpi (=ucx)", "--json ", "-v [ --verbose ]", "--command COMMAND "})
    EXPECT_NE(help.find(entry), std::string::npos) << entry << "\n" << help;
}

TEST(CommandLineTest, ManRowsCarryTheSameNamesAndDefaults) {
  Args a;
  const std::string man = render_command_man_options(sample_command(&a));
  EXPECT_NE(man.find(".TP\n\\fB\\-h\\fR, \\fB\\-\\-help\\fR\nPrint the options with their defaults and exit 0.\n"),
            std::string::npos)
      << man;
  EXPECT_NE(man.find(".TP\n\\fB\\-\\-input\\fR \\fIPATH\\fR\nwhat to read.\nRequired.\n.TP\n"), std::string::npos)
      << man;
  EXPECT_NE(man.find(".TP\n\\fB\\-\\-epochs\\fR \\fIE\\fR\nEpochs to read, at least 1.\n"
                     "With \\fB\\-\\-resume\\fR the first is the rest.\nDefault: \\fB1\\fR.\n"),
            std::string::npos)
      << man;
  EXPECT_NE(man.find("\\fB\\-\\-interval\\fR \\fIS\\fR\nseconds between reports.\nDefault: \\fB0.5\\fR.\n"),
            std::string::npos)
      << man;
  EXPECT_NE(man.find(".TP\n\\fB\\-v\\fR, \\fB\\-\\-verbose\\fR\nlog more.\n"), std::string::npos) << man;
}

TEST(CommandLineTest, ADefaultNotOfTheTargetsTypeIsATableBug) {
  uint32_t n = 0;
  CommandOptions bad{"bad", "bad", "", {option("n", "N", "many", "a count", &n)}, {}};
  EXPECT_THROW(boost_options(bad), boost::bad_lexical_cast);
}

}  // namespace
}  // namespace goldminer
