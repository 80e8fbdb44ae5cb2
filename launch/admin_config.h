// Site settings an administrator gives the SPANK plugin as plugstack.conf
// arguments: `required spank_goldminer.so max_dw_per_job=16 dw_partition=cpu`.
#ifndef GOLDMINER_LAUNCH_ADMIN_CONFIG_H_
#define GOLDMINER_LAUNCH_ADMIN_CONFIG_H_

#include <string>
#include <vector>

#include "gmcore/option_table.h"
#include "launch/port_registry.h"
#include "gmcore/status.h"

namespace goldminer {

// The most threads one data worker runs: the range of cpus-per-dw (the
// job's option and its GOLDMINER_CPUS_PER_DW), of the site's
// max_cpus_per_dw, and of goldminer-dw's --threads that a worker is
// started with, so that a value sbatch accepts is one the worker takes.
constexpr int kMaxDataWorkerThreads = 1024;

// Value type.
struct AdminConfig {
  std::string dw_partition;  // "" = the job's own partition
  std::string dw_qos;        // "" = the job's own QOS
  int max_dw_per_job = 64;
  int max_cpus_per_dw = 16;
  std::string dw_command;  // goldminer-dw that companion jobs run
  std::string dw_network;  // interface workers reach a trainer on; "" = the first non-loopback
  PortRange dw_ports;      // trainer ports (launch/port_registry.h)
  std::string port_registry = "/run/goldminer/ports";
  // firewall=nftables: per-step rules guarding the reserved ports
  // (launch/job_firewall.h); firewall_admit: the further sources they
  // admit (a checked comma-separated list); nft: the program.
  bool firewall = false;
  std::string firewall_admit;
  std::string nft = "/usr/sbin/nft";
  std::string ctld;          // goldminer-ctld's HOST:PORT; "" = none (sessions size themselves)
  std::string ctld_user;     // the user goldminer-ctld runs as (SlurmUser)
  std::string munge_socket;  // munged's socket on the nodes; "" = munge's default
  // Slurm's commands (sbatch, squeue, scancel, srun) the plugin runs: from
  // this directory, never the job's PATH; each squeue, sbatch and scancel
  // killed after slurm_command_timeout_s (launch/subprocess.h).
  std::string slurm_bindir;
  int slurm_command_timeout_s = 10;
};

const OptionTable& admin_option_table();

// Parses plugstack.conf arguments; errors are prefixed
// "goldminer: plugstack.conf: ".
Expected<AdminConfig> parse_admin_config(const std::vector<std::string>& args);

}  // namespace goldminer

#endif  // GOLDMINER_LAUNCH_ADMIN_CONFIG_H_
