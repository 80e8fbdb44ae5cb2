// Tests of the ucx:// transport beyond the common ones (transport_test.cc):
// frames through the worker's shared-memory arena, frames built in room it
// reserved, a worker killed with SIGKILL and junk, silent and UCX
// connections on the trainer's port.
#include "mpi_transport/transport.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <memory>
#include <set>
#include <thread>
#include <string>
#include <vector>

#include "gm_config.h"
#include "mpi_transport/test_util.h"

namespace goldminer::transport {
namespace {

#ifdef GOLDMINER_HAVE_UCX
using testing::connect_tcp;
using testing::next_of;
using testing::pattern;
using testing::send_while_polling;
using testing::trusting;
using testing::wait_for;

// A ucx server on lo and a client of it with a 1 MiB arena, set in `*o`
// (which the test reuses to connect more clients).
void connect_with_arena(Options* o, std::unique_ptr<Endpoint>* server, std::unique_ptr<Endpoint>* client) {
  setenv("UCX_NET_DEVICES", "lo", 1);
  auto s = listen("ucx://127.0.0.1:0", trusting());
  ASSERT_TRUE(s.ok()) << s.status().message();
  o->shm_arena_bytes = 1 << 20;
  auto c = connect((*s)->address(), *o);
  ASSERT_TRUE(c.ok()) << c.status().message();
  *server = std::move(s).value();
  *client = std::move(c).value();
}

// Over ucx on one node large frames go through the worker's arena, small
// ones by copy; when the trainer holds the whole arena frames go by copy,
// in order with the rest; without an arena everything is copied.
TEST(UcxTest, LargeFramesGoThroughSharedMemory) {
  Options o;
  std::unique_ptr<Endpoint> server, client;
  ASSERT_NO_FATAL_FAILURE(connect_with_arena(&o, &server, &client));
  std::vector<std::vector<uint8_t>> sent;
  for (int i = 0; i < 5; ++i) sent.push_back(pattern(i == 1 ? 100 : 400 << 10, static_cast<uint8_t>(i)));
  std::vector<Event> seen;
  for (auto& f : sent)
    for (Event& e : send_while_polling(client.get(), f.data(), f.size(), server.get())) seen.push_back(std::move(e));
  std::vector<Event> got;
  while (got.size() < sent.size()) got.push_back(next_of(&seen, server.get(), Event::Kind::kMessage));
  for (size_t i = 0; i < sent.size(); ++i) {
    ASSERT_EQ(got[i].frame->size(), sent[i].size()) << "frame " << i;
    EXPECT_EQ(std::memcmp(got[i].frame->data(), sent[i].data(), sent[i].size()), 0) << "frame " << i;
  }
  // 1 MiB holds two 400 KiB frames: frames 0 and 2 went through it, 3 and 4
  // (held) and 1 (small) by copy.
  Endpoint::PathStats c = client->path_stats(), s = server->path_stats();
  EXPECT_EQ(c.shared_memory_status, "in use");
  EXPECT_EQ(c.shared_memory, 2u);
  EXPECT_EQ(c.copied, 3u);
  EXPECT_EQ(s.shared_memory, 2u);
  EXPECT_EQ(s.copied, 3u);
  // Released blocks are used again.
  got.clear();
  for (Event& e : send_while_polling(client.get(), sent[0].data(), sent[0].size(), server.get()))
    seen.push_back(std::move(e));
  Event m = next_of(&seen, server.get(), Event::Kind::kMessage);
  EXPECT_EQ(std::memcmp(m.frame->data(), sent[0].data(), sent[0].size()), 0);
  EXPECT_EQ(client->path_stats().shared_memory, 3u);

  o.shm_arena_bytes = 0;
  auto plain = connect(server->address(), o);
  ASSERT_TRUE(plain.ok());
  (void)send_while_polling(plain->get(), sent[0].data(), sent[0].size(), server.get());
  EXPECT_EQ((*plain)->path_stats().shared_memory_status, "off");
  EXPECT_EQ((*plain)->path_stats().copied, 1u);
}

// A trainer receiving into pinned memory refuses a worker's arena (its
// frames would be handed over in memory the GPU cannot copy from
// asynchronously): every frame comes by copy into that memory.
TEST(UcxTest, PinnedReceiveMemoryRefusesTheArena) {
  setenv("UCX_NET_DEVICES", "lo", 1);
  auto memory = std::make_shared<testing::RecordingMemory>(/*pinned=*/true);
  Options so = trusting();
  so.memory = memory;
  auto server = listen("ucx://127.0.0.1:0", so);
  ASSERT_TRUE(server.ok()) << server.status().message();
  Options co;
  co.shm_arena_bytes = 1 << 20;
  auto client = connect((*server)->address(), co);
  ASSERT_TRUE(client.ok()) << client.status().message();
  std::vector<Event> seen;
  for (int i = 0; i < 4; ++i) {
    auto frame = pattern(400 << 10, static_cast<uint8_t>(i));
    for (Event& e : send_while_polling(client->get(), frame.data(), frame.size(), server->get()))
      seen.push_back(std::move(e));
    Event m = next_of(&seen, server->get(), Event::Kind::kMessage);
    ASSERT_EQ(m.frame->size(), frame.size());
    EXPECT_EQ(std::memcmp(m.frame->data(), frame.data(), frame.size()), 0);
    EXPECT_TRUE(memory->owns(m.frame->data(), m.frame->size())) << "frame " << i;
  }
  Endpoint::PathStats c = (*client)->path_stats(), s = (*server)->path_stats();
  EXPECT_EQ(s.shared_memory, 0u);
  EXPECT_EQ(s.copied, 4u);
  EXPECT_NE(c.shared_memory_status.find("pinned memory"), std::string::npos) << c.shared_memory_status;
}

// A frame built in room the client reserved goes through shared memory as
// it is; there is no room before the trainer has accepted the arena, nor
// for a small frame, nor without an arena.
TEST(UcxTest, FramesBuiltInReservedRoom) {
  Options o;
  std::unique_ptr<Endpoint> server, client;
  ASSERT_NO_FATAL_FAILURE(connect_with_arena(&o, &server, &client));
  auto large = pattern(400 << 10, 3);
  EXPECT_EQ(client->reserve(large.size()), nullptr) << "before the arena is offered and accepted";
  std::vector<Event> seen = send_while_polling(client.get(), large.data(), large.size(), server.get());
  (void)next_of(&seen, server.get(), Event::Kind::kMessage);
  ASSERT_EQ(client->path_stats().shared_memory_status, "in use");
  EXPECT_EQ(client->reserve(100), nullptr) << "a small frame goes by copy";

  std::unique_ptr<wire::FrameStorage> room = client->reserve(large.size());
  ASSERT_NE(room, nullptr);
  auto other = pattern(large.size(), 4);
  std::memcpy(room->data(), other.data(), other.size());
  for (Event& e : send_while_polling(client.get(), room->data(), other.size(), server.get()))
    seen.push_back(std::move(e));
  Event m = next_of(&seen, server.get(), Event::Kind::kMessage);
  ASSERT_EQ(m.frame->size(), other.size());
  EXPECT_EQ(std::memcmp(m.frame->data(), other.data(), other.size()), 0);
  EXPECT_EQ(client->path_stats().shared_memory, 2u);
  EXPECT_EQ(client->path_stats().copied, 0u);
  // The same room sent again is refused: its block is the trainer's now.
  Status twice = client->send(0, room->data(), other.size());
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.message().find("not a whole reserved block"), std::string::npos) << twice.message();
  room.reset();

