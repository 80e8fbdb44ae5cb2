#include "gmcore/net_interface.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <cstring>

namespace goldminer {

std::string interface_holding(const sockaddr_storage& address) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string name;
  for (ifaddrs* a = list; a != nullptr && name.empty(); a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != address.ss_family) continue;
    if (address.ss_family == AF_INET) {
      const auto* mine = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
      const auto* want = reinterpret_cast<const sockaddr_in*>(&address);
      if (mine->sin_addr.s_addr == want->sin_addr.s_addr && want->sin_addr.s_addr != htonl(INADDR_ANY)) name = a->ifa_name;
    } else if (address.ss_family == AF_INET6) {
      const auto* mine = reinterpret_cast<const sockaddr_in6*>(a->ifa_addr);
      const auto* want = reinterpret_cast<const sockaddr_in6*>(&address);
      if (std::memcmp(&mine->sin6_addr, &want->sin6_addr, sizeof want->sin6_addr) == 0 &&
          !IN6_IS_ADDR_UNSPECIFIED(&want->sin6_addr))
        name = a->ifa_name;
    }
  }
  freeifaddrs(list);
  return name;
}

}  // namespace goldminer
