#include "launch/admin_config.h"

// GOLDMINER_BINDIR: where `make install` puts goldminer-dw;
// GOLDMINER_SLURM_BINDIR: where configure found Slurm's commands
// (--with-slurm=PREFIX: PREFIX/bin). Written by Makefile.am.
#include "gm_paths.h"
#include "launch/job_firewall.h"

namespace goldminer {

const OptionTable& admin_option_table() {
  static const OptionTable table = {
      {"dw_partition", "", "PARTITION",
       "partition in which data workers run; unset, they run in the job's own partition",
       slurm_name(), "GOLDMINER_DW_PARTITION"},
      {"dw_qos", "", "QOS", "QOS of data workers; unset, the job's own QOS", slurm_name(),
       "GOLDMINER_DW_QOS"},
      {"max_dw_per_job", "64", "N",
       "most data workers one job may ask for (its dw-max is capped to it by default, and a "
       "larger dw-max is refused)",
       integer_in_range(1, 100000), ""},
      {"max_cpus_per_dw", "16", "N", "most CPUs one data worker may ask for (cpus-per-dw)",
       integer_in_range(1, kMaxDataWorkerThreads), ""},
      {"dw_command", GOLDMINER_BINDIR "/goldminer-dw", "PATH",
       "the goldminer-dw that a batch job's companion job of data workers runs, the same path on every "
       "node",
       absolute_path(), ""},
      {"dw_network", "", "INTERFACE",
       "network interface whose IPv4 address data workers reach a batch job's trainer at; unset, the "
       "node's first one that is up and not loopback",
       slurm_name(), ""},
      {"dw_ports", "20000-39999", "LOW-HIGH",
       "ports a batch job's trainer may listen on; each job gets one no other trainer on its node holds and "
       "nothing else listens on, from LOW + job id mod the range's size on",
       parses_with(parse_port_range), ""},
      {"port_registry", "/run/goldminer/ports", "PATH",
       "the node's registry of reserved trainer ports, with PATH.lock beside it (root's alone: its directory, "
       "dedicated to it, 0700, the files 0600, checked on each use; on a tmpfs, so that a rebooted node starts "
       "empty)",
       absolute_path(), ""},
      {"firewall", "none", "none|nftables",
       "nftables: each step that reserves trainer or rank ports installs an nftables table (as root, at step "
       "start) that drops new connections to those ports from any source but the job's nodes, firewall_admit "
       "and the node itself, and deletes it when the step ends; a step whose rules cannot be installed fails",
       one_of({"none", "nftables"}), ""},
      {"firewall_admit", "", "CIDR[,CIDR...]",
       "with firewall=nftables, further sources admitted to the trainers' ports: addresses or prefixes "
       "(10.1.0.0/16, fd00::/64), e.g. the network of the nodes a batch job's companion job of data workers "
       "runs on, which are not the job's own",
       parses_with(parse_admitted_list), ""},
      {"nft", "/usr/sbin/nft", "PATH", "the nft program that firewall=nftables runs", absolute_path(), ""},
      {"ctld", "", "HOST:PORT",
       "goldminer-ctld's address: elastic sessions report to it and take their worker targets from it; unset, "
       "each session sizes its workers by itself",
       host_port(), "GOLDMINER_CTLD"},
      {"ctld_user", "slurm", "USER",
       "the user goldminer-ctld runs as (SlurmUser): sessions take worker targets only from it or root",
       slurm_name(), "GOLDMINER_CTLD_USER"},
      {"munge_socket", "", "PATH",
       "munged's socket on the nodes, for the sessions' reports to goldminer-ctld; unset, munge's default",
       absolute_path(), "GOLDMINER_MUNGE_SOCKET"},
      {"slurm_bindir", GOLDMINER_SLURM_BINDIR, "DIR",
       "directory of the Slurm commands the plugin runs as the job's user (sbatch, squeue, scancel, srun): "
       "always from here, never looked up on the job's PATH",
       absolute_path(), ""},
      {"slurm_command_timeout", "10", "SECONDS",
       "how long each squeue, sbatch and scancel the plugin runs inside slurmstepd may take; then SIGTERM "
       "to its process group, SIGKILL 1 s later, and the step goes on without it (see COMMANDS THE PLUGIN "
       "RUNS)",
       integer_in_range(1, 300), ""},
  };
  return table;
}

Expected<AdminConfig> parse_admin_config(const std::vector<std::string>& args) {
  auto values = parse_options(admin_option_table(), args, "goldminer: plugstack.conf");
  if (!values.ok()) return values.status();
  AdminConfig config;
  config.dw_partition = values->text("dw_partition");
  config.dw_qos = values->text("dw_qos");
  config.max_dw_per_job = static_cast<int>(values->integer("max_dw_per_job"));
  config.max_cpus_per_dw = static_cast<int>(values->integer("max_cpus_per_dw"));
  config.dw_command = values->text("dw_command");
  config.dw_network = values->text("dw_network");
  config.dw_ports = *parse_port_range(values->text("dw_ports"));
  config.port_registry = values->text("port_registry");
  config.firewall = values->text("firewall") == "nftables";
  config.firewall_admit = values->text("firewall_admit");
  config.nft = values->text("nft");
  config.ctld = values->text("ctld");
  config.ctld_user = values->text("ctld_user");
  config.munge_socket = values->text("munge_socket");
  config.slurm_bindir = values->text("slurm_bindir");
  config.slurm_command_timeout_s = static_cast<int>(values->integer("slurm_command_timeout"));
  return config;
}

}  // namespace goldminer