  o.shm_arena_bytes = 0;
  auto plain = connect(server->address(), o);
  ASSERT_TRUE(plain.ok());
  (void)send_while_polling(plain->get(), large.data(), large.size(), server.get());
  EXPECT_EQ((*plain)->reserve(large.size()), nullptr) << "no arena";
}

// Addresses are HOST:PORT or [IPV6]:PORT; a bare IPv6 address is refused
// with what was expected. (A trainer on an IPv6-only interface is tested
// across the devcluster's nodes, test_ipv6.sh: UCX 1.13's TCP transport
// takes no IPv6 address of lo.)
TEST(UcxTest, AddressesNeedBracketsAroundIpv6) {
  EXPECT_EQ(testing::open_error(listen("ucx://::1:0")), "ucx: invalid address '::1:0': expected HOST:PORT");
  EXPECT_EQ(testing::open_error(connect("ucx://[::1:0")), "ucx: invalid address '[::1:0': expected [IPV6]:PORT");
}

// The TCP ports this process listens on: the LISTEN lines (state 0A) of
// /proc/net/tcp and tcp6 whose socket inode is one of this process's
// descriptors.
std::set<int> own_listening_ports() {
  std::set<int> ports;
  for (const std::string& local : testing::own_listening_sockets()) ports.insert(testing::listening_port(local));
  return ports;
}

// A port nothing listens on now (the kernel's pick for a socket bound to 0).
int free_tcp_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  close(fd);
  return port;
}

