#include "mpi_transport/transport.h"

#include "gm_config.h"
#include "mpi_transport/transport_impl.h"

namespace goldminer::transport {
namespace {

struct Parsed {
  std::string scheme, rest;
};

Expected<Parsed> parse(const std::string& address) {
  const size_t sep = address.find("://");
  if (sep == std::string::npos)
    return Status::error("transport: address '" + address + "': expected ucx://HOST:PORT, mpi:// or local://NAME");
  Parsed p{address.substr(0, sep), address.substr(sep + 3)};
  if (p.scheme != "ucx" && p.scheme != "mpi" && p.scheme != "local")
    return Status::error("transport: address '" + address + "': unknown transport '" + p.scheme +
                         "' (valid: ucx, mpi, local)");
  return p;
}

Status not_built(const std::string& scheme) {
  return Status::error("transport: " + scheme + " support was not built (configure found no " +
                       (scheme == "ucx" ? "UCX" : "MPI") + ")");
}

}  // namespace

Status Endpoint::send_async(PeerId peer, const uint8_t* data, size_t size, std::function<void(Status)> done) {
  Status s = send(peer, data, size);
  if (!s.ok()) return s;
  done(Status());
  return Status();
}

std::string peer_text(const std::string& s, size_t max) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  size_t i = 0;
  for (; i < s.size() && out.size() < max; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  if (i < s.size()) out += "... (" + std::to_string(s.size()) + " bytes)";
  return out;
}

Expected<std::string> scheme_of(const std::string& address) {
  auto p = parse(address);
  if (!p.ok()) return p.status();
  return p->scheme;
}

namespace {

// The endpoint of `address` from the transport its scheme names: its
// listener (`listening`) or a connection to it.
Expected<std::unique_ptr<Endpoint>> open(const std::string& address, const Options& options, bool listening) {
  auto p = parse(address);
  if (!p.ok()) return p.status();
  if (p->scheme == "local") return listening ? listen_local(p->rest, options) : connect_local(p->rest, options);
#ifdef GOLDMINER_HAVE_UCX
  if (p->scheme == "ucx") return open_ucx(p->rest, options, listening);
#endif
#ifdef GOLDMINER_HAVE_MPI
  if (p->scheme == "mpi") return listening ? listen_mpi(options) : connect_mpi(options);
#endif
  return not_built(p->scheme);
}

}  // namespace

Expected<std::unique_ptr<Endpoint>> listen(const std::string& address, const Options& options) {
  return open(address, options, true);
}

Expected<std::unique_ptr<Endpoint>> connect(const std::string& address, const Options& options) {
  return open(address, options, false);
}

}  // namespace goldminer::transport
