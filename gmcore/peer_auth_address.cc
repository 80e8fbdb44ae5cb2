// dialed_address and names_this_session (gmcore/peer_auth.h): the address
// both handshake proofs are bound to, and the trainer's check that a
// worker dialed this session and not a relay.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>

#include "gmcore/host_port.h"
#include "gmcore/net_interface.h"
#include "gmcore/peer_auth.h"

namespace goldminer::auth {
namespace {

constexpr size_t kMaxTarget = 256;  // longer than any scheme://[IPv6]:PORT

struct Split {
  std::string scheme, rest;
};

bool split_scheme(const std::string& address, Split* out) {
  const size_t at = address.find("://");
  if (at == std::string::npos || at == 0) return false;
  out->scheme = address.substr(0, at);
  out->rest = address.substr(at + 3);
  return true;
}

// An IP address in binary (4 or 16 bytes), from numeric text only: no name
// is ever resolved on the trainer's side of the check.
struct Ip {
  int family = AF_UNSPEC;
  uint8_t bytes[16] = {};
  bool operator==(const Ip& o) const {
    return family == o.family && std::memcmp(bytes, o.bytes, family == AF_INET ? 4 : 16) == 0;
  }
};

bool parse_ip(const std::string& text, Ip* ip) {
  if (inet_pton(AF_INET, text.c_str(), ip->bytes) == 1) {
    ip->family = AF_INET;
    return true;
  }
  if (inet_pton(AF_INET6, text.c_str(), ip->bytes) == 1) {
    ip->family = AF_INET6;
    return true;
  }
  return false;
}

bool is_wildcard(const Ip& ip) {
  const int n = ip.family == AF_INET ? 4 : 16;
  for (int i = 0; i < n; ++i)
    if (ip.bytes[i] != 0) return false;
  return true;
}

bool is_loopback(const Ip& ip) {
  if (ip.family == AF_INET) return ip.bytes[0] == 127;
  static const uint8_t kLoop6[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  return std::memcmp(ip.bytes, kLoop6, 16) == 0;
}

bool is_this_hosts(const Ip& ip) {
  if (is_loopback(ip)) return true;
  sockaddr_storage ss{};
  ss.ss_family = static_cast<sa_family_t>(ip.family);
  if (ip.family == AF_INET)
    std::memcpy(&reinterpret_cast<sockaddr_in*>(&ss)->sin_addr, ip.bytes, 4);
  else
    std::memcpy(&reinterpret_cast<sockaddr_in6*>(&ss)->sin6_addr, ip.bytes, 16);
  return !interface_holding(ss).empty();
}

}  // namespace

Expected<std::string> dialed_address(const std::string& address) {
  Split s;
  if (!split_scheme(address, &s)) return Status::error("trainer address '" + address + "': expected SCHEME://...");
  if (s.scheme != "ucx") return address;
  auto hp = parse_host_port(s.rest, "trainer address");
  if (!hp.ok()) return hp.status();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(hp->host.c_str(), hp->port.c_str(), &hints, &res);
  if (rc != 0) return Status::error("trainer address '" + address + "': " + gai_strerror(rc));
  char ip[INET6_ADDRSTRLEN] = "";
  const void* b = res->ai_family == AF_INET
                      ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr)
                      : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(res->ai_addr)->sin6_addr);
  const bool ok = (res->ai_family == AF_INET || res->ai_family == AF_INET6) &&
                  inet_ntop(res->ai_family, b, ip, sizeof ip) != nullptr;
  freeaddrinfo(res);
  if (!ok) return Status::error("trainer address '" + address + "': resolves to no IPv4 or IPv6 address");
  return "ucx://" + host_port_text(ip, std::stoi(hp->port));
}

Status names_this_session(const std::string& target, const std::string& own_address) {
  const auto refuse = [&](const std::string& why) {
    std::string shown;  // the worker's text, bounded and printable for the log
    for (size_t i = 0; i < target.size() && i < 80; ++i)
      shown += (target[i] >= 0x20 && target[i] < 0x7f) ? target[i] : '?';
    if (target.size() > 80) shown += "...";
    return Status::error("the worker dialed '" + shown + "', not this session (" + own_address + "): " + why +
                         " (a handshake relayed through another address, or a NAT between worker and trainer)");
  };
  if (target.empty()) return refuse("no address");
  if (target.size() > kMaxTarget) return refuse("longer than " + std::to_string(kMaxTarget) + " bytes");
  Split t, own;
  if (!split_scheme(target, &t) || !split_scheme(own_address, &own)) return refuse("not SCHEME://...");
  if (t.scheme != own.scheme) return refuse("another transport");
  if (own.scheme != "ucx") return target == own_address ? Status() : refuse("another address");
  auto thp = parse_host_port(t.rest, "worker's target");
  auto ohp = parse_host_port(own.rest, "session address");
  if (!thp.ok() || !ohp.ok()) return refuse("not HOST:PORT");
  if (std::stoul(thp->port) != std::stoul(ohp->port)) return refuse("another port");
  Ip tip, oip;
  if (!parse_ip(thp->host, &tip)) return refuse("not a numeric IP address");
  if (!parse_ip(ohp->host, &oip)) return refuse("this session's address is not numeric");
  if (tip == oip) return Status();
  if (is_wildcard(oip) && tip.family == oip.family && is_this_hosts(tip)) return Status();
  return refuse(is_wildcard(oip) ? "not an address of this host" : "another IP address");
}

}  // namespace goldminer::auth
