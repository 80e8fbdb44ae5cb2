// Every command's `--help` and its built man page list the same options,
// with the same value names and defaults: the built programs are run and
// the built pages read (GOLDMINER_BUILDDIR, set by make check), so a main
// that parses with another table than the one its page is written from
// fails here.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tw_lib/session/session_option_docs.h"

namespace goldminer {
namespace {

struct Documented {
  std::string value;          // the value's name, "" for a switch
  std::string default_value;  // "" = none
  bool operator==(const Documented& o) const { return value == o.value && default_value == o.default_value; }
};
using Options = std::map<std::string, Documented>;  // by long name

void PrintTo(const Documented& d, std::ostream* out) { *out << "'" << d.value << "' default '" << d.default_value << "'"; }

std::ostream& operator<<(std::ostream& out, const Options& options) {
  for (const auto& [name, d] : options)
    out << "  --" << name << (d.value.empty() ? "" : " " + d.value)
        << (d.default_value.empty() ? "" : " (default " + d.default_value + ")") << "\n";
  return out;
}

// Boost's --help: "  -v [ --verbose ]   help", "  --epochs E (=1)   help":
// the help starts at one column for all (a line too long for it has the
// option alone, its help on the next lines), one space after the widest.
Options from_help(const std::string& text) {
  static const std::regex option(R"(^(?:-\w \[ )?--([A-Za-z0-9-]+)(?: \])?(?: ([^ (]\S*))?(?: \(=([^)]*)\))?$)");
  std::vector<std::string> entries;
  size_t column = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    while (!line.empty() && line.back() == ' ') line.pop_back();
    if (line.rfind("  -", 0) != 0) continue;
    entries.push_back(line);
    const size_t gap = line.find("  ", 2);
    if (gap != std::string::npos) column = std::max(column, line.find_first_not_of(' ', gap));
  }
  Options out;
  std::smatch m;
  for (const std::string& line : entries) {
    std::string head = line.substr(2);
    if (!std::regex_match(head, m, option)) {  // not alone on its line: cut at the help's column
      head = line.substr(2, column - 2);
      while (!head.empty() && head.back() == ' ') head.pop_back();
      if (!std::regex_match(head, m, option)) continue;
    }
    out[m[1]] = {m[2], m[3]};
  }
  return out;
}

// The page's OPTIONS: ".TP", then "\fB\-v\fR, \fB\-\-verbose\fR" or
// "\fB\-\-epochs\fR \fIE\fR", then text that may end "Default: \fB1\fR.".
Options from_man(const std::string& page) {
  const size_t start = page.find(".SH \"OPTIONS\"");
  const size_t end = page.find("\n.SH ", start + 1);
  std::istringstream in(page.substr(start, end == std::string::npos ? std::string::npos : end - start));
  static const std::regex tag(R"(^(?:\\fB\\-\w\\fR, )?\\fB\\-\\-((?:[A-Za-z0-9]|\\-)+)\\fR(?: \\fI(.*)\\fR)?$)");
  static const std::regex default_line(R"(^Default: \\fB(.*)\\fR\.$)");
  auto unescape = [](std::string s) {
    for (size_t i; (i = s.find("\\-")) != std::string::npos;) s.replace(i, 2, "-");
    return s;
  };
  Options out;
  std::string line, current;
  bool after_tp = false;
  std::smatch m;
  while (std::getline(in, line)) {
    if (line == ".TP") {
      after_tp = true;
      continue;
    }
    if (after_tp && std::regex_match(line, m, tag)) {
      current = unescape(m[1]);
      out[current] = {unescape(m[2]), ""};
    } else if (!current.empty() && std::regex_match(line, m, default_line)) {
      out[current].default_value = unescape(m[1]);
    }
    after_tp = false;
  }
  return out;
}

struct Command {
  const char* program;
  const char* page;  // under man/ of the build
};

class CommandDocsTest : public ::testing::TestWithParam<Command> {};

TEST_P(CommandDocsTest, HelpAndManPageListTheSameOptionsAndDefaults) {
  const char* builddir = std::getenv("GOLDMINER_BUILDDIR");
  if (builddir == nullptr) GTEST_SKIP() << "GOLDMINER_BUILDDIR is not set (make check sets it)";
  const std::string program = std::string(builddir) + "/" + GetParam().program;
  if (access(program.c_str(), X_OK) != 0) GTEST_SKIP() << program << " is not built in this configuration";
  FILE* pipe = popen((program + " --help 2>&1").c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string help;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) help.append(buf, n);
  const int status = pclose(pipe);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << help;

  const std::string page_path = std::string(builddir) + "/man/" + GetParam().page;
  std::ifstream page_file(page_path);
  ASSERT_TRUE(page_file) << page_path << " is not built";
  std::stringstream page;
  page << page_file.rdbuf();

  const Options in_help = from_help(help);
  const Options in_man = from_man(page.str());
  ASSERT_GT(in_help.size(), 1u) << "no options read from --help:\n" << help;
  EXPECT_EQ(in_help, in_man) << "--help:\n" << in_help << page_path << ":\n" << in_man;
}

INSTANTIATE_TEST_SUITE_P(Commands, CommandDocsTest,
                         ::testing::Values(Command{"goldminer-consume", "goldminer-consume.1"},
                                           Command{"goldminer-ctld", "goldminer-ctld.8"},
                                           Command{"goldminer-dw", "goldminer-dw.1"},
                                           Command{"goldminer-run", "goldminer-run.1"},
                                           Command{"goldminer-sim", "goldminer-sim.1"},
                                           Command{"goldminer-split", "goldminer-split.1"},
                                           Command{"goldminer-top", "goldminer-top.1"}),
                         [](const ::testing::TestParamInfo<Command>& info) {
                           std::string name = info.param.program;
                           for (char& c : name)
                             if (c == '-') c = '_';
                           return name;
                         });

// The options goldminer.Session shares with goldminer-consume: the
// command's --help shows each with the default SessionOptions has, and the
// module's docstring lists each keyword with the same default, its lines
// within the docstring's width.
TEST(CommandDocsTest, SessionKeywordsAndConsumeOptionsShareNameDefaultAndHelp) {
  const char* builddir = std::getenv("GOLDMINER_BUILDDIR");
  if (builddir == nullptr) GTEST_SKIP() << "GOLDMINER_BUILDDIR is not set (make check sets it)";
  FILE* pipe = popen((std::string(builddir) + "/goldminer-consume --help 2>&1").c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string help;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) help.append(buf, n);
  pclose(pipe);
  const Options in_help = from_help(help);
  const std::string docs = session_keyword_docs(19, 92);
  std::istringstream lines(docs);
  for (std::string line; std::getline(lines, line);) EXPECT_LE(line.size(), 92u) << line;
  ASSERT_FALSE(shared_session_options().empty());
  for (const SharedSessionOption& r : shared_session_options()) {
    ASSERT_TRUE(in_help.count(r.option)) << "--" << r.option << " missing from goldminer-consume --help:\n" << help;
    EXPECT_EQ(in_help.at(r.option), (Documented{r.value_doc, r.default_value})) << r.option;
    const std::string all = "\n" + docs;  // a keyword as wide as the column has its text on the next line
    EXPECT_TRUE(all.find("\n  " + r.keyword + " ") != std::string::npos ||
                all.find("\n  " + r.keyword + "\n") != std::string::npos)
        << r.keyword << " in:\n" << docs;
    EXPECT_NE(help.find(r.help.substr(0, 20)), std::string::npos) << r.option << "'s help in --help";
  }
  EXPECT_NE(docs.find("(default 64)"), std::string::npos) << "queue_batches' default:\n" << docs;
  EXPECT_NE(docs.find("(default False)"), std::string::npos) << "a switch's default:\n" << docs;
}

// The readers themselves, on text as the two sides print it.
TEST(CommandDocsParseTest, ReadsHelpEntriesAndManRows) {
  const Options help = from_help(
      "Usage: x\n\nOptions:\n  -h [ --help ]         print this help\n  --epochs E (=1)       epochs, a long\n"
      "                        help that wraps --not-an-option\n  --json                print JSON\n"
      "  --listen ADDRESS      where\n  -v [ --verbose ]      log more\n"
      "  --a-very-long-option-name X|Y (=X)\n                        its help\n");
  EXPECT_EQ(help, (Options{{"help", {"", ""}},
                           {"epochs", {"E", "1"}},
                           {"json", {"", ""}},
                           {"listen", {"ADDRESS", ""}},
                           {"verbose", {"", ""}},
                           {"a-very-long-option-name", {"X|Y", "X"}}}));
  // The widest entry: one space before its help.
  EXPECT_EQ(from_help("  --help            print\n  --interval S (=2) seconds\n  --json            print JSON\n"),
            (Options{{"help", {"", ""}}, {"interval", {"S", "2"}}, {"json", {"", ""}}}));
  const Options man = from_man(
      ".SH \"NAME\"\nx\n.SH \"OPTIONS\"\nSome prose.\n.TP\n\\fB\\-h\\fR, \\fB\\-\\-help\\fR\nPrint.\n.TP\n"
      "\\fB\\-\\-epochs\\fR \\fIE\\fR\nEpochs.\nDefault: \\fB1\\fR.\n.TP\n\\fB\\-\\-dry\\-run\\fR\nDo not.\n"
      ".SH \"EXIT STATUS\"\n.TP\n\\fB\\-\\-outside\\fR\n");
  EXPECT_EQ(man, (Options{{"help", {"", ""}}, {"epochs", {"E", "1"}}, {"dry-run", {"", ""}}}));
}

}  // namespace
}  // namespace goldminer
