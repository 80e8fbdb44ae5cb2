// One table per set of settings (STYLE.md §3): each row names a key, its
// default, its help text and the check its value must pass. The same table
// drives parsing, `--help` text and the man page, so they cannot disagree.
// The plugins' tables (`key=value` tokens) are parsed here; a command's
// table (`--key VALUE`) also says where each value goes and is parsed by
// Boost.Program_options through gmcore/command_line.h.
#ifndef GOLDMINER_GMCORE_OPTION_TABLE_H_
#define GOLDMINER_GMCORE_OPTION_TABLE_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gmcore/status.h"

namespace goldminer {

// Returns "" if the value is acceptable, else the reason it is not
// (e.g. "expected an integer >= 1").
using ValueCheck = std::function<std::string(const std::string& value)>;

ValueCheck integer_in_range(long min, long max);
ValueCheck integer_at_least(long min);
// A decimal number (integer or not) from min to max.
ValueCheck number_in_range(double min, double max);
// A decimal number above min (strictly), or at least min.
ValueCheck number_above(double min);
ValueCheck number_at_least(double min);
// A decimal number above min (strictly) and at most max: (min, max].
ValueCheck number_above_at_most(double min, double max);
// A decimal number at least min and below max (strictly): [min, max).
ValueCheck number_at_least_below(double min, double max);
ValueCheck one_of(std::vector<std::string> choices);
// Letters, digits, '_', '-', '.': a Slurm partition, QOS or account name.
ValueCheck slurm_name();
// An absolute path of letters, digits and '/', '_', '-', '.', '+': safe
// to write into a shell command without quoting.
ValueCheck absolute_path();
// HOST:PORT or [IPV6]:PORT (gmcore/host_port.h).
ValueCheck host_port();
// What `parse` (value -> Expected<T>) accepts; the reason is its error's
// message.
template <class Parse>
ValueCheck parses_with(Parse parse) {
  return [parse](const std::string& value) {
    auto parsed = parse(value);
    return parsed.ok() ? std::string() : parsed.status().message();
  };
}

// Where a command's parse stores an option's value (gmcore/command_line.h);
// the plugins' rows have none.
class OptionTarget;

struct OptionSpec {
  OptionSpec() = default;
  // A plugin's row: {key, default, value_doc, help, check, env}.
  OptionSpec(std::string key_, std::string default_value_, std::string value_doc_, std::string help_,
             ValueCheck check_ = nullptr, std::string env_ = "")
      : key(std::move(key_)), default_value(std::move(default_value_)), value_doc(std::move(value_doc_)),
        help(std::move(help_)), check(std::move(check_)), env(std::move(env_)) {}

  std::string key;            // e.g. "dw-max"; a command's may add its letter: "verbose,v"
  std::string default_value;  // as the user would write it; "" = unset
  std::string value_doc;      // e.g. "N" or "ucx|mpi"; "" for a command's switch
  std::string help;           // one sentence, no trailing period
  ValueCheck check;
  std::string env;            // job environment variable it reaches, or ""
  // A command's rows only (gmcore/command_line.h):
  std::string man;            // the man page's text when it says more than help (roff); "" = help
  std::shared_ptr<const OptionTarget> target;  // null: kept as text, asked with CommandLine::given
  bool required = false;      // the command refuses to run without it
};

using OptionTable = std::vector<OptionSpec>;

// One table of several groups of rows, in order (a command whose rows are
// written as groups by concern).
inline OptionTable joined_rows(std::vector<OptionTable> groups) {
  OptionTable rows;
  for (OptionTable& group : groups)
    for (OptionSpec& row : group) rows.push_back(std::move(row));
  return rows;
}

// The values of one parse: every key of the table, the given ones and the
// defaults of the others. Value type.
class OptionValues {
 public:
  const std::string& text(const std::string& key) const;
  long integer(const std::string& key) const;
  bool was_given(const std::string& key) const;

 private:
  friend Expected<OptionValues> parse_options(const OptionTable&,
                                              const std::vector<std::string>&,
                                              const std::string&);
  std::map<std::string, std::string> values_;
  std::map<std::string, bool> given_;
};

// Parses `key=value` tokens against the table. Errors read
// "<component>: <key>: invalid value '<v>': <why>", "<component>: <key>:
// unknown key (known: ...)", or name the token that is not key=value.
Expected<OptionValues> parse_options(const OptionTable& table,
                                     const std::vector<std::string>& tokens,
                                     const std::string& component);

// Splits on `separator`, dropping empty pieces ("a,,b" -> {"a", "b"}).
std::vector<std::string> split(const std::string& text, char separator);

// `text` as roff prints it literally: '-' and '\\' escaped, a leading '.'
// or '\'' kept from starting a request.
std::string roff_escape(const std::string& text);

// "key=VALUE (default D): help" rows, one per line, for --help output.
std::string render_help(const OptionTable& table);
// Man-page rows (.TP / \fBkey\fR=\fIVALUE\fR / help), roff-escaped.
std::string render_man_options(const OptionTable& table);

}  // namespace goldminer

#endif  // GOLDMINER_GMCORE_OPTION_TABLE_H_
