// goldminer-top's options: one table for its parse, --help and the OPTIONS
// of goldminer-top(1) (gmcore/command_line.h; man/gen_man.cc).
#ifndef GOLDMINER_TOOLS_GOLDMINER_TOP_OPTIONS_H_
#define GOLDMINER_TOOLS_GOLDMINER_TOP_OPTIONS_H_

#include <string>

#include "gmcore/command_line.h"

namespace goldminer {

struct TopArgs {
  std::string ctld, munge_socket;
  double interval = 2;
  bool once = false, json = false;
};

inline CommandOptions top_command(TopArgs* a) {
  return {"goldminer-top",
          "goldminer-top [OPTION]...",
          "Shows goldminer-ctld's data workers per job, refreshed every --interval seconds (Ctrl-C\n"
          "quits), or once.\n",
          {
              help_flag(false),
              option("ctld", "HOST:PORT", "", "goldminer-ctld's HOST:PORT (default: $GOLDMINER_CTLD, else localhost:6830)",
                     &a->ctld,
                     R"(\fBgoldminer\-ctld\fR's address; default \fBGOLDMINER_CTLD\fR (set in jobs),
else localhost:6830.)"),
              option("munge-socket", "PATH", "", "munged's socket (default: munge's own)", &a->munge_socket,
                     R"(munged's socket (default munge's own).)"),
              flag("once", "print once and exit", &a->once, "print the table once and exit."),
              flag("json", "print JSON (implies --once)", &a->json,
                   R"(print \fBgoldminer\-ctld\fR's JSON once (see \fBgoldminer\-ctld\fR(8),
\fBGET /jobs\fR) and exit.)"),
              checked(option("interval", "S", "2", "seconds between refreshes", &a->interval,
                     "seconds between refreshes (0.1 to 3600)."),
                      number_in_range(0.1, 3600)),
          },
          {}};
}

}  // namespace goldminer

#endif  // GOLDMINER_TOOLS_GOLDMINER_TOP_OPTIONS_H_
