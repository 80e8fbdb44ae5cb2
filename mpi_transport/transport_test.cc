// Tests of the transports behind one interface (transport.h): each test
// of TransportTest runs on local:// and ucx://; the send window; address
// errors.
#include "mpi_transport/transport.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "gm_config.h"
#include "mpi_transport/test_util.h"

namespace goldminer::transport {
namespace {

using testing::next_of;
using testing::open_error;
using testing::pattern;
using testing::send_while_polling;
using testing::trusting;
using testing::wait_for;

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
  auto server = listen(GetParam(), trusting());
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

// A server given a HostMemory receives every frame into buffers from it
// (the trainer's pinned, NUMA-bound receive buffers), reuses them, and
// gives them all back when it goes.
TEST_P(TransportTest, ServerReceivesIntoItsHostMemory) {
  auto memory = std::make_shared<testing::RecordingMemory>();
  Options o = trusting();
  o.memory = memory;
  auto server = listen(std::string(GetParam()) == "local" ? "local://host-memory" : "ucx://127.0.0.1:0", o);
  ASSERT_TRUE(server.ok()) << server.status().message();
  Options plain;
  plain.shm_arena_bytes = 0;
  auto client = connect((*server)->address(), plain);
  ASSERT_TRUE(client.ok()) << client.status().message();
  std::vector<Event> seen;
  for (int round = 0; round < 3; ++round) {
    for (size_t size : {size_t{100}, size_t{300} << 10}) {
      auto frame = pattern(size, static_cast<uint8_t>(round));
      for (Event& e : send_while_polling(client->get(), frame.data(), frame.size(), server->get()))
        seen.push_back(std::move(e));
      Event m = next_of(&seen, server->get(), Event::Kind::kMessage);
      ASSERT_EQ(m.frame->size(), size);
      EXPECT_EQ(std::memcmp(m.frame->data(), frame.data(), size), 0);
      EXPECT_TRUE(memory->owns(m.frame->data(), size)) << "frame of " << size << " bytes, round " << round;
    }
  }
  EXPECT_EQ(memory->allocations(), 2u) << "one buffer per size class, reused";
  seen.clear();
  client->reset();
  server->reset();
  EXPECT_EQ(memory->releases(), memory->allocations());
}

TEST_P(TransportTest, ServerDropsAPeer) {
  auto server = listen(GetParam(), trusting());
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
  Status sent = Status::error("not done");
  ASSERT_TRUE((*server)->send_async(peers[1], hello, sizeof hello, [&](Status s) { sent = s; }).ok());
  EXPECT_EQ(testing::next_at_client(server->get(), b->get()).kind, Event::Kind::kMessage)
      << "the other worker is unaffected";
  EXPECT_TRUE(sent.ok()) << sent.message();
}

// Frames started back to back with send_async, large (rendezvous for UCX)
// and small (eager) mixed, arrive complete and in the order sent; every
// completion runs once, OK.
TEST_P(TransportTest, AsyncSendsArriveInOrder) {
  auto server = listen(GetParam(), trusting());
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
  auto server = listen(GetParam(), trusting());
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

// The window goldminer-dw keeps: several small frames, one large frame,
// and always one whatever its size.
TEST(SendWindowTest, FramesAndBytesBoundWhatIsInFlight) {
  SendWindow w;  // 4 frames within 4 MiB
  const size_t mib = size_t{1} << 20;
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(w.open(mib)) << "frame " << i;
    w.started(mib);
  }
  EXPECT_FALSE(w.open(16)) << "a fifth frame";
  w.finished(mib);
  EXPECT_TRUE(w.open(mib));
  EXPECT_FALSE(w.open(mib + 1)) << "past 4 MiB with the three in flight";
  for (int i = 0; i < 3; ++i) w.finished(mib);
  EXPECT_EQ(w.frames(), 0u);
  ASSERT_TRUE(w.open(8 * mib)) << "one frame goes whatever its size";
  w.started(8 * mib);
  EXPECT_FALSE(w.open(16)) << "nothing beside a frame past the byte bound";
  w.finished(8 * mib);

  SendWindow frames_only(2, SIZE_MAX);  // transport_bench --in-flight 2
  frames_only.started(8 * mib);
  EXPECT_TRUE(frames_only.open(8 * mib));
  frames_only.started(8 * mib);
  EXPECT_FALSE(frames_only.open(1));
  EXPECT_EQ(SendWindow(0, 0).max_frames(), 1u) << "at least one";
}

TEST(TransportAddressTest, ErrorsNameTheAddress) {
  EXPECT_EQ(open_error(listen("tcp://x:1")),
            "transport: address 'tcp://x:1': unknown transport 'tcp' (valid: ucx, mpi, local)");
  EXPECT_NE(open_error(connect("127.0.0.1:5")).find("expected ucx://HOST:PORT"), std::string::npos);
  EXPECT_EQ(open_error(connect("local://nobody-listens")), "local://nobody-listens: no trainer listens there");
  auto l1 = listen("local://twice");
  ASSERT_TRUE(l1.ok());
  EXPECT_FALSE(listen("local://twice").ok());
  // A port another listener holds (a job-id port taken by another job).
  auto u1 = listen("ucx://127.0.0.1:0");
  ASSERT_TRUE(u1.ok()) << u1.status().message();
  const std::string taken = (*u1)->address().substr(std::string("ucx://").size());
  auto u2 = listen("ucx://" + taken);
  ASSERT_FALSE(u2.ok());
  EXPECT_EQ(u2.status().message(), "ucx: listening on " + taken +
                                       ": the address is in use (another process listens on that port; choose "
                                       "another, or port 0 for any free one)");
}

}  // namespace
}  // namespace goldminer::transport
