#include "mpi_transport/transport.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "gm_config.h"

namespace goldminer::transport {
namespace {

// Polls `ep` until an event of `kind` arrives (other kinds are skipped).
Event wait_for(Endpoint* ep, Event::Kind kind, int timeout_ms = 10000) {
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
std::vector<Event> send_while_polling(Endpoint* from, const uint8_t* data, size_t size, Endpoint* server) {
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
Event next_of(std::vector<Event>* seen, Endpoint* ep, Event::Kind kind) {
  for (auto it = seen->begin(); it != seen->end(); ++it) {
    if (it->kind == kind) {
      Event e = std::move(*it);
      seen->erase(it);
      return e;
    }
  }
  return wait_for(ep, kind);
}

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 31 + (i >> 12));
  return v;
}

class TransportTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    setenv("UCX_NET_DEVICES", "lo", 1);
#ifndef GOLDMINER_HAVE_UCX
    if (std::string(GetParam()).rfind("ucx", 0) == 0) GTEST_SKIP() << "built without UCX";
#endif
  }
};

TEST_P(TransportTest, MessagesBothWaysSmallAndLarge) {
  auto server = listen(GetParam());
  ASSERT_TRUE(server.ok()) << server.status().message();
  const std::string addr = (*server)->address();
  auto client = connect(addr);
  ASSERT_TRUE(client.ok()) << client.status().message();

  // Small (eager) and 8 MiB (rendezvous for UCX) from the worker side.
  std::vector<Event> seen;
  for (size_t n : {size_t{16}, size_t{3000}, size_t{8} << 20}) {
    auto bytes = pattern(n, static_cast<uint8_t>(n));
    for (Event& e : send_while_polling(client->get(), bytes.data(), bytes.size(), server->get()))
      seen.push_back(std::move(e));
  }
  Event c = next_of(&seen, server->get(), Event::Kind::kConnected);
  PeerId peer = c.peer;
  for (size_t n : {size_t{16}, size_t{3000}, size_t{8} << 20}) {
    Event m = next_of(&seen, server->get(), Event::Kind::kMessage);
    ASSERT_EQ(m.peer, peer);
    ASSERT_EQ(m.frame->size(), n);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(m.frame->data()) % 64, 0u) << "64-byte aligned";
    auto want = pattern(n, static_cast<uint8_t>(n));
    EXPECT_EQ(std::memcmp(m.frame->data(), want.data(), n), 0);
  }
  auto reply = pattern(100, 9);
  ASSERT_TRUE((*server)->send(peer, reply.data(), reply.size()).ok());
  Event r = wait_for(client->get(), Event::Kind::kMessage);
  ASSERT_EQ(r.frame->size(), 100u);
  EXPECT_EQ(std::memcmp(r.frame->data(), reply.data(), 100), 0);

  // Closing the worker is seen by the trainer.
  client->reset();
  Event d = wait_for(server->get(), Event::Kind::kDisconnected);
  EXPECT_EQ(d.peer, peer);
  EXPECT_FALSE((*server)->send(peer, reply.data(), reply.size()).ok());
}

TEST_P(TransportTest, ServerDropsAPeer) {
  auto server = listen(GetParam());
  ASSERT_TRUE(server.ok()) << server.status().message();
  auto a = connect((*server)->address());
  auto b = connect((*server)->address());
  ASSERT_TRUE(a.ok() && b.ok());
  uint8_t hello[20] = {1};
  std::vector<Event> seen = send_while_polling(a->get(), hello, sizeof hello, server->get());
  for (Event& e : send_while_polling(b->get(), hello, sizeof hello, server->get())) seen.push_back(std::move(e));
  std::vector<PeerId> peers;
  while (peers.size() < 2) peers.push_back(next_of(&seen, server->get(), Event::Kind::kMessage).peer);
  (*server)->disconnect(peers[0]);
  EXPECT_FALSE((*server)->send(peers[0], hello, sizeof hello).ok());
  EXPECT_TRUE((*server)->send(peers[1], hello, sizeof hello).ok()) << "the other worker is unaffected";
}

