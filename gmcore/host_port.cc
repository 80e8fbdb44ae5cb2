#include "gmcore/host_port.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace goldminer {

Expected<HostPort> parse_host_port(const std::string& text, const std::string& what) {
  HostPort hp;
  size_t colon;
  if (!text.empty() && text[0] == '[') {
    size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return Status::error(what + ": invalid address '" + text + "': expected [IPV6]:PORT");
    hp.host = text.substr(1, close - 1);
    colon = close + 1;
  } else {
    colon = text.rfind(':');
    if (colon == std::string::npos || colon == 0 || text.find(':') != colon ||
        text.find_first_of(" \t,;/\\'\"") != std::string::npos)
      return Status::error(what + ": invalid address '" + text + "': expected HOST:PORT");
    hp.host = text.substr(0, colon);
  }
  hp.port = text.substr(colon + 1);
  if (hp.port.empty() || hp.port.size() > 5 || hp.port.find_first_not_of("0123456789") != std::string::npos ||
      std::stoul(hp.port) > 65535)
    return Status::error(what + ": invalid port '" + hp.port + "' in '" + text + "': expected 0 to 65535");
  return hp;
}

std::string host_port_text(const std::string& host, int port) {
  const std::string h = host.find(':') == std::string::npos ? host : "[" + host + "]";
  return h + ":" + std::to_string(port);
}

Expected<std::string> local_address_toward(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(host.c_str(), "9", &hints, &found); rc != 0)
    return Status::error("cannot resolve '" + host + "': " + gai_strerror(rc));
  std::string why = "no address";
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    sockaddr_storage local{};
    socklen_t len = sizeof local;
    if (connect(fd, a->ai_addr, a->ai_addrlen) != 0 || getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0) {
      why = std::strerror(errno);
      close(fd);
      continue;
    }
    close(fd);
    char text[INET6_ADDRSTRLEN] = "";
    const void* addr = local.ss_family == AF_INET6 ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr)
                                                   : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr);
    inet_ntop(local.ss_family, addr, text, sizeof text);
    freeaddrinfo(found);
    return std::string(text);
  }
  freeaddrinfo(found);
  return Status::error("no route to '" + host + "': " + why);
}

}  // namespace goldminer
