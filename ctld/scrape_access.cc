#include "ctld/scrape_access.h"

#include <arpa/inet.h>
#include <sys/stat.h>

#include <cstring>
#include <fstream>

namespace goldminer {

namespace {

constexpr char kBearerScheme[] = "Bearer ";
constexpr size_t kMinTokenLength = 16;

// Equal strings, in a time that depends on their lengths only.
bool same_secret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i % (b.empty() ? 1 : b.size())]);
  return diff == 0 && !b.empty();
}

// The address's bytes (4 or 16) and whether it is IPv6; false when
// `text` is not a numeric address. An IPv4-mapped IPv6 address is IPv4.
bool address_bytes(const std::string& text, bool* v6, unsigned char* bytes) {
  in6_addr a6{};
  in_addr a4{};
  if (::inet_pton(AF_INET, text.c_str(), &a4) == 1) {
    *v6 = false;
    std::memcpy(bytes, &a4, 4);
    return true;
  }
  if (::inet_pton(AF_INET6, text.c_str(), &a6) != 1) return false;
  static const unsigned char kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::memcmp(&a6, kMapped, 12) == 0) {
    *v6 = false;
    std::memcpy(bytes, reinterpret_cast<const unsigned char*>(&a6) + 12, 4);
    return true;
  }
  *v6 = true;
  std::memcpy(bytes, &a6, 16);
  return true;
}

bool prefix_matches(const unsigned char* a, const unsigned char* b, int bits) {
  const int whole = bits / 8, rest = bits % 8;
  if (std::memcmp(a, b, static_cast<size_t>(whole)) != 0) return false;
  if (rest == 0) return true;
  const unsigned char mask = static_cast<unsigned char>(0xff << (8 - rest));
  return (a[whole] & mask) == (b[whole] & mask);
}

}  // namespace

Expected<ScrapeAccess> ScrapeAccess::make(const std::string& token_file, const std::string& allow) {
  ScrapeAccess s;
  if (!token_file.empty()) {
    const std::string what = "--metrics-token-file " + token_file;
    struct stat st {};
    if (::stat(token_file.c_str(), &st) != 0) return Status::error(what + ": " + std::strerror(errno));
    if ((st.st_mode & 077) != 0)
      return Status::error(what + ": readable or writable by group or others (mode " +
                           std::to_string((st.st_mode >> 6) & 7) + std::to_string((st.st_mode >> 3) & 7) +
                           std::to_string(st.st_mode & 7) + "): chmod 600 it");
    std::ifstream in(token_file);
    if (!in) return Status::error(what + ": cannot read it");
    std::getline(in, s.token_);
    while (!s.token_.empty() && (s.token_.back() == '\r' || s.token_.back() == ' ')) s.token_.pop_back();
    if (s.token_.size() < kMinTokenLength || s.token_.find_first_of(" \t") != std::string::npos)
      return Status::error(what + ": its first line must be a token of at least " + std::to_string(kMinTokenLength) +
                           " characters without blanks");
  }
  size_t at = 0;
  while (at < allow.size()) {
    size_t comma = allow.find(',', at);
    if (comma == std::string::npos) comma = allow.size();
    const std::string entry = allow.substr(at, comma - at);
    at = comma + 1;
    const size_t slash = entry.find('/');
    Net n;
    const std::string addr = entry.substr(0, slash);
    bool ok = address_bytes(addr, &n.v6, n.bytes);
    const int max = n.v6 ? 128 : 32;
    n.prefix = max;
    if (ok && slash != std::string::npos) {
      const std::string bits = entry.substr(slash + 1);
      ok = !bits.empty() && bits.size() <= 3 && bits.find_first_not_of("0123456789") == std::string::npos &&
           std::stoi(bits) <= max;
      if (ok) n.prefix = std::stoi(bits);
    }
    if (!ok)
      return Status::error("--metrics-allow: invalid value '" + entry.substr(0, 80) +
                           "': expected an address or prefix (A.B.C.D[/N] or an IPv6 address[/N])");
    s.nets_.push_back(n);
  }
  return s;
}

bool ScrapeAccess::admits(const HttpRequest& request) const {
  if (!token_.empty() && request.authorization.rfind(kBearerScheme, 0) == 0 &&
      same_secret(request.authorization.substr(sizeof kBearerScheme - 1), token_))
    return true;
  bool v6 = false;
  unsigned char peer[16] = {};
  if (nets_.empty() || !address_bytes(request.peer, &v6, peer)) return false;
  for (const Net& n : nets_)
    if (n.v6 == v6 && prefix_matches(peer, n.bytes, n.prefix)) return true;
  return false;
}

}  // namespace goldminer
