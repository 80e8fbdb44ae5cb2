// Prints the roff rows of one option table, for man/spank_goldminer.8.in
// and man/select_goldminer_cons_tres.8.in.
// Usage: gen-man job_options|job_environment|admin_options|select_options
#include <cstdio>
#include <cstring>

#include "gmcore/admin_config.h"
#include "gmcore/job_options.h"
#include "sched/select_config.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: gen-man job_options|job_environment|admin_options|select_options\n");
    return 2;
  }
  const char* what = argv[1];
  if (std::strcmp(what, "job_options") == 0) {
    std::fputs(goldminer::render_man_options(goldminer::job_option_table()).c_str(), stdout);
  } else if (std::strcmp(what, "job_environment") == 0) {
    std::fputs(goldminer::render_man_environment(goldminer::job_option_table()).c_str(), stdout);
    std::fputs(goldminer::render_man_environment(goldminer::admin_option_table()).c_str(), stdout);
  } else if (std::strcmp(what, "admin_options") == 0) {
    std::fputs(goldminer::render_man_options(goldminer::admin_option_table()).c_str(), stdout);
  } else if (std::strcmp(what, "select_options") == 0) {
    std::fputs(goldminer::render_man_options(goldminer::select_option_table()).c_str(), stdout);
  } else {
    std::fprintf(stderr, "gen-man: %s: unknown table\n", what);
    return 2;
  }
  return 0;
}
