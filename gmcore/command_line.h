// A command's options as one table (gmcore/option_table.h, STYLE.md §3):
// each row names an option, its value, its default, its `--help` line and
// its man-page text, and says where the parsed value goes. From the table
// come the Boost.Program_options description the command parses with, its
// `--help`, its man page's OPTIONS rows (man/gen_man.cc, at build time) and
// the parse's error handling, so a main is: build the table over its
// variables, call parse_command_line, check what the table cannot, run.
//
// Thread-compatible values; the targets a table points to belong to the
// caller and must outlive every use of the table.
#ifndef GOLDMINER_GMCORE_COMMAND_LINE_H_
#define GOLDMINER_GMCORE_COMMAND_LINE_H_

#include <boost/lexical_cast.hpp>
#include <boost/program_options.hpp>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gmcore/option_table.h"
#include "gmcore/status.h"

namespace goldminer {

// Stores one option's value into the caller's variable through Boost.
class OptionTarget {
 public:
  virtual ~OptionTarget() = default;
  // A new semantic (Boost takes ownership) storing into the target, with
  // the row's default and value name. Throws boost::bad_lexical_cast when
  // the row's default is not a value of the target's type: a table's bug,
  // which a test that builds every table catches.
  virtual boost::program_options::value_semantic* semantic(const OptionSpec& row) const = 0;
};

namespace internal {

template <class T>
class ValueTarget final : public OptionTarget {
 public:
  explicit ValueTarget(T* target) : target_(target) {}
  boost::program_options::value_semantic* semantic(const OptionSpec& row) const override {
    // The default is converted first: a default not of T's type throws
    // (a table bug) before anything is allocated.
    const T fallback = row.default_value.empty() ? T() : boost::lexical_cast<T>(row.default_value);
    auto* v = boost::program_options::value<T>(target_);
    if (!row.default_value.empty()) v->default_value(fallback, row.default_value);
    if (!row.value_doc.empty()) v->value_name(row.value_doc);
    if (row.required) v->required();
    return v;
  }

 private:
  T* target_;
};

template <class T>
class ValueTarget<std::vector<T>> final : public OptionTarget {
 public:
  explicit ValueTarget(std::vector<T>* target) : target_(target) {}
  boost::program_options::value_semantic* semantic(const OptionSpec& row) const override {
    auto* v = boost::program_options::value<std::vector<T>>(target_);
    if (!row.value_doc.empty()) v->value_name(row.value_doc);
    if (row.required) v->required();
    return v;
  }

 private:
  std::vector<T>* target_;
};

class SwitchTarget final : public OptionTarget {
 public:
  explicit SwitchTarget(bool* target) : target_(target) {}
  boost::program_options::value_semantic* semantic(const OptionSpec&) const override {
    return boost::program_options::bool_switch(target_);
  }

 private:
  bool* target_;
};

}  // namespace internal

// A default taken from a struct's initializer, as --help and the man page
// print it: 5 -> "5", 0.5 -> "0.5".
std::string default_text(double value);

// A command's option with a value (`--key VALUE`), stored into *target;
// `default_value` as the user would write it ("" = none: *target keeps
// what it holds), shown by --help and the man page.
template <class T>
OptionSpec option(std::string key, std::string value_doc, std::string default_value, std::string help, T* target,
                  std::string man = "") {
  OptionSpec row;
  row.key = std::move(key);
  row.value_doc = std::move(value_doc);
  row.default_value = std::move(default_value);
  row.help = std::move(help);
  row.man = std::move(man);
  row.target = std::make_shared<internal::ValueTarget<T>>(target);
  return row;
}

// ROW whose value must pass CHECK before it is stored (parse_command_line).
inline OptionSpec checked(OptionSpec row, ValueCheck check) {
  row.check = std::move(check);
  return row;
}

// The same, which the command refuses to run without.
template <class T>
OptionSpec required_option(std::string key, std::string value_doc, std::string help, T* target, std::string man = "") {
  OptionSpec row = option(std::move(key), std::move(value_doc), "", std::move(help), target, std::move(man));
  row.required = true;
  return row;
}

// A switch (`--key`, no value): *target is true when it is given, else
// false. Without a target, CommandLine::given tells.
OptionSpec flag(std::string key, std::string help, bool* target = nullptr, std::string man = "");

// The row of `--help` (and `-h` when `letter`): every command has one.
OptionSpec help_flag(bool letter = true);

// One command: its name, usage, summary and option table.
struct CommandOptions {
  std::string program;  // "goldminer-consume": the prefix of every error
  std::string usage;    // after "Usage: ", e.g. "goldminer-top [OPTION]..."
  std::string summary;  // the lines --help prints between usage and options
  OptionTable options;  // in --help and man-page order
  // Options that words without a dash fill, in order: key and count
  // (-1: all the rest), e.g. {"model", 1} or {"command", -1}.
  std::vector<std::pair<std::string, int>> positional;
};

// What the parse found beyond the values it stored.
class CommandLine {
 public:
  // Whether the option was on the command line (not its default).
  bool given(const std::string& key) const { return given_.count(key) > 0; }
  // --help was given: the caller prints help_text and exits 0.
  bool help() const { return given("help"); }
  // The value given for KEY (its long name) as written, several joined by
  // spaces; null when it was not given.
  const std::string* text(const std::string& key) const;

 private:
  friend Expected<CommandLine> parse_command_line(const CommandOptions&, const std::vector<std::string>&);
  std::set<std::string> given_;
  std::map<std::string, std::string> texts_;
};

// The Boost description of the table (its caption: usage and summary).
boost::program_options::options_description boost_options(const CommandOptions& spec);

// Parses `args` (argv without the program name) into the table's targets.
// Each given value must first pass its row's check ("--threads: invalid
// value '0': expected an integer from 1 to 1024"). With --help, stores
// nothing more and says help(); required options are not checked then.
// Other errors name the option and the value as Boost words them ("the
// argument ('x') for option '--epochs' is invalid").
Expected<CommandLine> parse_command_line(const CommandOptions& spec, const std::vector<std::string>& args);

// For a main: parses argv; -1 when the command is to run, else the exit
// status after printing: 0 after --help (on stdout), 2 after an error,
// printed as "<program>: <error> (see --help)" and the usage line (stderr).
int parse_main_command_line(const CommandOptions& spec, int argc, char** argv, CommandLine* out);

// Each option of the table as this process has it, one line each:
// "--KEY=VALUE  # command line", "--KEY=VALUE  # default" or "# --KEY
// unset" (a switch: "--KEY  # command line" when given): the first part
// of a command's --print-config.
std::string describe_command_line(const CommandOptions& spec, const CommandLine& line);

// What --help prints: the usage, the summary and one entry per option
// with its value name and default.
std::string render_command_help(const CommandOptions& spec);

// The man page's OPTIONS rows: `.TP`, `\fB\-\-key\fR \fIVALUE\fR`, the
// row's man text (or its help) and "Default: \fBD\fR." when it has one.
std::string render_command_man_options(const CommandOptions& spec);

}  // namespace goldminer

#endif  // GOLDMINER_GMCORE_COMMAND_LINE_H_
