#include "launch/node_address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace goldminer {

std::string node_name() {
  if (const char* node = std::getenv("SLURMD_NODENAME"); node != nullptr && *node != '\0') return node;
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  return host;
}

Expected<std::string> node_address(const std::string& interface) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0)
    return interface.empty() ? Expected<std::string>(std::string("127.0.0.1"))
                             : Status::error("dw_network: cannot list this node's network interfaces");
  std::string v4, v6;
  bool seen = false;
  for (ifaddrs* a = list; a != nullptr && v4.empty(); a = a->ifa_next) {
    if (!interface.empty() ? interface != a->ifa_name
                           : (a->ifa_flags & IFF_UP) == 0 || (a->ifa_flags & IFF_LOOPBACK) != 0)
      continue;
    seen = true;
    if (a->ifa_addr == nullptr) continue;
    char text[INET6_ADDRSTRLEN] = {};
    if (a->ifa_addr->sa_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
      if (inet_ntop(AF_INET, &in->sin_addr, text, sizeof text) != nullptr) v4 = text;
    } else if (a->ifa_addr->sa_family == AF_INET6 && !interface.empty() && v6.empty()) {
      // Link-local addresses only mean something with their interface
      // (fe80::1%eth1), which another node names differently: skipped.
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(a->ifa_addr);
      if (!IN6_IS_ADDR_LINKLOCAL(&in6->sin6_addr) && inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text) != nullptr)
        v6 = text;
    }
  }
  freeifaddrs(list);
  if (!v4.empty()) return v4;
  if (!v6.empty()) return v6;
  if (interface.empty()) return std::string("127.0.0.1");
  if (!seen) return Status::error("dw_network: this node has no interface '" + interface + "'");
  return Status::error("dw_network: interface '" + interface +
                       "' has no IPv4 address and no IPv6 address other than link-local on this node");
}

}  // namespace goldminer
