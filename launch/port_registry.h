// The trainer ports of the --goldminer jobs on one node: a node-local
// registry that the SPANK plugin keeps as root, so that two trainers on one
// node never get the same port, and a port some other process listens on is
// never handed out.
//
//   registry file (default /run/goldminer/ports, tmpfs: a rebooted node
//   starts empty), one line per reserved port:  PORT JOB PID START [TAG]
//     PORT   in the site's dw_ports range
//     JOB    the job whose trainer listens there
//     PID    the slurmstepd that reserved it (the entry lives as long as it)
//     START  that process's start time (/proc/PID/stat field 22, clock
//            ticks after boot): PID and START name one process for the
//            node's uptime, so a PID the kernel gave to another process
//            since does not keep the entry (a process's name, /proc/PID/comm,
//            is anyone's to choose and proves nothing)
//     TAG    none: the job's trainer (rank 0); "rank:R": rank R of a
//            data-parallel srun step (each rank listens on its own port)
//   A line without START (an older registry's) lives while its PID does.
//
// Who may touch it. The registry's directory (PATH's, dedicated to it) is
// 0700 and the registry and its lock file PATH.lock are 0600, all owned by
// the registry's owner (root in slurmstepd). Nobody else can open either, so
// nobody else can lock them (a user's `flock PATH sleep inf` gets "Permission
// denied") or read which job listens where. Checked on every use through the
// opened descriptors (O_NOFOLLOW, fstat), not assumed:
//   - refused, with the path and what is wrong: a symbolic link, not a
//     directory or regular file, another owner, a directory or file group
//     or others may write, a file with more than one link;
//   - repaired: a directory or file of the owner that group or others may
//     only read (an older registry's 0755 directory and 0644 file) is
//     chmod'ed to 0700/0600 and logged;
//   - a missing directory (one level, as /run/goldminer) is created 0700.
// The directory's parents are the site's to keep root's.
//
// Locking. Every reservation and release takes an exclusive flock of
// PATH.lock with LOCK_NB, retried every 20 ms for at most lock_wait_s
// (kRegistryLockWaitS, 5 s): a holder that never lets go (only root can
// hold it) costs a step that long and an error naming the lock file, never
// a hung slurmstepd. The lock is on its own file because the registry is
// replaced, not written in place: the new text goes to .NAME.new in the
// same directory, is fsync'ed and renamed over PATH (then the directory is
// fsync'ed), so a crash at any point leaves the old registry or the new
// one, never a torn one; a .NAME.new a crash left is removed by the next
// write.
//
// reserve_ports, under the lock: for each tag, the job's own live entry
// with that tag if it has one (a later step of the job), else the first
// port from low + (job + salt) mod range size on, wrapping (salt: a random
// 32-bit number the first reservation after boot writes into the lock
// file, which nobody but the registry's owner can read, so nobody can tell
// a job's port from its public id and take it first), that no live entry
// holds and that can be bound on the node's address now (a probe with
// SO_REUSEADDR, as the trainer binds: a port in TIME_WAIT is free, a
// listening one is not), at most kMaxPortsPerJob entries per job. Entries
// whose process is gone are dropped (a step killed before its exit
// callback). release_port drops the job's entries
// that PID still owns. Slurm-free: process start times and the probe are
// injected; the tests use a temporary directory.
#ifndef GOLDMINER_LAUNCH_PORT_REGISTRY_H_
#define GOLDMINER_LAUNCH_PORT_REGISTRY_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "gmcore/status.h"

namespace goldminer {

// The longest a reservation or release waits for the registry's lock.
constexpr double kRegistryLockWaitS = 5;

struct PortRange {
  int low = 20000;
  int high = 39999;
  int size() const { return high - low + 1; }
};

// "LOW-HIGH", 1024 <= LOW <= HIGH <= 65535; the error says what is wrong.
Expected<PortRange> parse_port_range(const std::string& text);

// Where the registry is and how to judge it; a value type. The functions
// below may run in several processes (and threads) at once: the lock
// serializes them.
struct PortRegistry {
  std::string path;  // absolute; its directory is the registry's own
  PortRange range;
  // A process's start time; an error when it does not exist. Null:
  // process_start_time (/proc).
  std::function<Expected<uint64_t>(pid_t)> start_time;
  std::function<bool(int)> bindable;  // null: every port counts as bindable (the plugin passes bind_probe)
  double lock_wait_s = kRegistryLockWaitS;
  int64_t owner_uid = -1;  // who must own directory and files; -1: this process's effective uid
  // Tests only: runs after the new registry is written and synced, before
  // it replaces the old one (a crash there must leave the old one).
  std::function<void()> before_rename;
  // A job's first port is low + (job + this boot's random offset) mod the
  // range's size; false (tests of the order): low + job mod size.
  bool random_start = true;
};

// The most ports one job holds on a node (its trainer and its ranks there).
constexpr size_t kMaxPortsPerJob = 256;

// Listening TCP sockets (IPv4 and IPv6) in `range` by owner uid, from
// PROC_NET/tcp and tcp6 (this network namespace's).
std::map<uint32_t, size_t> listeners_by_uid(const PortRange& range, const std::string& proc_net);

// Whether a TCP socket can bind `address`:`port` (IPv4 or IPv6) now, with
// SO_REUSEADDR as the trainer's UCX listener sets it.
bool bind_probe(const std::string& address, int port);

// `pid`'s start time in clock ticks after boot (/proc/PID/stat field 22),
// or an error when it does not exist or its stat cannot be read.
Expected<uint64_t> process_start_time(pid_t pid);

// The ports for `job`'s trainer ("" tag) and ranks ("rank:R"), reserved
// for `owner`, in one hold of the lock: tag -> port; a tag missing from the
// answer got none because every port of the range is reserved or in use.
// Errors (the lock not had within lock_wait_s, an unsafe or unreadable
// directory or file, a line it cannot read) name the path and what is
// wrong. Tags: letters, digits, ':' and '-', starting with a letter.
Expected<std::map<std::string, int>> reserve_ports(const PortRegistry& registry, uint32_t job, pid_t owner,
                                                    const std::vector<std::string>& tags);

// The error for a tag reserve_ports found no port for: every port of the
// range is reserved or in use; it says by which goldminer jobs (the
// registry) and which uids listen in the range now.
Status no_port_left(const PortRegistry& registry);

// One tag's port; a full range is no_port_left.
Expected<int> reserve_port(const PortRegistry& registry, uint32_t job, pid_t owner, const std::string& tag = "");

// Drops `job`'s entries that `owner` holds; a job without one is fine.
Status release_port(const PortRegistry& registry, uint32_t job, pid_t owner);

}  // namespace goldminer

#endif  // GOLDMINER_LAUNCH_PORT_REGISTRY_H_
