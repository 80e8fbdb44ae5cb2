// This node's network interfaces as the kernel lists them (getifaddrs):
// which one holds an address. Slurm-free.
#ifndef GOLDMINER_GMCORE_NET_INTERFACE_H_
#define GOLDMINER_GMCORE_NET_INTERFACE_H_

#include <sys/socket.h>

#include <string>

namespace goldminer {

// The network interface of this node that holds `address` (IPv4 or IPv6):
// its name ("eth0"); "" when none does (a wildcard address, another
// node's, or the interfaces cannot be listed).
std::string interface_holding(const sockaddr_storage& address);

}  // namespace goldminer

#endif  // GOLDMINER_GMCORE_NET_INTERFACE_H_