// UCX's own TCP transport listens for its data connections on the port
// the SPANK plugin reserved (so the job's firewall rules can guard it);
// when another process holds that port, the endpoint still opens, on an
// ephemeral one, and a client still exchanges frames with it.
TEST(UcxTest, UcxsTcpTransportListensOnTheReservedPortElseOnAnEphemeralOne) {
  setenv("UCX_NET_DEVICES", "lo", 1);
  const int port = free_tcp_port();
  ASSERT_GT(port, 0);
  Options o = trusting();
  o.tcp_data_port = port;
  for (const bool taken : {false, true}) {
    int squatter = -1;
    if (taken) {
      squatter = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.sin_port = htons(static_cast<uint16_t>(port));
      ASSERT_EQ(bind(squatter, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << std::strerror(errno);
      ASSERT_EQ(::listen(squatter, 4), 0);
    }
    const std::set<int> before = own_listening_ports();
    auto server = listen("ucx://127.0.0.1:0", o);
    ASSERT_TRUE(server.ok()) << (taken ? "taken: " : "") << server.status().message();
    std::set<int> opened;
    for (int p : own_listening_ports())
      if (!before.count(p)) opened.insert(p);
    // The endpoint's own listener (the handshake socket) and UCX's.
    EXPECT_EQ(opened.size(), 2u);
    EXPECT_EQ(opened.count(port), taken ? 0u : 1u) << "taken: " << taken;
    auto client = connect((*server)->address());
    ASSERT_TRUE(client.ok()) << client.status().message();
    auto frame = pattern(4096, 3);
    std::vector<Event> seen = send_while_polling(client->get(), frame.data(), frame.size(), server->get());
    Event got = next_of(&seen, server->get(), Event::Kind::kMessage);
    ASSERT_TRUE(got.frame != nullptr);
    EXPECT_EQ(std::vector<uint8_t>(got.frame->data(), got.frame->data() + got.frame->size()), frame);
    if (squatter >= 0) close(squatter);
  }
}

// The worker process of KilledPeerAndGarbageOnTheListener (this binary
// re-run with GM_TEST_CONNECT set): connects, sends, waits to be killed.
// Runs before gtest starts, so it adds no test of its own.
const bool worker_process = [] {
  const char* addr = getenv("GM_TEST_CONNECT");
  if (addr == nullptr) return false;
  auto c = connect(addr);
  if (!c.ok()) _exit(2);
  uint8_t msg[32] = {7};
  if (!(*c)->send(0, msg, sizeof msg).ok()) _exit(3);
  if (getenv("GM_TEST_THEN_STOP") != nullptr) {
    // Once a frame of the trainer's came (it is bound), progress nothing
    // more: a large frame to this process never completes.
    for (;;) {
      auto e = (*c)->poll(100);
      if (!e.ok()) _exit(5);
      if (e->has_value() && (*e)->kind == Event::Kind::kMessage) break;
    }
    for (;;) pause();
  }
  auto large = pattern(1 << 20, 5);  // through shared memory
  if (!(*c)->send(0, large.data(), large.size()).ok()) _exit(4);
  for (;;) (void)(*c)->poll(100);
}();

// Starts worker_process (this binary re-run: UCX state does not survive
// fork()) connecting to `addr`; `then_stop`: it stops progressing once a
// frame of the trainer's came.
pid_t start_worker_process(const std::string& addr, bool then_stop) {
  pid_t child = fork();
  if (child == 0) {
    setenv("GM_TEST_CONNECT", addr.c_str(), 1);
    if (then_stop) setenv("GM_TEST_THEN_STOP", "1", 1);
    execl("/proc/self/exe", "transport_test", nullptr);
    _exit(127);
  }
  return child;
}

// A trainer's endpoint on lo with `o`, and a worker process
// (start_worker_process) that connected to it: its first message, whose
// peer the endpoint authenticated.
struct AdmittedWorker {
  std::unique_ptr<Endpoint> server;
  std::string address;
  pid_t child = -1;
  Event first;
};

Expected<AdmittedWorker> admit_worker_process(const Options& o, bool then_stop) {
  setenv("UCX_NET_DEVICES", "lo", 1);
  auto server = listen("ucx://127.0.0.1:0", o);
  if (!server.ok()) return server.status();
  AdmittedWorker w;
  w.server = std::move(*server);
  w.address = w.server->address();
  w.child = start_worker_process(w.address, then_stop);
  w.first = wait_for(w.server.get(), Event::Kind::kMessage);
  w.server->authenticated(w.first.peer);
  return w;
}

// A send to a worker that stopped progressing, then was killed, fails as
// soon as its socket ends, whatever the send timeout: the trainer's
// endpoint to a worker in its network namespace has no error handling
// (UCX 1.13 cannot cancel a send on it), so the trainer closes it.
TEST(UcxTest, ASendToAWorkerKilledMidSendFailsWhenItsSocketEnds) {
  Options o;
  o.send_timeout_ms = 120000;
  auto w = admit_worker_process(o, /*then_stop=*/true);
  ASSERT_TRUE(w.ok()) << w.status().message();
  Endpoint* server = w->server.get();
  const pid_t child = w->child;
  const Event& m = w->first;
  uint8_t hello[32] = {8};
  // Sent once the worker's UCX attached (until then it waits in the
  // worker's queue); the worker stops progressing when it comes.
  std::atomic<bool> hello_sent{false};
  ASSERT_TRUE(server->send_async(m.peer, hello, sizeof hello, [&](Status st) { hello_sent = st.ok(); }).ok());
  for (int i = 0; i < 1000 && !hello_sent; ++i) (void)server->poll(10);
  ASSERT_TRUE(hello_sent) << "the worker never attached";
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  // 64 MiB (rendezvous): the worker never fetches it. Killed 0.5 s in.
  std::thread killer([child] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    kill(child, SIGKILL);
  });
  alarm(60);  // a send that never returns ends the test binary, failing it
  auto big = pattern(64 << 20, 9);
  const auto t0 = std::chrono::steady_clock::now();
  Status s = server->send(m.peer, big.data(), big.size());
  const auto took = std::chrono::steady_clock::now() - t0;
  alarm(0);
  killer.join();
  waitpid(child, nullptr, 0);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("connection lost"), std::string::npos) << s.message();
  EXPECT_LT(took, std::chrono::seconds(10)) << "not at the 120 s send timeout";
  Event d = wait_for(server, Event::Kind::kDisconnected);
  EXPECT_EQ(d.peer, m.peer);
}

