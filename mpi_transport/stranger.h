// A stranger attacking a ucx:// trainer the ways anyone who can reach its
// port can, for the pre-authentication tests (tests/transport_test,
// tests/dataplane_test). Run it in a process of its own: each UCX attempt
// is a UCX context of its own, and the caller measures the trainer's
// process, not this one.
#ifndef GOLDMINER_MPI_TRANSPORT_STRANGER_H_
#define GOLDMINER_MPI_TRANSPORT_STRANGER_H_

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "mpi_transport/handshake_socket.h"

namespace goldminer::transport::testing {

using StrangerClock = std::chrono::steady_clock;

// "127.0.0.1:PORT" of "ucx://127.0.0.1:PORT".
inline sockaddr_in stranger_target(const std::string& address) {
  const std::string hp = address.substr(address.find("://") + 3);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(std::stoi(hp.substr(hp.rfind(':') + 1))));
  inet_pton(AF_INET, hp.substr(0, hp.rfind(':')).c_str(), &sa.sin_addr);
  return sa;
}

// Whether the trainer closed `fd` within `timeout_ms` (EOF or a reset),
// reading and discarding what it sends meanwhile into `*received`.
inline bool closed_by_peer(int fd, int timeout_ms, std::vector<uint8_t>* received) {
  const auto deadline = StrangerClock::now() + std::chrono::milliseconds(timeout_ms);
  uint8_t buf[4096];
  while (StrangerClock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return true;
    if (n > 0 && received != nullptr) received->insert(received->end(), buf, buf + n);
  }
  return false;
}

// Path 1, stock UCX as its documentation says: a client-server endpoint to
// the trainer's address with peer-failure mode, and one active message of
// `bytes` bytes forced eager (UCP_AM_SEND_FLAG_EAGER; UCX_RNDV_THRESH=inf
// in the environment does the same), read from `data`. Whether the trainer
// ended the connection within `timeout_ms`.
inline bool ucx_eager_stranger(const sockaddr_in& to, const void* data, size_t bytes, int timeout_ms) {
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_AM;
  ucp_context_h context = nullptr;
  if (ucp_init(&params, nullptr, &context) != UCS_OK) return false;
  ucp_worker_params_t wp{};
  ucp_worker_h worker = nullptr;
  if (ucp_worker_create(context, &wp, &worker) != UCS_OK) {
    ucp_cleanup(context);
    return false;
  }
  bool failed = false;
  ucp_ep_params_t ep{};
  ep.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR | UCP_EP_PARAM_FIELD_ERR_HANDLER |
                  UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  ep.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
  ep.sockaddr.addr = reinterpret_cast<const sockaddr*>(&to);
  ep.sockaddr.addrlen = sizeof to;
  ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  ep.err_handler.cb = [](void* arg, ucp_ep_h, ucs_status_t) { *static_cast<bool*>(arg) = true; };
  ep.err_handler.arg = &failed;
  ucp_ep_h h = nullptr;
  bool ended = false;
  if (ucp_ep_create(worker, &ep, &h) != UCS_OK) {
    ended = true;  // refused at once
  } else {
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = UCP_AM_SEND_FLAG_EAGER;
    ucs_status_ptr_t req = ucp_am_send_nbx(h, 7, nullptr, 0, data, bytes, &p);
    const auto deadline = StrangerClock::now() + std::chrono::milliseconds(timeout_ms);
    while (!failed && StrangerClock::now() < deadline) {
      ucp_worker_progress(worker);
      if (UCS_PTR_IS_ERR(req)) failed = true;
      if (req != nullptr && !UCS_PTR_IS_ERR(req) && ucp_request_check_status(req) != UCS_INPROGRESS) {
        failed = ucp_request_check_status(req) != UCS_OK;
        if (!failed) break;  // taken: the hole is open
      }
    }
    ended = failed;
    if (req != nullptr && !UCS_PTR_IS_ERR(req)) {
      if (ucp_request_check_status(req) == UCS_INPROGRESS) ucp_request_cancel(worker, req);
      while (ucp_request_check_status(req) == UCS_INPROGRESS) ucp_worker_progress(worker);
      ucp_request_free(req);
    }
    ucp_request_param_t cp{};
    cp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    cp.flags = UCP_EP_CLOSE_FLAG_FORCE;
    ucs_status_ptr_t close = ucp_ep_close_nbx(h, &cp);
    if (close != nullptr && !UCS_PTR_IS_ERR(close)) {
      while (ucp_request_check_status(close) == UCS_INPROGRESS) ucp_worker_progress(worker);
      ucp_request_free(close);
    }
  }
  ucp_worker_destroy(worker);
  ucp_cleanup(context);
  return ended;
}

