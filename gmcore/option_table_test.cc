#include "gmcore/option_table.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace goldminer {
namespace {

OptionTable sample_table() {
  return {
      {"n", "3", "N", "a count", integer_at_least(1), "SAMPLE_N"},
      {"kind", "a", "a|b", "a choice", one_of({"a", "b"}), ""},
      {"name", "", "NAME", "a name", slurm_name(), "SAMPLE_NAME"},
  };
}

// Each key's value, from the tokens or from its default.
struct ValuesCase {
  std::vector<std::string> tokens;
  int64_t n;
  std::string kind, name;
  bool n_given, kind_given;
};
class OptionValuesTest : public ::testing::TestWithParam<ValuesCase> {};

TEST_P(OptionValuesTest, GivenValuesOverrideDefaultsAndDefaultsFillTheRest) {
  const ValuesCase& c = GetParam();
  auto v = parse_options(sample_table(), c.tokens, "comp");
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_EQ(v->integer("n"), c.n);
  EXPECT_EQ(v->text("kind"), c.kind);
  EXPECT_EQ(v->text("name"), c.name);
  EXPECT_EQ(v->was_given("n"), c.n_given);
  EXPECT_EQ(v->was_given("kind"), c.kind_given);
}

INSTANTIATE_TEST_SUITE_P(OptionTableTest, OptionValuesTest,
                         ::testing::Values(ValuesCase{{}, 3, "a", "", false, false},
                                           ValuesCase{{"n=7", "kind=b", "name=cpu-1"}, 7, "b", "cpu-1", true, true},
                                           ValuesCase{{"kind=b"}, 3, "b", "", false, true}));

TEST(OptionTableTest, BadValuesNameKeyValueAndReason) {
  struct Case { std::string token, message; };
  for (const Case& c : std::vector<Case>{
           {"n=0", "comp: n: invalid value '0': expected an integer >= 1"},
           {"n=", "comp: n: invalid value '': expected an integer >= 1"},
           {"n=2x", "comp: n: invalid value '2x': expected an integer >= 1"},
           {"n=+2", "comp: n: invalid value '+2': expected an integer >= 1"},
           {"n=99999999999999999999", "comp: n: invalid value '99999999999999999999': "
                                      "expected an integer >= 1"},
           {"kind=c", "comp: kind: invalid value 'c': expected one of a, b"},
           {"name=a b", "comp: name: invalid value 'a b': expected a name of letters, digits, "
                        "'_', '-', '.'"},
       }) {
    auto v = parse_options(sample_table(), {c.token}, "comp");
    ASSERT_FALSE(v.ok()) << c.token;
    EXPECT_EQ(v.status().message(), c.message);
  }
}

TEST(OptionTableTest, UnknownKeyListsKnownOnes) {
  auto v = parse_options(sample_table(), {"bogus=1"}, "comp");
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().message(), "comp: bogus: unknown key (known: n, kind, name)");
}

TEST(OptionTableTest, TokenWithoutEqualsAndRepeatedKeyAreRefused) {
  auto a = parse_options(sample_table(), {"n"}, "comp");
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().message(), "comp: 'n': expected key=value");
  auto b = parse_options(sample_table(), {"=3"}, "comp");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message(), "comp: '=3': expected key=value");
  auto c = parse_options(sample_table(), {"n=1", "n=2"}, "comp");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "comp: n: given more than once");
}

TEST(OptionTableTest, IntegerInRangeBounds) {
  auto check = integer_in_range(1, 4);
  EXPECT_EQ(check("1"), "");
  EXPECT_EQ(check("4"), "");
  EXPECT_EQ(check("5"), "expected an integer from 1 to 4");
  EXPECT_EQ(check("-1"), "expected an integer from 1 to 4");
}

TEST(OptionTableTest, NumberChecksNameTheirBoundsAndWhichAreOpen) {
  auto closed = number_in_range(0, 1e7);
  EXPECT_EQ(closed("0"), "");
  EXPECT_EQ(closed("10000000"), "");
  EXPECT_EQ(closed("10000000.5"), "expected a number from 0 to 10000000") << "written as a user writes it";
  auto fraction = number_above_at_most(0, 1);
  EXPECT_EQ(fraction("1"), "");
  EXPECT_EQ(fraction("0.001"), "");
  EXPECT_EQ(fraction("0"), "expected a number > 0 and <= 1");
  EXPECT_EQ(fraction("1.5"), "expected a number > 0 and <= 1");
  auto noise = number_at_least_below(0, 1);
  EXPECT_EQ(noise("0"), "");
  EXPECT_EQ(noise("0.999"), "");
  EXPECT_EQ(noise("1"), "expected a number >= 0 and < 1");
  EXPECT_EQ(noise("-0.1"), "expected a number >= 0 and < 1");
  for (const char* bad : {"", "nan", "inf", "x", "0.5x", " 0.5"}) EXPECT_NE(noise(bad), "") << bad;
  EXPECT_EQ(number_in_range(0.1, 60)("0.05"), "expected a number from 0.1 to 60");
}

TEST(OptionTableTest, SplitDropsEmptyPieces) {
  EXPECT_EQ(split("a,,b,", ','), (std::vector<std::string>{"a", "b"}));
  EXPECT_TRUE(split("", ',').empty());
}

TEST(OptionTableTest, HelpAndManComeFromTheTable) {
  std::string help = render_help(sample_table());
  EXPECT_NE(help.find("n=N (default 3): a count\n"), std::string::npos) << help;
  EXPECT_NE(help.find("name=NAME (default: unset): a name\n"), std::string::npos) << help;
  std::string man = render_man_options(sample_table());
  EXPECT_NE(man.find(".TP\n\\fBn\\fR=\\fIN\\fR\na count. Default: \\fB3\\fR. Reaches the job as "
                     "\\fBSAMPLE_N\\fR.\n"),
            std::string::npos)
      << man;
}

}  // namespace
}  // namespace goldminer
