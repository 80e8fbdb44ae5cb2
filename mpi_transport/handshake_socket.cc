#include "mpi_transport/handshake_socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "mpi_transport/transport.h"

namespace goldminer::transport {
namespace {

uint32_t load_le32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

std::string kind_name(uint8_t kind) {
  switch (kind) {
    case 1: return "frame";
    case 2: return "bind";
    case 3: return "attached";
    case 4: return "ready";
    default: return "unknown (" + std::to_string(kind) + ")";
  }
}

}  // namespace

HandshakeSocket::~HandshakeSocket() {
  if (fd_ >= 0) ::close(fd_);
}

Status HandshakeSocket::read(const Limit& limit, size_t max_records, std::vector<Record>* out) {
  size_t taken = 0;
  while (taken < max_records) {
    // Reads exactly what the record being read still lacks, so nothing
    // beyond one record is ever held here.
    size_t want = kRecordHead;
    if (in_.size() >= kRecordHead) {
      const uint32_t length = load_le32(in_.data());
      const uint8_t kind = in_[4];
      const std::optional<size_t> most =
          kind >= 1 && kind <= 4 ? limit(static_cast<RecordKind>(kind)) : std::nullopt;
      if (!most) return Status::error("a record of kind " + kind_name(kind) + " that is not expected now");
      if (length > *most)
        return Status::error("a " + kind_name(kind) + " record of " + std::to_string(length) + " bytes (limit " +
                             std::to_string(*most) + " now)");
      want = kRecordHead + length;
      if (in_.size() == want) {
        out->push_back(Record{static_cast<RecordKind>(kind), std::vector<uint8_t>(in_.begin() + kRecordHead, in_.end())});
        in_.clear();
        ++taken;
        continue;
      }
    }
    const size_t had = in_.size();
    const size_t chunk = std::min<size_t>(want - had, 64 << 10);
    in_.resize(had + chunk);
    const ssize_t n = ::recv(fd_, in_.data() + had, chunk, 0);
    if (n > 0) {
      heard_ = true;
      in_.resize(had + static_cast<size_t>(n));
      continue;
    }
    in_.resize(had);
    if (n == 0) return Status::error("connection closed by the peer");
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    if (errno == EINTR) continue;
    return Status::error(std::string("connection lost: ") + std::strerror(errno));
  }
  return Status();
}

Status HandshakeSocket::write(RecordKind kind, const uint8_t* payload, size_t size) {
  if (size > UINT32_MAX) return Status::error("a record of " + std::to_string(size) + " bytes");
  const uint8_t head[kRecordHead] = {static_cast<uint8_t>(size), static_cast<uint8_t>(size >> 8),
                                     static_cast<uint8_t>(size >> 16), static_cast<uint8_t>(size >> 24),
                                     static_cast<uint8_t>(kind)};
  if (sent_ > 0 && sent_ == out_.size()) {
    out_.clear();
    sent_ = 0;
  }
  out_.insert(out_.end(), head, head + kRecordHead);
  out_.insert(out_.end(), payload, payload + size);
  return flush();
}

Status HandshakeSocket::flush() {
  while (sent_ < out_.size()) {
    const ssize_t n = ::send(fd_, out_.data() + sent_, out_.size() - sent_, MSG_NOSIGNAL);
    if (n > 0) {
      sent_ += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Status();
    return Status::error(std::string("connection lost: ") + std::strerror(errno));
  }
  out_.clear();
  sent_ = 0;
  return Status();
}

Expected<int> listen_socket(const sockaddr_storage& addr, socklen_t length, const std::string& name) {
  const int fd = ::socket(addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::error("ucx: listening on " + name + ": socket: " + std::strerror(errno));
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&addr), length) != 0) {
    const int e = errno;
    ::close(fd);
    if (e == EADDRINUSE)
      return Status::error("ucx: listening on " + name + ": " + kAddressInUse +
                           " (another process listens on that port; choose another, or port 0 for any free one)");
    return Status::error("ucx: listening on " + name + ": " + std::strerror(e));
  }
  if (::listen(fd, SOMAXCONN) != 0) {
    const int e = errno;
    ::close(fd);
    return Status::error("ucx: listening on " + name + ": " + std::strerror(e));
  }
  return fd;
}

Expected<uint16_t> local_port(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    return Status::error(std::string("getsockname: ") + std::strerror(errno));
  // sin_port and sin6_port lie at the same offset.
  return ntohs(reinterpret_cast<const sockaddr_in*>(&a)->sin_port);
}

Expected<int> connect_socket(const sockaddr_storage& addr, socklen_t length, const std::string& name,
                             int timeout_ms) {
  const int fd = ::socket(addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::error("ucx: connecting to " + name + ": socket: " + std::strerror(errno));
  int rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), length);
  if (rc != 0 && errno == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      rc = ::poll(&p, 1, static_cast<int>(std::max<long long>(0, left.count())));
      if (rc < 0 && errno == EINTR) continue;
      break;
    }
    if (rc == 0) {
      ::close(fd);
      return Status::error("ucx: connecting to " + name + ": no answer within " + std::to_string(timeout_ms) + " ms");
    }
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    errno = err;
    rc = err == 0 ? 0 : -1;
  }
  if (rc != 0) {
    const int e = errno;
    ::close(fd);
    return Status::error("ucx: connecting to " + name + ": " + std::strerror(e));
  }
  keepalive_socket(fd);
  return fd;
}

void keepalive_socket(int fd) {
  const int one = 1, idle = 10, interval = 5, count = 3;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
}

std::string sockaddr_text(const void* sockaddr, size_t length) {
  const auto* a = static_cast<const struct sockaddr*>(sockaddr);
  char ip[INET6_ADDRSTRLEN] = "";
  if (a->sa_family == AF_INET && length >= sizeof(sockaddr_in)) {
    const auto* in = static_cast<const sockaddr_in*>(sockaddr);
    inet_ntop(AF_INET, &in->sin_addr, ip, sizeof ip);
    return std::string(ip) + ":" + std::to_string(ntohs(in->sin_port));
  }
  if (a->sa_family == AF_INET6 && length >= sizeof(sockaddr_in6)) {
    const auto* in6 = static_cast<const sockaddr_in6*>(sockaddr);
    inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof ip);
    return "[" + std::string(ip) + "]:" + std::to_string(ntohs(in6->sin6_port));
  }
  return "";
}

std::string host_of(const std::string& ip_port) {
  const size_t colon = ip_port.rfind(':');
  return colon == std::string::npos ? ip_port : ip_port.substr(0, colon);
}

}  // namespace goldminer::transport
