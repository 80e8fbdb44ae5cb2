// goldminer-run's options: one table for its parse, --help and the OPTIONS
// of goldminer-run(1) (gmcore/command_line.h; man/gen_man.cc).
#ifndef GOLDMINER_TOOLS_GOLDMINER_RUN_OPTIONS_H_
#define GOLDMINER_TOOLS_GOLDMINER_RUN_OPTIONS_H_

#include <string>
#include <vector>

#include "gmcore/command_line.h"
#include "launch/admin_config.h"

namespace goldminer {

struct RunArgs {
  unsigned workers = 1, threads = 1;
  std::string transport = "ucx";
  std::vector<std::string> command;
};

inline CommandOptions run_command(RunArgs* a) {
  return {"goldminer-run",
          "goldminer-run --workers N [--transport ucx|local] [--threads T] -- COMMAND [ARG...]",
          "Runs COMMAND (a trainer using goldminer.Session) with N local data workers; see goldminer-run(1).",
          {
              help_flag(),
              checked(option("workers", "N", "1", "data workers to start", &a->workers,
                     R"(Data workers to start, 0 to 1024.
With \fBlocal\fR, the trainer's session accepts at most 1024
(\fBGOLDMINER_LOCAL_WORKERS\fR).)"),
                      integer_in_range(0, 1024)),
              checked(option("threads", "T", "1", "threads per data worker (ucx)", &a->threads,
                     R"(Threads per data worker (\fBgoldminer\-dw \-\-threads\fR), 1 to 1024, \fBucx\fR only.)"),
                      integer_in_range(1, kMaxDataWorkerThreads)),
              checked(option("transport", "ucx|local", "ucx", "ucx (worker processes) | local (threads)", &a->transport,
                     R"(\fBucx\fR: worker processes connected over UCX; \fBlocal\fR: worker
threads in the trainer.)"),
                      one_of({"ucx", "local"})),
              option("command", "ARG", "", "the trainer command, after --", &a->command,
                     R"(The trainer command; normally given as the arguments after \fB\-\-\fR
(they are this option's positional form).
Required.)"),
          },
          {{"command", -1}}};
}

}  // namespace goldminer

#endif  // GOLDMINER_TOOLS_GOLDMINER_RUN_OPTIONS_H_
