#include "gmcore/option_table.h"

#include "gmcore/host_port.h"

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <iomanip>
#include <set>
#include <sstream>

namespace goldminer {
namespace {

bool parse_long(const std::string& text, long* out) {
  if (text.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long v = std::strtol(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || !(text[0] == '-' || (text[0] >= '0' && text[0] <= '9')))
    return false;
  *out = v;
  return true;
}

std::string join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    out += items[i];
  }
  return out;
}

const OptionSpec* find(const OptionTable& table, const std::string& key) {
  for (const auto& row : table)
    if (row.key == key) return &row;
  return nullptr;
}

}  // namespace

// A leading '.' or '\'' would start a request; backslashes and '-'
// must be escaped to print literally.
std::string roff_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '\\') out += "\\e";
    else if (c == '-') out += "\\-";
    else out += c;
  }
  if (!out.empty() && (out[0] == '.' || out[0] == '\'')) out.insert(0, "\\&");
  return out;
}

ValueCheck integer_in_range(long min, long max) {
  return [min, max](const std::string& value) -> std::string {
    long v;
    if (parse_long(value, &v) && v >= min && v <= max) return "";
    return "expected an integer from " + std::to_string(min) + " to " + std::to_string(max);
  };
}

ValueCheck integer_at_least(long min) {
  return [min](const std::string& value) -> std::string {
    long v;
    if (parse_long(value, &v) && v >= min && v <= INT_MAX) return "";
    return "expected an integer >= " + std::to_string(min);
  };
}

namespace {

// A decimal number within [min, max], where `above` makes the lower bound
// strict and `below` the upper one, as the check's why text names it.
ValueCheck number_check(double min, double max, bool above, bool below, std::string expected) {
  return [=](const std::string& value) -> std::string {
    char* end = nullptr;
    errno = 0;
    // Digits, '.' or '-' first: no "nan", "inf", sign or leading space.
    const bool digits = !value.empty() && (value[0] == '.' || value[0] == '-' || (value[0] >= '0' && value[0] <= '9'));
    const double v = digits ? std::strtod(value.c_str(), &end) : 0;
    if (digits && errno == 0 && *end == '\0' && (above ? v > min : v >= min) && (below ? v < max : v <= max))
      return "";
    return expected;
  };
}

// As a user writes it: 10000000, not 1e+07.
std::string number_text(double v) {
  std::ostringstream text;
  text << std::setprecision(15) << v;
  return text.str();
}

}  // namespace

ValueCheck number_in_range(double min, double max) {
  return number_check(min, max, false, false,
                      "expected a number from " + number_text(min) + " to " + number_text(max));
}

ValueCheck number_above(double min) {
  return number_check(min, HUGE_VAL, true, false, "expected a number > " + number_text(min));
}

ValueCheck number_at_least(double min) {
  return number_check(min, HUGE_VAL, false, false, "expected a number >= " + number_text(min));
}

ValueCheck number_above_at_most(double min, double max) {
  return number_check(min, max, true, false,
                      "expected a number > " + number_text(min) + " and <= " + number_text(max));
}

ValueCheck number_at_least_below(double min, double max) {
  return number_check(min, max, false, true,
                      "expected a number >= " + number_text(min) + " and < " + number_text(max));
}

ValueCheck one_of(std::vector<std::string> choices) {
  return [choices](const std::string& value) -> std::string {
    for (const auto& c : choices)
      if (value == c) return "";
    return "expected one of " + join(choices, ", ");
  };
}

ValueCheck slurm_name() {
  return [](const std::string& value) -> std::string {
    if (value.empty()) return "expected a name";
    for (char c : value) {
      bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '_' || c == '-' || c == '.';
      if (!ok) return std::string("expected a name of letters, digits, '_', '-', '.'");
    }
    return "";
  };
}

ValueCheck absolute_path() {
  return [](const std::string& value) -> std::string {
    if (value.empty() || value[0] != '/') return "expected an absolute path";
    for (char c : value) {
      bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '/' ||
                c == '_' || c == '-' || c == '.' || c == '+';
      if (!ok) return "expected a path of letters, digits, '/', '_', '-', '.', '+'";
    }
    return "";
  };
}

ValueCheck host_port() {
  return [](const std::string& value) -> std::string {
    auto hp = parse_host_port(value, "");
    if (hp.ok()) return "";
    const std::string& m = hp.status().message();
    return m.substr(m.find("': ") + 3);
  };
}

const std::string& OptionValues::text(const std::string& key) const { return values_.at(key); }

long OptionValues::integer(const std::string& key) const {
  long v = 0;
  parse_long(values_.at(key), &v);  // checked by the table before it got here
  return v;
}

bool OptionValues::was_given(const std::string& key) const {
  auto it = given_.find(key);
  return it != given_.end() && it->second;
}

Expected<OptionValues> parse_options(const OptionTable& table,
                                     const std::vector<std::string>& tokens,
                                     const std::string& component) {
  OptionValues out;
  for (const auto& row : table) {
    out.values_[row.key] = row.default_value;
    out.given_[row.key] = false;
  }
  for (const auto& token : tokens) {
    auto eq = token.find('=');
    if (eq == std::string::npos || eq == 0)
      return Status::error(component + ": '" + token + "': expected key=value");
    std::string key = token.substr(0, eq);
    std::string value = token.substr(eq + 1);
    const OptionSpec* row = find(table, key);
    if (row == nullptr) {
      std::vector<std::string> keys;
      for (const auto& r : table) keys.push_back(r.key);
      return Status::error(component + ": " + key + ": unknown key (known: " + join(keys, ", ") +
                           ")");
    }
    if (out.given_[key])
      return Status::error(component + ": " + key + ": given more than once");
    std::string why = row->check ? row->check(value) : "";
    if (!why.empty())
      return Status::error(component + ": " + key + ": invalid value '" + value + "': " + why);
    out.values_[key] = value;
    out.given_[key] = true;
  }
  return out;
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> out;
  std::string piece;
  std::istringstream in(text);
  while (std::getline(in, piece, separator))
    if (!piece.empty()) out.push_back(piece);
  return out;
}

std::string render_help(const OptionTable& table) {
  std::string out;
  for (const auto& row : table) {
    out += row.key + "=" + row.value_doc;
    out += row.default_value.empty() ? " (default: unset)" : " (default " + row.default_value + ")";
    out += ": " + row.help + "\n";
  }
  return out;
}

std::string render_man_options(const OptionTable& table) {
  std::string out;
  for (const auto& row : table) {
    out += ".TP\n\\fB" + roff_escape(row.key) + "\\fR=\\fI" + roff_escape(row.value_doc) + "\\fR\n";
    out += roff_escape(row.help) + ".";
    if (!row.default_value.empty()) out += " Default: \\fB" + roff_escape(row.default_value) + "\\fR.";
    if (!row.env.empty()) out += " Reaches the job as \\fB" + roff_escape(row.env) + "\\fR.";
    out += "\n";
  }
  return out;
}

}  // namespace goldminer
