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

// The address of this machine's interface that packets to `host` leave
// from (the route's source address: a UDP socket connected there, no
// packet sent), as text. Errors name `host` and the cause.
Expected<std::string> local_address_toward(const std::string& host);

}  // namespace goldminer

#endif  // GOLDMINER_GMCORE_HOST_PORT_H_