// Frames started back to back with send_async, large (rendezvous for UCX)
// and small (eager) mixed, arrive complete and in the order sent; every
// completion runs once, OK.
TEST_P(TransportTest, AsyncSendsArriveInOrder) {
  auto server = listen(GetParam());
  ASSERT_TRUE(server.ok()) << server.status().message();
  auto client = connect((*server)->address());
  ASSERT_TRUE(client.ok()) << client.status().message();
  std::vector<std::vector<uint8_t>> frames;
  for (int i = 0; i < 8; ++i) frames.push_back(pattern(i % 2 == 0 ? size_t{4} << 20 : 16 + i, static_cast<uint8_t>(i)));
  std::atomic<int> completed{0}, failed{0};
  std::atomic<bool> stop{false};
  std::thread sender([&] {
    for (auto& f : frames) {
      Status s = (*client)->send_async(0, f.data(), f.size(), [&](Status sent) {
        ++completed;
        if (!sent.ok()) ++failed;
      });
      if (!s.ok()) ++failed;
    }
    while (!stop) (void)(*client)->poll(10);
  });
  std::vector<Event> got;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (got.size() < frames.size() && std::chrono::steady_clock::now() < deadline) {
    auto e = (*server)->poll(10);
    ASSERT_TRUE(e.ok()) << e.status().message();
    if (e->has_value() && (*e)->kind == Event::Kind::kMessage) got.push_back(std::move(**e));
  }
  while (completed < static_cast<int>(frames.size()) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  stop = true;
  sender.join();
  EXPECT_EQ(completed.load(), static_cast<int>(frames.size()));
  EXPECT_EQ(failed.load(), 0);
  ASSERT_EQ(got.size(), frames.size());
  for (size_t i = 0; i < frames.size(); ++i) {
    ASSERT_EQ(got[i].frame->size(), frames[i].size()) << "frame " << i;
    EXPECT_EQ(std::memcmp(got[i].frame->data(), frames[i].data(), frames[i].size()), 0) << "frame " << i;
  }
}

// wake() from another thread ends a waiting poll() early.
TEST_P(TransportTest, WakeEndsAWaitingPoll) {
  auto server = listen(GetParam());
  ASSERT_TRUE(server.ok()) << server.status().message();
  std::thread waker([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    (*server)->wake();
  });
  const auto start = std::chrono::steady_clock::now();
  auto e = (*server)->poll(10000);
  const auto waited = std::chrono::steady_clock::now() - start;
  waker.join();
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_FALSE(e->has_value());
  EXPECT_LT(waited, std::chrono::seconds(5));
}

INSTANTIATE_TEST_SUITE_P(All, TransportTest, ::testing::Values("local://transport-test", "ucx://127.0.0.1:0"));

TEST(TransportAddressTest, ErrorsNameTheAddress) {
  auto a = listen("tcp://x:1");
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().message(), "transport: address 'tcp://x:1': unknown transport 'tcp' (valid: ucx, mpi, local)");
  auto b = connect("127.0.0.1:5");
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("expected ucx://HOST:PORT"), std::string::npos);
  auto c = connect("local://nobody-listens");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "local://nobody-listens: no trainer listens there");
  auto l1 = listen("local://twice");
  ASSERT_TRUE(l1.ok());
  EXPECT_FALSE(listen("local://twice").ok());
}

#ifdef GOLDMINER_HAVE_UCX
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
  for (;;) (void)(*c)->poll(100);
}();

// A worker killed with SIGKILL is a kDisconnected event; garbage bytes sent
// to the listener's port change nothing for the connected worker.
TEST(UcxTest, KilledPeerAndGarbageOnTheListener) {
  setenv("UCX_NET_DEVICES", "lo", 1);
  auto server = listen("ucx://127.0.0.1:0");
  ASSERT_TRUE(server.ok()) << server.status().message();
  const std::string addr = (*server)->address();
  // UCX state does not survive fork(): the worker is this binary re-run.
  pid_t child = fork();
  if (child == 0) {
    setenv("GM_TEST_CONNECT", addr.c_str(), 1);
    execl("/proc/self/exe", "transport_test", nullptr);
    _exit(127);
  }
  Event m = wait_for(server->get(), Event::Kind::kMessage);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  Event d = wait_for(server->get(), Event::Kind::kDisconnected, 20000);
  EXPECT_EQ(d.peer, m.peer);

  auto good = connect(addr);
  ASSERT_TRUE(good.ok());
  uint8_t msg[32] = {1};
  std::vector<Event> seen = send_while_polling(good->get(), msg, sizeof msg, server->get());
  Event g = next_of(&seen, server->get(), Event::Kind::kMessage);

  const int port = std::stoi(addr.substr(addr.rfind(':') + 1));
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  std::vector<uint8_t> junk = pattern(4096, 3);
  (void)::write(fd, junk.data(), junk.size());
  for (int i = 0; i < 20; ++i) (void)(*server)->poll(20);
  close(fd);
  for (int i = 0; i < 20; ++i) (void)(*server)->poll(20);

  seen = send_while_polling(good->get(), msg, sizeof msg, server->get());
  Event g2 = next_of(&seen, server->get(), Event::Kind::kMessage);  // the connected worker goes on
  EXPECT_EQ(g2.peer, g.peer);
  ASSERT_TRUE((*server)->send(g.peer, msg, sizeof msg).ok());
  wait_for(good->get(), Event::Kind::kMessage);
}
#endif

}  // namespace
}  // namespace goldminer::transport
