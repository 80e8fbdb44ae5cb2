// The ucx:// transport's own TCP connection between a trainer and each
// worker, and what travels on it.
//
// Why: UCX's listener accepts every connection, assembles whole eager
// messages of any announced size for any endpoint before a handler can
// refuse them, and holds sockets it cannot parse until the process exits
// (UCX 1.13). So nothing of a stranger reaches UCX: the trainer listens on a
// plain socket of its own, the authentication (the owner's Hello,
// Challenge and Auth frames) runs on it as small records read into bounded
// buffers, and only once the owner has authenticated the peer does the
// trainer send it the UCP worker address its UCX endpoints need. The
// connection then stays open for the peer's life: its end (EOF, a reset,
// keepalive) is the peer's loss.
//
// A record: its payload's length (4 bytes, little-endian), its kind (one
// byte), the payload. Each side tells the reader, per kind, the longest
// payload it takes now (or that it takes none): a record that announces
// more, or a kind not expected, ends the connection before any buffer of
// the announced size exists. A reader keeps at most one record's head and
// payload. Not thread-safe; Linux.
#ifndef GOLDMINER_MPI_TRANSPORT_HANDSHAKE_SOCKET_H_
#define GOLDMINER_MPI_TRANSPORT_HANDSHAKE_SOCKET_H_

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gmcore/status.h"

namespace goldminer::transport {

enum class RecordKind : uint8_t {
  kFrame = 1,    // an owner's frame before the UCX endpoints exist (small)
  kBind = 2,     // trainer -> worker, once authenticated: BindHead + its UCP worker address
  kAttached = 3,  // worker -> trainer, after its first UCX message: the socket's frames end here
  kReady = 4,    // trainer -> worker: its endpoint to the worker exists; use UCX from here
};

struct Record {
  RecordKind kind = RecordKind::kFrame;
  std::vector<uint8_t> payload;
};

constexpr size_t kRecordHead = 5;

class HandshakeSocket {
 public:
  // Takes `fd` (a connected, non-blocking stream socket) and closes it.
  explicit HandshakeSocket(int fd) : fd_(fd) {}
  ~HandshakeSocket();
  HandshakeSocket(const HandshakeSocket&) = delete;
  HandshakeSocket& operator=(const HandshakeSocket&) = delete;

  int fd() const { return fd_; }

  // The longest payload a record of `kind` may have now; nothing: that
  // kind is not taken now.
  using Limit = std::function<std::optional<size_t>(RecordKind)>;

  // Reads what the socket has, without blocking, and appends up to
  // `max_records` whole records to `out` (what is left stays in the
  // kernel). An error names why the connection is over: closed by the
  // peer, a reset, or a record that breaks `limit`.
  Status read(const Limit& limit, size_t max_records, std::vector<Record>* out);

  // Queues one record and writes what the socket takes now; the rest goes
  // out with flush().
  Status write(RecordKind kind, const uint8_t* payload, size_t size);
  Status flush();
  bool wants_write() const { return sent_ < out_.size(); }

  // Whether any byte has come from the peer.
  bool heard() const { return heard_; }

 private:
  int fd_;
  std::vector<uint8_t> in_;   // the record being read: head, then payload
  std::vector<uint8_t> out_;  // records not yet written, from sent_
  size_t sent_ = 0;
  bool heard_ = false;
};

// A non-blocking listening TCP socket at `addr`; an error names the
// address ("in use" for EADDRINUSE).
Expected<int> listen_socket(const sockaddr_storage& addr, socklen_t length, const std::string& name);

// The local "IP:PORT" of a bound socket.
Expected<uint16_t> local_port(int fd);

// Connects to `addr` within `timeout_ms`; the socket is non-blocking and
// keeps its connection alive (keepalive_socket).
Expected<int> connect_socket(const sockaddr_storage& addr, socklen_t length, const std::string& name,
                             int timeout_ms);

// TCP_NODELAY, and keepalive probes that end a connection to a peer whose
// node is gone within about 25 s.
void keepalive_socket(int fd);

// "IP:PORT" ("[IP]:PORT" for IPv6) of an AF_INET/AF_INET6 address; "" else.
std::string sockaddr_text(const void* sockaddr, size_t length);

// The IP of "IP:PORT" / "[IP]:PORT" (what sockaddr_text writes).
std::string host_of(const std::string& ip_port);

}  // namespace goldminer::transport

#endif  // GOLDMINER_MPI_TRANSPORT_HANDSHAKE_SOCKET_H_
