// Running the commands behind a step's firewall (launch/job_firewall.h),
// as root in slurmstepd: `scontrol show hostnames` expands the job's node
// lists, `getent ahosts` resolves the names, `nft -f` installs the table
// and `nft delete table` removes it. Each command is killed after
// FirewallTools::timeout_s (launch/subprocess.h), so a step waits at most
// that long per command, never without a bound.
#ifndef GOLDMINER_LAUNCH_JOB_FIREWALL_NFT_H_
#define GOLDMINER_LAUNCH_JOB_FIREWALL_NFT_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "launch/job_firewall.h"
#include "gmcore/status.h"

namespace goldminer {

struct FirewallTools {
  std::string nft = "/usr/sbin/nft";
  std::string nft_source;           // where the path is set, for errors ("plugstack.conf nft")
  std::string scontrol;             // absolute path (slurm_bindir's)
  std::string getent = "/usr/bin/getent";
  std::string script_dir;           // a directory only root may write (the port registry's): the script file
  std::vector<std::string> env;     // the commands' environment (PATH, SLURM_CONF)
  double timeout_s = 10;
  std::string timeout_source;       // where the limit is set, for errors
};

// The addresses of every host in the Slurm host lists `nodelists`
// ("g[1-2],c1"): expanded by scontrol, resolved by getent. An error names
// a host that resolves to nothing.
Expected<std::vector<std::string>> node_addresses(const FirewallTools& tools, const std::vector<std::string>& nodelists);

// Deletes our tables whose step is gone (`alive(pid, start)` false), then
// installs `f`'s. Returns the table's name.
Expected<std::string> open_job_firewall(const FirewallTools& tools, const JobFirewall& f,
                                        const std::function<bool(pid_t, uint64_t)>& alive);

// Deletes the table `name`; one that is gone already is fine.
Status close_job_firewall(const FirewallTools& tools, const std::string& name);

}  // namespace goldminer

#endif  // GOLDMINER_LAUNCH_JOB_FIREWALL_NFT_H_
