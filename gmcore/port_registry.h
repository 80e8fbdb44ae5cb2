// The trainer ports of the --goldminer jobs on one node (issue 23, part 2):
// a node-local registry that the SPANK plugin keeps as root, so that two
// trainers on one node never get the same port, and a port some other
// process listens on is never handed out.
//
//   registry file (default /run/goldminer/ports, tmpfs: a rebooted node
//   starts empty), one line per reserved port:  PORT JOB PID [TAG]
//     PORT  in the site's dw_ports range
//     JOB   the job whose trainer listens there
//     PID   the slurmstepd that reserved it (the entry lives as long as it)
//     TAG   none: the job's trainer (rank 0); "rank:R": rank R of a
//           data-parallel srun step (each rank listens on its own port)
//
// reserve_port, under an exclusive flock of the file: the job's own live
// entry with that tag if it has one (a later step of the job), else the first port from
// low + job mod range size on, wrapping, that no live entry holds and that
// can be bound on the node's address now (a probe with SO_REUSEADDR, as the
// trainer binds: a port in TIME_WAIT is free, a listening one is not).
// Entries whose PID is no longer a live slurmstepd are dropped (a step
// killed before its exit callback). release_port drops the job's entry if
// PID still owns it (each tag's). Slurm-free: liveness and the probe are injected.
#ifndef GOLDMINER_GMCORE_PORT_REGISTRY_H_
#define GOLDMINER_GMCORE_PORT_REGISTRY_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>

#include "gmcore/status.h"

namespace goldminer {

struct PortRange {
  int low = 20000;
  int high = 39999;
  int size() const { return high - low + 1; }
};

// "LOW-HIGH", 1024 <= LOW <= HIGH <= 65535; the error says what is wrong.
Expected<PortRange> parse_port_range(const std::string& text);

struct PortRegistry {
  std::string path;
  PortRange range;
  std::function<bool(pid_t)> alive;   // null: live_slurmstepd
  std::function<bool(int)> bindable;  // null: every port counts as bindable (the plugin passes bind_probe)
};

// Whether a TCP socket can bind `address`:`port` (IPv4 or IPv6) now, with
// SO_REUSEADDR as the trainer's UCX listener sets it.
bool bind_probe(const std::string& address, int port);

// Whether `pid` is a live process named slurmstepd.
bool live_slurmstepd(pid_t pid);

// The port for `job`'s trainer, reserved for `owner`. Errors name the
// registry file (and line, for a line it cannot read: remove it) or say
// that every port of the range is taken.
// `tag`: "" (the trainer) or "rank:R" (letters, digits, ':' and '-').
Expected<int> reserve_port(const PortRegistry& registry, uint32_t job, pid_t owner, const std::string& tag = "");

// Drops `job`'s entries that `owner` holds; a job without one is fine.
Status release_port(const PortRegistry& registry, uint32_t job, pid_t owner);

}  // namespace goldminer

#endif  // GOLDMINER_GMCORE_PORT_REGISTRY_H_
