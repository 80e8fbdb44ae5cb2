#include "gmcore/command_line.h"

#include <cstdio>
#include <iostream>
#include <sstream>

namespace goldminer {
namespace po = boost::program_options;
namespace {

// "verbose,v" -> "verbose"; "help" -> "help".
std::string long_name(const std::string& key) { return key.substr(0, key.find(',')); }

// "verbose,v" -> "v"; "help" -> "".
std::string letter(const std::string& key) {
  const size_t comma = key.find(',');
  return comma == std::string::npos ? "" : key.substr(comma + 1);
}

}  // namespace

std::string default_text(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

OptionSpec flag(std::string key, std::string help, bool* target, std::string man) {
  OptionSpec row;
  row.key = std::move(key);
  row.help = std::move(help);
  row.man = std::move(man);
  if (target != nullptr) row.target = std::make_shared<internal::SwitchTarget>(target);
  return row;
}

OptionSpec help_flag(bool with_letter) {
  return flag(with_letter ? "help,h" : "help", "print this help and exit", nullptr,
              "Print the options with their defaults and exit 0.");
}

po::options_description boost_options(const CommandOptions& spec) {
  po::options_description desc("Usage: " + spec.usage + "\n" + spec.summary + "\nOptions");
  for (const OptionSpec& row : spec.options) {
    po::value_semantic* semantic = nullptr;
    if (row.target != nullptr) {
      semantic = row.target->semantic(row);
    } else if (row.value_doc.empty()) {
      semantic = po::bool_switch();
    } else {
      auto* v = po::value<std::string>();
      if (!row.default_value.empty()) v->default_value(row.default_value);
      v->value_name(row.value_doc);
      if (row.required) v->required();
      semantic = v;
    }
    desc.add_options()(row.key.c_str(), semantic, row.help.c_str());
  }
  return desc;
}

namespace {

// The row whose long name is KEY, or null.
const OptionSpec* row_named(const CommandOptions& spec, const std::string& key) {
  for (const OptionSpec& row : spec.options)
    if (long_name(row.key) == key) return &row;
  return nullptr;
}

// "--KEY: invalid value 'V': WHY" when a row's check refuses V, else "".
std::string refused(const OptionSpec& row, const std::string& value) {
  if (!row.check) return "";
  const std::string why = row.check(value);
  return why.empty() ? "" : "--" + long_name(row.key) + ": invalid value '" + value.substr(0, 200) + "': " + why;
}

}  // namespace

Expected<CommandLine> parse_command_line(const CommandOptions& spec, const std::vector<std::string>& args) {
  CommandLine out;
  try {
    const po::options_description desc = boost_options(spec);
    po::positional_options_description positional;
    for (const auto& [key, count] : spec.positional) positional.add(key.c_str(), count);
    const po::parsed_options parsed = po::command_line_parser(args).options(desc).positional(positional).run();
    // Each given value as written, checked by its row before it is stored.
    for (const po::option& given : parsed.options) {
      const OptionSpec* row = row_named(spec, given.string_key);
      if (row == nullptr) continue;
      for (const std::string& value : given.value) {
        if (std::string why = refused(*row, value); !why.empty()) return Status::error(why);
        std::string& text = out.texts_[given.string_key];
        text += (text.empty() ? "" : " ") + value;
      }
    }
    po::variables_map vm;
    po::store(parsed, vm);
    for (const auto& [key, value] : vm) {
      if (value.defaulted()) continue;
      // A switch not given is stored as false, not as defaulted.
      if (const bool* on = boost::any_cast<bool>(&value.value()); on != nullptr && !*on) continue;
      out.given_.insert(key);
    }
    if (out.help()) return out;
    po::notify(vm);
  } catch (const po::error& e) {
    return Status::error(e.what());
  }
  return out;
}

std::string describe_command_line(const CommandOptions& spec, const CommandLine& line) {
  std::string out;
  for (const OptionSpec& row : spec.options) {
    const std::string key = long_name(row.key);
    if (row.value_doc.empty()) {  // a switch
      if (line.given(key)) out += "--" + key + "  # command line\n";
      continue;
    }
    if (const std::string* text = line.text(key)) out += "--" + key + "=" + *text + "  # command line\n";
    else if (!row.default_value.empty()) out += "--" + key + "=" + row.default_value + "  # default\n";
    else out += "# --" + key + " unset\n";
  }
  return out;
}

const std::string* CommandLine::text(const std::string& key) const {
  auto it = texts_.find(key);
  return it == texts_.end() ? nullptr : &it->second;
}

int parse_main_command_line(const CommandOptions& spec, int argc, char** argv, CommandLine* out) {
  std::vector<std::string> args(argv + (argc > 0 ? 1 : 0), argv + argc);
  auto parsed = parse_command_line(spec, args);
  if (!parsed.ok()) {
    std::fprintf(stderr, "%s: %s (see --help)\nUsage: %s\n", spec.program.c_str(), parsed.status().message().c_str(),
                 spec.usage.c_str());
    return 2;
  }
  if (parsed->help()) {
    std::fputs(render_command_help(spec).c_str(), stdout);
    return 0;
  }
  *out = std::move(parsed).value();
  return -1;
}

std::string render_command_help(const CommandOptions& spec) {
  std::ostringstream text;
  text << boost_options(spec) << "\n";
  return text.str();
}

std::string render_command_man_options(const CommandOptions& spec) {
  std::string out;
  for (const OptionSpec& row : spec.options) {
    out += ".TP\n";
    const std::string short_name = letter(row.key);
    if (!short_name.empty()) out += "\\fB\\-" + roff_escape(short_name) + "\\fR, ";
    out += "\\fB\\-\\-" + roff_escape(long_name(row.key)) + "\\fR";
    if (!row.value_doc.empty()) out += " \\fI" + roff_escape(row.value_doc) + "\\fR";
    out += "\n";
    std::string text = row.man.empty() ? roff_escape(row.help) + "." : row.man;
    if (text.back() != '\n') text += "\n";
    out += text;
    if (row.required) out += "Required.\n";
    if (!row.default_value.empty()) out += "Default: \\fB" + roff_escape(row.default_value) + "\\fR.\n";
  }
  return out;
}

}  // namespace goldminer