// A worker killed with SIGKILL is a kDisconnected event; connections to the
// trainer's port that send garbage, a UCX connection request or nothing are
// closed (garbage at once, silence after handshake_timeout_ms) without
// ever becoming a peer, and change nothing for the connected worker.
constexpr int kHandshakeTimeoutMs = 1500;
TEST(UcxTest, KilledPeerAndGarbageOnTheListener) {
  Options o;
  o.handshake_timeout_ms = kHandshakeTimeoutMs;
  auto w = admit_worker_process(o, /*then_stop=*/false);
  ASSERT_TRUE(w.ok()) << w.status().message();
  Endpoint* server = w->server.get();
  const Event& m = w->first;
  Event large = wait_for(server, Event::Kind::kMessage);
  EXPECT_EQ(server->path_stats().shared_memory, 1u);
  kill(w->child, SIGKILL);
  waitpid(w->child, nullptr, 0);
  Event d = wait_for(server, Event::Kind::kDisconnected, 20000);
  EXPECT_EQ(d.peer, m.peer);
  // A frame in the dead worker's arena is still readable.
  ASSERT_EQ(large.frame->size(), size_t{1} << 20);
  auto want = pattern(1 << 20, 5);
  EXPECT_EQ(std::memcmp(large.frame->data(), want.data(), want.size()), 0);

  auto good = connect(w->address);
  ASSERT_TRUE(good.ok());
  uint8_t msg[32] = {1};
  std::vector<Event> seen = send_while_polling(good->get(), msg, sizeof msg, server);
  Event g = next_of(&seen, server, Event::Kind::kMessage);
  server->authenticated(g.peer);

  // Junk of 1000 and 4096 bytes; a UCX 1.13 TCP connection request (its
  // header: size_t length, uint8_t status, padded to 16 bytes; then 64
  // bytes); nothing at all, held open.
  const uint16_t port = static_cast<uint16_t>(std::stoi(w->address.substr(w->address.rfind(':') + 1)));
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<int> junk_fds;
  for (size_t bytes : {size_t{1000}, size_t{4096}, size_t{0}}) {
    int fd = connect_tcp(port);
    std::vector<uint8_t> junk = pattern(bytes, 3);
    if (bytes > 0) {
      ASSERT_EQ(::write(fd, junk.data(), junk.size()), static_cast<ssize_t>(bytes));
    }
    junk_fds.push_back(fd);
  }
  std::vector<uint8_t> request(16);
  const size_t length = 64;
  std::memcpy(request.data(), &length, sizeof length);
  std::vector<uint8_t> sa_data = pattern(64, 11);
  request.insert(request.end(), sa_data.begin(), sa_data.end());
  int fd = connect_tcp(port);
  ASSERT_EQ(::write(fd, request.data(), request.size()), static_cast<ssize_t>(request.size()));
  junk_fds.push_back(fd);
  // Each is closed by the trainer: the junk and the request at once, the
  // silent one after the handshake timeout; none becomes a peer.
  std::vector<bool> closed(junk_fds.size(), false);
  std::vector<std::chrono::steady_clock::duration> after(junk_fds.size());
  while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10) &&
         std::count(closed.begin(), closed.end(), false) > 0) {
    auto e = server->poll(10);
    ASSERT_TRUE(e.ok());
    EXPECT_FALSE(e->has_value() && (*e)->kind == Event::Kind::kConnected) << "junk became a peer";
    for (size_t i = 0; i < junk_fds.size(); ++i) {
      char byte;
      const ssize_t n = closed[i] ? 1 : recv(junk_fds[i], &byte, 1, MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN)) {
        closed[i] = true;
        after[i] = std::chrono::steady_clock::now() - t0;
      }
    }
  }
  for (size_t i = 0; i < junk_fds.size(); ++i) {
    EXPECT_TRUE(closed[i]) << "junk connection " << i << " is closed";
    close(junk_fds[i]);
  }
  EXPECT_LT(after[0], std::chrono::milliseconds(kHandshakeTimeoutMs)) << "junk is closed at once";
  EXPECT_LT(after[3], std::chrono::milliseconds(kHandshakeTimeoutMs)) << "a UCX request is closed at once";
  EXPECT_GE(after[2], std::chrono::milliseconds(kHandshakeTimeoutMs)) << "silence is not closed before the timeout";

  seen = send_while_polling(good->get(), msg, sizeof msg, server);
  Event g2 = next_of(&seen, server, Event::Kind::kMessage);  // the connected worker goes on
  EXPECT_EQ(g2.peer, g.peer);
  ASSERT_TRUE(server->send_async(g.peer, msg, sizeof msg, [](Status s) { EXPECT_TRUE(s.ok()); }).ok());
  EXPECT_EQ(testing::next_at_client(server, good->get()).kind, Event::Kind::kMessage);
}
#endif

}  // namespace
}  // namespace goldminer::transport