// Path 2, the trainer's own records, read from its source: a frame record
// announcing `bytes` bytes, then as much of them as the trainer takes.
// Whether it ended the connection within `timeout_ms`.
inline bool record_stranger(const sockaddr_in& to, size_t bytes, int timeout_ms) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || ::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to) != 0) return false;
  const uint32_t n = static_cast<uint32_t>(std::min<size_t>(bytes, UINT32_MAX));
  uint8_t head[kRecordHead] = {static_cast<uint8_t>(n), static_cast<uint8_t>(n >> 8), static_cast<uint8_t>(n >> 16),
                               static_cast<uint8_t>(n >> 24), static_cast<uint8_t>(RecordKind::kFrame)};
  (void)::send(fd, head, sizeof head, MSG_NOSIGNAL);
  std::vector<uint8_t> chunk(1 << 20, 0x5a);
  fcntl(fd, F_SETFL, O_NONBLOCK);
  for (int i = 0; i < 64; ++i)
    if (::send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL) <= 0) break;
  const bool ended = closed_by_peer(fd, timeout_ms, nullptr);
  ::close(fd);
  return ended;
}

// Path 3, `count` connections at once that speak the handshake as a
// stranger can: a frame record as a Hello would be, then whatever the
// trainer sends. Returns how many it ended within `timeout_ms`; `*binds`
// counts records of kind bind received (the trainer's UCP address: none
// may ever reach a stranger).
inline int talking_strangers(const sockaddr_in& to, int count, int timeout_ms, int* binds) {
  std::vector<int> fds;
  for (int i = 0; i < count; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || ::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to) != 0) continue;
    std::vector<uint8_t> hello(120, 'h');
    uint8_t head[kRecordHead] = {static_cast<uint8_t>(hello.size()), 0, 0, 0, static_cast<uint8_t>(RecordKind::kFrame)};
    (void)::send(fd, head, sizeof head, MSG_NOSIGNAL);
    (void)::send(fd, hello.data(), hello.size(), MSG_NOSIGNAL);
    fds.push_back(fd);
  }
  int ended = 0;
  *binds = 0;
  for (int fd : fds) {
    std::vector<uint8_t> got;
    if (closed_by_peer(fd, timeout_ms, &got)) ++ended;
    for (size_t at = 0; at + kRecordHead <= got.size();) {
      const uint32_t len = got[at] | got[at + 1] << 8 | got[at + 2] << 16 | uint32_t{got[at + 3]} << 24;
      if (got[at + 4] == static_cast<uint8_t>(RecordKind::kBind)) ++*binds;
      at += kRecordHead + len;
    }
    ::close(fd);
  }
  return ended;
}

// All three paths against the trainer at `address`, `count` connections
// in all (a third each), each announcing `bytes`: exits with how many the
// trainer did not end, plus 100 if a bind record reached a stranger.
inline int stranger_attack(const std::string& address, int count, size_t bytes) {
  const sockaddr_in to = stranger_target(address);
  void* big = mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (big == MAP_FAILED) return 255;
  int missed = 0;
  const int third = count / 3;
  for (int i = 0; i < third; ++i)
    if (!ucx_eager_stranger(to, big, bytes, 10000)) ++missed;
  for (int i = 0; i < third; ++i)
    if (!record_stranger(to, bytes, 10000)) ++missed;
  int binds = 0;
  const int talking = count - 2 * third;
  missed += talking - talking_strangers(to, talking, 15000, &binds);
  munmap(big, bytes);
  return std::min(missed + (binds > 0 ? 100 : 0), 254);
}

}  // namespace goldminer::transport::testing

#endif  // GOLDMINER_MPI_TRANSPORT_STRANGER_H_
