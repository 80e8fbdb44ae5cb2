// Prints the roff rows of one option table: the plugins' tables for
// man/spank_goldminer.8.in and man/select_goldminer_cons_tres.8.in, and
// each command's for its page's OPTIONS (man/goldminer-*.in), from the
// table its main parses with (tools/*_options.h).
// Usage: gen-man TABLE, e.g. gen-man job_options or gen-man goldminer_top_options
#include <cstdio>
#include <cstring>
#include <string>

#include "launch/admin_config.h"
#include "gmcore/command_line.h"
#include "launch/job_environment.h"
#include "launch/job_options.h"
#include "sched/select_config.h"
#include "tools/command_tables.h"

int main(int argc, char** argv) {
  using namespace goldminer;
  if (argc != 2) {
    std::fprintf(stderr,
                 "usage: gen-man job_options|job_environment|session_environment|goldminer_dw_environment|admin_options|"
                 "select_options|PROGRAM_options\n");
    return 2;
  }
  const std::string what = argv[1];
  if (what == "job_options") {
    std::fputs(render_man_options(job_option_table()).c_str(), stdout);
  } else if (what == "job_environment") {
    std::fputs(render_man_plugin_environment().c_str(), stdout);
  } else if (what == "session_environment") {
    std::fputs(render_man_job_environment(kReadBySession).c_str(), stdout);
  } else if (what == "goldminer_dw_environment") {
    std::fputs(render_man_job_environment(kReadByWorker).c_str(), stdout);
  } else if (what == "admin_options") {
    std::fputs(render_man_options(admin_option_table()).c_str(), stdout);
  } else if (what == "select_options") {
    std::fputs(render_man_options(select_option_table()).c_str(), stdout);
  } else {
    // goldminer_top_options -> goldminer-top's table.
    std::string program = what.substr(0, what.rfind("_options"));
    for (char& c : program)
      if (c == '_') c = '-';
    CommandTables tables;
    for (const CommandOptions& command : tables.all()) {
      // "goldminer-sim job" (a subcommand) is goldminer_sim_job_options.
      std::string name = command.program;
      for (char& c : name)
        if (c == ' ') c = '-';
      if (what.size() > 8 && what.compare(what.size() - 8, 8, "_options") == 0 && name == program) {
        std::fputs(render_command_man_options(command).c_str(), stdout);
        return 0;
      }
    }
    std::fprintf(stderr, "gen-man: %s: unknown table\n", what.c_str());
    return 2;
  }
  return 0;
}
