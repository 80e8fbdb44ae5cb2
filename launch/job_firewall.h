// Per-step firewall rules (nftables) that a site may turn on
// (plugstack.conf firewall=nftables): the ports a step reserved for its
// trainer and ranks (launch/port_registry.h) admit new TCP connections only
// from the job's nodes, the site's firewall_admit networks and the node
// itself; every other source's packets to them are dropped by the kernel
// before any process sees them.
//
// One nftables table per step, named after the job, the reserving
// slurmstepd's PID and its start time (as the registry names its entries):
//   table inet goldminer_jJOB_pPID_sSTART
//     set admitted_v4, admitted_v6  (interval sets: addresses and prefixes)
//     chain input  (hook input, priority -10, policy accept)
//       tcp dport { PORTS } ip  saddr != @admitted_v4 counter drop
//       tcp dport { PORTS } ip6 saddr != @admitted_v6 counter drop
// The policy is accept: the table only ever drops, for the step's own
// ports, so it never opens what another table or the site's own rules
// close. The step's end deletes its table; a table whose step is gone (a
// killed slurmstepd) is deleted by the next step that opens one.
//
// What it does not cover (docs/ARCHITECTURE-session.md): a port the
// session takes outside the registry (the fallback when another process
// holds the reserved one) and UCX's own TCP data ports; and a stranger on
// one of the job's own nodes, whom the transport's pre-authentication
// bounds hold instead.
//
// This file is the Slurm-free part: names, the script, the parsers of what
// nft and getent print. job_firewall_nft.cc runs the commands.
#ifndef GOLDMINER_LAUNCH_JOB_FIREWALL_H_
#define GOLDMINER_LAUNCH_JOB_FIREWALL_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gmcore/status.h"

namespace goldminer {

// One step's rules.
struct JobFirewall {
  uint32_t job = 0;
  pid_t pid = 0;        // the step's slurmstepd
  uint64_t start = 0;   // its start time (process_start_time)
  std::vector<int> ports;
  // Sources admitted: addresses or prefixes, IPv4 or IPv6 ("10.1.0.0/16",
  // "fd00::/64", "10.1.2.3"). Loopback (127.0.0.0/8, ::1) always is.
  std::vector<std::string> admitted;
};

// "goldminer_jJOB_pPID_sSTART".
std::string firewall_table_name(uint32_t job, pid_t pid, uint64_t start);

// An address or prefix as nft takes it: "A.B.C.D", "A.B.C.D/N", an IPv6
// address or "ADDR/N", host bits cleared ("10.1.2.3/16" -> "10.1.0.0/16");
// the error names the text and what is wrong.
struct AdmittedNet {
  std::string text;
  bool v6 = false;
};
Expected<AdmittedNet> parse_admitted_net(const std::string& text);

// A comma-separated list of those (plugstack.conf firewall_admit); "" is
// an empty list.
Expected<std::vector<AdmittedNet>> parse_admitted_list(const std::string& text);

// The nft script that replaces the step's table with `f`'s rules in one
// transaction (nft -f applies a file atomically). An error when there is
// no port, a port is outside 1..65535 or an admitted entry is not an
// address or prefix.
Expected<std::string> firewall_script(const JobFirewall& f);

// A table of ours that `nft list tables` printed.
struct FirewallTable {
  std::string name;
  uint32_t job = 0;
  pid_t pid = 0;
  uint64_t start = 0;
};
// The goldminer tables (family inet, named as firewall_table_name makes
// them) in `nft list tables` output; other lines are skipped.
std::vector<FirewallTable> firewall_tables(const std::string& nft_list_tables);

// The job's Slurm host lists in a step's environment ("NAME=value"):
// SLURM_JOB_NODELIST (else SLURM_NODELIST) and, in a heterogeneous job,
// every SLURM_JOB_NODELIST_HET_GROUP_N; each once.
std::vector<std::string> job_nodelists(const std::vector<std::string>& env);

// The addresses in `getent ahosts NAME...` output (first field of each
// line), each once, in order of first appearance.
std::vector<std::string> getent_addresses(const std::string& output);

}  // namespace goldminer

#endif  // GOLDMINER_LAUNCH_JOB_FIREWALL_H_
