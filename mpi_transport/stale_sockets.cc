#include "mpi_transport/stale_sockets.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace goldminer::transport {
namespace {

// The port of an AF_INET/AF_INET6 address; 0 else.
uint16_t port_of(const sockaddr_storage& a) {
  if (a.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(a).sin_port);
  if (a.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(a).sin6_port);
  return 0;
}

}  // namespace

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

std::vector<AcceptedSocket> accepted_sockets(uint16_t port) {
  std::vector<AcceptedSocket> found;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return found;
  const int own = dirfd(dir);
  while (const dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == own) continue;
    struct stat st {};
    if (fstat(static_cast<int>(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    int value = 0;
    socklen_t len = sizeof value;
    if (getsockopt(static_cast<int>(fd), SOL_SOCKET, SO_PROTOCOL, &value, &len) != 0 || value != IPPROTO_TCP)
      continue;
    len = sizeof value;
    if (getsockopt(static_cast<int>(fd), SOL_SOCKET, SO_ACCEPTCONN, &value, &len) != 0 || value != 0) continue;
    sockaddr_storage local{}, peer{};
    socklen_t local_len = sizeof local, peer_len = sizeof peer;
    if (getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&local), &local_len) != 0 ||
        port_of(local) != port)
      continue;
    if (getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) continue;
    found.push_back({static_cast<int>(fd), st.st_ino, sockaddr_text(&peer, peer_len)});
  }
  closedir(dir);
  return found;
}

bool reset_connection(const AcceptedSocket& s) {
  // A duplicate holds the socket while it is checked and reset, whatever
  // the descriptor's owner does with `s.fd` meanwhile.
  const int dup = fcntl(s.fd, F_DUPFD_CLOEXEC, 0);
  if (dup < 0) return false;
  struct stat st {};
  bool reset = false;
  if (fstat(dup, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_ino == s.inode) {
    sockaddr unspec{};
    unspec.sa_family = AF_UNSPEC;
    reset = connect(dup, &unspec, sizeof unspec) == 0;
  }
  close(dup);
  return reset;
}

std::vector<std::string> StaleSocketSweeper::sweep(const std::set<std::string>& known, Clock::time_point now) {
  std::vector<std::string> reset;
  std::map<ino_t, Clock::time_point> still;
  for (const AcceptedSocket& s : accepted_sockets(port_)) {
    if (known.count(s.peer) != 0) continue;
    auto it = unknown_since_.find(s.inode);
    const Clock::time_point since = it == unknown_since_.end() ? now : it->second;
    if (now - since >= timeout_ && reset_connection(s)) {
      reset.push_back(s.peer);
      continue;
    }
    still[s.inode] = since;
  }
  unknown_since_ = std::move(still);
  return reset;
}

}  // namespace goldminer::transport
