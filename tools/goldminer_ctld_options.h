// goldminer-ctld's options: one table for its parse, --help and the OPTIONS
// of goldminer-ctld(8) (gmcore/command_line.h; man/gen_man.cc).
#ifndef GOLDMINER_TOOLS_GOLDMINER_CTLD_OPTIONS_H_
#define GOLDMINER_TOOLS_GOLDMINER_CTLD_OPTIONS_H_

#include <string>

#include "ctld/http_server.h"
#include "gmcore/command_line.h"

namespace goldminer {

struct CtldArgs {
  std::string listen, partition, munge_socket, pid_file, operators, metrics_token_file, metrics_allow;
  double worker_cpus = -1, stale_after = 30, reserve = -1, lookups_per_s = 0.5, lookup_burst = 10,
         max_user_share = 1;
  HttpServeLimits limits;
  bool verbose = false;
};

inline CommandOptions ctld_command(CtldArgs* a) {
  const HttpServeLimits limits;
  return {"goldminer-ctld",
          "goldminer-ctld [OPTION]...",
          "Shares the cluster's data-worker CPUs among running goldminer jobs: each elastic session\n"
          "reports its queue, and is answered with its worker target. Serves /jobs (goldminer-top)\n"
          "and /metrics (Prometheus) on the same port.\n",
          {
              help_flag(false),
              option("listen", "HOST:PORT", "0.0.0.0:6830", "HOST:PORT to serve on", &a->listen,
                     "where to serve ([::]:6830 for IPv6)."),
              checked(option("worker-cpus", "N", "",
                     "CPUs to share among data workers (default: the spare CPUs of --partition's nodes, plus those "
                     "the workers hold)",
                     &a->worker_cpus, "a fixed number of CPUs to share instead of those found on the nodes."),
                      number_in_range(0, 1e7)),
              option("partition", "PARTITION", "", "partition whose nodes data workers run on (default: every node)",
                     &a->partition, R"(the partition data workers run in (\fBdw_partition\fR of
\fBspank_goldminer\fR(8)); default every node.)"),
              checked(option("reserve-cpus-per-gpu", "N", "",
                     "CPUs kept next to each free GPU (default: goldminer.conf's reserve_cpus_per_gpu)", &a->reserve,
                     R"(CPUs kept next to each free GPU; default \fBreserve_cpus_per_gpu\fR of
goldminer.conf beside \fBSLURM_CONF\fR (see
\fBselect_goldminer_cons_tres\fR(8)).)"),
                      number_in_range(0, 1024)),
              checked(option("stale-after", "S", "30", "seconds after which a silent job is dropped", &a->stale_after,
                     R"(a job that has not reported for \fIS\fR seconds is dropped.)"),
                      number_above_at_most(0, 86400)),
              checked(option("max-user-share", "F", "1",
                     "the most of the worker CPUs one user's jobs together get (0 to 1; 1: no cap)",
                     &a->max_user_share, R"(the most of the worker CPUs one user's jobs get together, a
fraction from 0 to 1 (1, the default: no cap); what a capped user
leaves goes to the other users' jobs.)"),
                      number_above_at_most(0, 1)),
              option("operators", "USER,...", "",
                     "users (names or uids, comma-separated) who see every job in full, as root and SlurmUser do",
                     &a->operators, "users (names or uids) who see every job in full, as root and SlurmUser do."),
              checked(option("max-connections", "N", std::to_string(limits.max_connections), "connections in hand at once",
                     &a->limits.max_connections, "connections served at once (1 to 4096)."),
                      integer_in_range(1, 4096)),
              checked(option("max-connections-per-peer", "N", std::to_string(limits.max_per_peer),
                     "connections in hand at once from one address", &a->limits.max_per_peer,
                     "connections served at once from one address."),
                      integer_in_range(1, 4096)),
              checked(option("request-timeout", "S", default_text(limits.timeout_s),
                     "seconds a connection has to send its whole request", &a->limits.timeout_s,
                     "seconds a connection has to send its whole request, and again to take the\n"
                     "answer (0.1 to 60)."),
                      number_in_range(0.1, 60)),
              checked(option("lookups-per-uid", "R", "0.5", "squeue lookups of jobs it does not know a uid earns per second",
                     &a->lookups_per_s, R"(\fBsqueue\fR lookups of jobs it does not know that a uid earns per second.)"),
                      number_in_range(0, 1000)),
              checked(option("lookup-burst", "N", "10", "squeue lookups of jobs it does not know a uid may make at once",
                     &a->lookup_burst, "such lookups a uid may make at once."),
                      number_in_range(1, 10000)),
              option("munge-socket", "PATH", "", "munged's socket (default: munge's own)", &a->munge_socket,
                     "munged's socket (default munge's own)."),
              option("pid-file", "FILE", "", "write the daemon's PID to this file", &a->pid_file,
                     "write the daemon's PID there (removed at exit)."),
              option("metrics-token-file", "FILE", "",
                     "a file (mode 600) whose first line is a bearer token that reads /metrics in full",
                     &a->metrics_token_file, R"(a file, readable by its owner only, whose first line is a token
(16 characters or more): a GET of /metrics with
\fBAuthorization: Bearer\fR \fITOKEN\fR sees every job's series, labelled
\fBjob_id\fR, \fBpartition\fR and \fBuser\fR (Prometheus's
\fBauthorization: credentials_file:\fR).)"),
              option("metrics-allow", "ADDR[/N],...", "",
                     "addresses or prefixes whose GETs of /metrics see every job's series without a credential",
                     &a->metrics_allow, R"(addresses or prefixes (\fIA.B.C.D\fR[/\fIN\fR], IPv6[/\fIN\fR],
comma-separated), such as the Prometheus server's, whose GETs of /metrics
see every job's series without a credential.)"),
              flag("verbose,v", "log every report", &a->verbose, "log more."),
          },
          {}};
}

}  // namespace goldminer

#endif  // GOLDMINER_TOOLS_GOLDMINER_CTLD_OPTIONS_H_
