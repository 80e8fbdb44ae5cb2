// A TCP address as users write it: HOST:PORT, or [IPV6]:PORT.
#ifndef GOLDMINER_GMCORE_HOST_PORT_H_
#define GOLDMINER_GMCORE_HOST_PORT_H_

#include <string>

#include "gmcore/status.h"

namespace goldminer {

struct HostPort {
  std::string host;  // without IPv6 brackets
  std::string port;  // 0..65535
};

// `what` names the setting in errors: "WHAT: invalid address 'X': ...".
Expected<HostPort> parse_host_port(const std::string& text, const std::string& what);

// HOST:PORT, or [HOST]:PORT when HOST is an IPv6 address (has a colon).
std::string host_port_text(const std::string& host, int port);

}  // namespace goldminer

#endif  // GOLDMINER_GMCORE_HOST_PORT_H_
