#include "gmcore/host_port.h"

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

}  // namespace goldminer
