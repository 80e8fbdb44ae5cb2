// Helpers shared by the transports' tests (tests/transport_test): polling
// an endpoint for events, sending while the other side polls, test frames,
// a TCP connection to a port on 127.0.0.1, the sockets this process listens
// on, a process's resident memory, a host memory that records what it
// handed out. Strangers: stranger.h.
#ifndef GOLDMINER_MPI_TRANSPORT_TEST_UTIL_H_
#define GOLDMINER_MPI_TRANSPORT_TEST_UTIL_H_

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "mpi_transport/transport.h"

namespace goldminer::transport::testing {

// The TCP sockets this process listens on, as /proc/net/tcp and tcp6 write
// their local addresses ("0100007F:1F90": the address, hex, then the
// port): the LISTEN lines (state 0A) whose socket inode is one of this
// process's descriptors.
inline std::vector<std::string> own_listening_sockets() {
  std::set<std::string> inodes;
  for (const auto& fd : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const std::string target = std::filesystem::read_symlink(fd.path(), ec).string();
    if (!ec && target.rfind("socket:[", 0) == 0) inodes.insert(target.substr(8, target.size() - 9));
  }
  std::vector<std::string> found;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
      std::istringstream f(line);
      std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
      f >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >> inode;
      if (state == "0A" && inodes.count(inode)) found.push_back(local);
    }
  }
  return found;
}

// The port of one of own_listening_sockets().
inline int listening_port(const std::string& local) {
  return std::stoi(local.substr(local.rfind(':') + 1), nullptr, 16);
}

// Why an endpoint could not be opened (listen, connect); "" when it was.
inline std::string open_error(const Expected<std::unique_ptr<Endpoint>>& endpoint) {
  return endpoint.ok() ? "" : endpoint.status().message();
}

// Polls `ep` until an event of `kind` arrives (other kinds are skipped).
inline Event wait_for(Endpoint* ep, Event::Kind kind, int timeout_ms = 10000) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    auto e = ep->poll(50);
    EXPECT_TRUE(e.ok()) << e.status().message();
    if (e.ok() && e->has_value() && (*e)->kind == kind) return std::move(**e);
  }
  ADD_FAILURE() << "no event of kind " << static_cast<int>(kind) << " within " << timeout_ms << " ms";
  return Event{};
}

// Sends from `from` on a thread while `server` is polled (a UCX client's
// first send waits for the server to accept the connection); returns the
// events the server saw meanwhile.
inline std::vector<Event> send_while_polling(Endpoint* from, const uint8_t* data, size_t size, Endpoint* server) {
  std::atomic<bool> done{false};
  Status status;
  std::thread t([&] {
    status = from->send(0, data, size);
    done = true;
  });
  std::vector<Event> seen;
  while (!done) {
    auto e = server->poll(10);
    if (e.ok() && e->has_value()) seen.push_back(std::move(**e));
  }
  t.join();
  EXPECT_TRUE(status.ok()) << status.message();
  return seen;
}

// Polls `ep` until an event of `kind`, first looking in `seen`.
inline Event next_of(std::vector<Event>* seen, Endpoint* ep, Event::Kind kind) {
  for (auto it = seen->begin(); it != seen->end(); ++it) {
    if (it->kind == kind) {
      Event e = std::move(*it);
      seen->erase(it);
      return e;
    }
  }
  return wait_for(ep, kind);
}

// Polls `server` and `client` in turns until `client` sees an event
// other than kConnected (a frame `server` sent it, or its drop): a
// trainer's first frames to a worker wait for the worker's address.
inline Event next_at_client(Endpoint* server, Endpoint* client, int timeout_ms = 20000) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    (void)server->poll(1);
    auto e = client->poll(10);
    EXPECT_TRUE(e.ok());
    if (e.ok() && e->has_value() && (*e)->kind != Event::Kind::kConnected) return std::move(**e);
  }
  ADD_FAILURE() << "no event at the client within " << timeout_ms << " ms";
  return {};
}

// `o` for a server whose test has no handshake: every peer is trusted as
// it connects (Options::trust_on_connect).
inline Options trusting(Options o = {}) {
  o.trust_on_connect = true;
  return o;
}

inline std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 31 + (i >> 12));
  return v;
}

inline int connect_tcp(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  return fd;
}

// VmRSS of process `pid` (0: this one) in KiB, from /proc/PID/status; -1
// if it cannot be read.
inline long rss_kib(pid_t pid = 0) {
  std::ifstream status(pid == 0 ? std::string("/proc/self/status") : "/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::strtol(line.c_str() + 6, nullptr, 10);
  return -1;
}

// A HostMemory that records what it handed out (and says it is pinned when
// told to), so a test can check where frames were received.
class RecordingMemory final : public HostMemory {
 public:
  explicit RecordingMemory(bool pinned = false) : pinned_(pinned) {}
  uint8_t* allocate(size_t bytes) override {
    void* p = nullptr;
    if (posix_memalign(&p, 64, bytes) != 0) return nullptr;
    std::lock_guard<std::mutex> lock(mu_);
    live_[static_cast<uint8_t*>(p)] = bytes;
    ++allocations_;
    return static_cast<uint8_t*>(p);
  }
  void release(uint8_t* data, size_t bytes) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = live_.find(data);
      EXPECT_TRUE(it != live_.end() && it->second == bytes) << "released what was not allocated so";
      if (it != live_.end()) live_.erase(it);
      ++releases_;
    }
    std::free(data);
  }
  bool pinned() const override { return pinned_; }
  std::string describe() const override { return "recording"; }
  // Whether [data, data + size) lies in a buffer handed out and not given back.
  bool owns(const uint8_t* data, size_t size) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.upper_bound(const_cast<uint8_t*>(data));
    if (it == live_.begin()) return false;
    --it;
    return data + size <= it->first + it->second;
  }
  size_t allocations() const {
    std::lock_guard<std::mutex> lock(mu_);
    return allocations_;
  }
  size_t releases() const {
    std::lock_guard<std::mutex> lock(mu_);
    return releases_;
  }

 private:
  bool pinned_;
  mutable std::mutex mu_;
  std::map<uint8_t*, size_t> live_;
  size_t allocations_ = 0, releases_ = 0;
};

}  // namespace goldminer::transport::testing

#endif  // GOLDMINER_MPI_TRANSPORT_TEST_UTIL_H_
