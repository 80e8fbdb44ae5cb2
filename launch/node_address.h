// Where other nodes reach this one: the address the SPANK plugin puts in
// the trainer's GOLDMINER_LISTEN (and in each rank's GOLDMINER_RANK_LISTEN)
// for the data workers to connect to. Slurm-free.
#ifndef GOLDMINER_LAUNCH_NODE_ADDRESS_H_
#define GOLDMINER_LAUNCH_NODE_ADDRESS_H_

#include <string>

#include "gmcore/status.h"

namespace goldminer {

// Where workers reach this node: with `interface` "" its first IPv4
// address that is up and not loopback (what `hostname -I` prints first),
// else 127.0.0.1; else that interface's (the site's dw_network, e.g. the
// one fast network of several) first IPv4 address, else its first IPv6
// address that is not link-local (without brackets), and an error naming
// it when it has neither.
Expected<std::string> node_address(const std::string& interface);

// What this node is called: Slurm's node name ($SLURMD_NODENAME) in a
// Slurm task (several nodes may share one host name: a devcluster without
// namespaces, or a site whose node names are aliases), else the host
// name. What a data worker's id starts with, and what a trainer compares
// it with to tell its own node's workers.
std::string node_name();

}  // namespace goldminer

#endif  // GOLDMINER_LAUNCH_NODE_ADDRESS_H_
