// Every command's option table, over variables of its own: what man/gen_man.cc
// writes the OPTIONS of the commands' man pages from.
#ifndef GOLDMINER_TOOLS_COMMAND_TABLES_H_
#define GOLDMINER_TOOLS_COMMAND_TABLES_H_

#include <vector>

#include "gmcore/command_line.h"
#include "tools/goldminer_consume_options.h"
#include "tools/goldminer_ctld_options.h"
#include "tools/goldminer_dw_options.h"
#include "tools/goldminer_run_options.h"
#include "tools/goldminer_sim_options.h"
#include "tools/goldminer_split_options.h"
#include "tools/goldminer_top_options.h"

namespace goldminer {

// The tables point into this object: keep it while they are used.
struct CommandTables {
  ConsumeArgs consume;
  CtldArgs ctld;
  DwArgs dw;
  RunArgs run;
  SimArgs sim;
  SimJobArgs sim_job;
  SplitArgs split;
  TopArgs top;

  std::vector<CommandOptions> all() {
    return {consume_command(&consume), ctld_command(&ctld), dw_command(&dw), run_command(&run),
            sim_command(&sim),         sim_job_command(&sim_job), split_command(&split), top_command(&top)};
  }
};

}  // namespace goldminer

#endif  // GOLDMINER_TOOLS_COMMAND_TABLES_H_
