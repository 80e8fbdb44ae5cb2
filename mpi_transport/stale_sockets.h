// Connections accepted on a listening port that never became a connection
// of the listener's owner, and resetting them.
//
// Why: UCX 1.13's TCP connection manager (the ucx transport's listener)
// reads a connection request into a 2 KiB buffer and trusts its length
// field. Bytes that are not a request, more than the buffer holds, leave
// the accepted socket unread and never closed: it stays open, in
// CLOSE_WAIT once the sender has gone, until the process exits. A sender
// that opens a connection and sends nothing, or half a request, holds one
// the same way. The trainer cannot reach that socket through UCX, so it
// finds it (/proc/self/fd: a TCP socket whose local port is the listener's,
// with a peer that is none of its connections for longer than a timeout)
// and resets it (connect(AF_UNSPEC): the kernel sends a RST and reports
// ECONNRESET on the socket). UCX then sees the error event on its own
// socket and closes it itself, on its usual path for a failed request.
//
// Resetting works on a duplicate of the descriptor whose socket inode was
// checked first, so a descriptor number that its owner closed and reused
// meanwhile is never touched. Not thread-safe; Linux only.
#ifndef GOLDMINER_MPI_TRANSPORT_STALE_SOCKETS_H_
#define GOLDMINER_MPI_TRANSPORT_STALE_SOCKETS_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace goldminer::transport {

// A TCP socket of this process accepted on a listening port.
struct AcceptedSocket {
  int fd = -1;
  ino_t inode = 0;
  std::string peer;  // "IP:PORT", as sockaddr_text() writes it
};

// "IP:PORT" ("[IP]:PORT" for IPv6) of an AF_INET/AF_INET6 address; "" else.
std::string sockaddr_text(const void* sockaddr, size_t length);

// This process's connected TCP sockets whose local port is `port` (not the
// listening socket itself).
std::vector<AcceptedSocket> accepted_sockets(uint16_t port);

// Resets the connection of `s` if `s.fd` still holds the socket `s.inode`;
// false if it does not (closed or reused meanwhile) or the reset failed.
bool reset_connection(const AcceptedSocket& s);

class StaleSocketSweeper {
 public:
  using Clock = std::chrono::steady_clock;

  StaleSocketSweeper(uint16_t port, std::chrono::milliseconds timeout) : port_(port), timeout_(timeout) {}

  // Resets every socket accepted on the port whose peer has not been in
  // `known` (the owner's connections, "IP:PORT") since it was first seen,
  // `timeout` ago or more; returns their peers.
  std::vector<std::string> sweep(const std::set<std::string>& known, Clock::time_point now);

 private:
  uint16_t port_;
  std::chrono::milliseconds timeout_;
  std::map<ino_t, Clock::time_point> unknown_since_;
};

}  // namespace goldminer::transport

#endif  // GOLDMINER_MPI_TRANSPORT_STALE_SOCKETS_H_
