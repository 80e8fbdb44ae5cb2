#include "mpi_transport/transport.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <deque>
#include <mutex>
#include <numeric>
#include <set>
#include <thread>
#include <vector>

#include "gm_config.h"
#include "mpi_transport/shm_arena.h"
#include "mpi_transport/stale_sockets.h"

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

// ------------------------------------------------------------ shared memory

// A worker's arena mapped by the trainer (here one process plays both):
// frames are viewed in place, a released block is reused, a full arena
// says so, and bad descriptors are refused.
TEST(ShmArenaTest, FramesAreViewedInPlaceAndBlocksReused) {
  auto arena = ShmArena::create(1 << 20);
  ASSERT_TRUE(arena.ok()) << arena.status().message();
  auto offer = ShmOffer::decode((*arena)->offer().encode().data(), (*arena)->offer().encode().size());
  ASSERT_TRUE(offer.ok()) << offer.status().message();
  auto mapping = ShmMapping::open(*offer);
  ASSERT_TRUE(mapping.ok()) << mapping.status().message();

  auto a = pattern(300 << 10, 1), b = pattern(300 << 10, 2);
  const ShmDescriptor* da = (*arena)->put(a.data(), a.size());
  const ShmDescriptor* db = (*arena)->put(b.data(), b.size());
  ASSERT_NE(da, nullptr);
  ASSERT_NE(db, nullptr);
  const ShmDescriptor first = *da;
  auto fa = (*mapping)->frame(*da, 1 << 30);
  auto fb = (*mapping)->frame(*db, 1 << 30);
  ASSERT_TRUE(fa.ok() && fb.ok());
  ASSERT_EQ((*fa)->size(), a.size());
  EXPECT_EQ(reinterpret_cast<uintptr_t>((*fa)->data()) % 64, 0u);
  EXPECT_EQ(std::memcmp((*fa)->data(), a.data(), a.size()), 0);
  EXPECT_EQ(std::memcmp((*fb)->data(), b.data(), b.size()), 0);

  // Delivered once only.
  auto again = (*mapping)->frame(*da, 1 << 30);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("names no filled block"), std::string::npos) << again.status().message();

  // 1 MiB holds three blocks of 300 KiB; the fourth does not fit.
  auto c = pattern(300 << 10, 3);
  const ShmDescriptor* dc = (*arena)->put(c.data(), c.size());
  ASSERT_NE(dc, nullptr);
  EXPECT_EQ((*arena)->put(c.data(), c.size()), nullptr) << "a full arena sends by copy";
  EXPECT_GE((*arena)->bytes_in_use(), 3 * (300u << 10));

  // Dropping the first frame frees the lowest block, which is taken next.
  fa->reset();
  const ShmDescriptor* dd = (*arena)->put(c.data(), c.size());
  ASSERT_NE(dd, nullptr);
  EXPECT_EQ(dd->offset, first.offset);
  auto fd = (*mapping)->frame(*dd, 1 << 30);
  ASSERT_TRUE(fd.ok());
  EXPECT_EQ(std::memcmp((*fd)->data(), c.data(), c.size()), 0);
  // A frame outlives the mapping's other holders.
  mapping->reset();
  EXPECT_EQ(std::memcmp((*fb)->data(), b.data(), b.size()), 0);
}

// A frame built in a reserved block: committed, it is the trainer's like a
// put one; the trainer refuses a block still reserved; a reservation
// dropped after its block was committed, released and reserved anew leaves
// the new reservation alone; dropped uncommitted, its block is free again.
TEST(ShmArenaTest, FramesBuiltInReservedBlocks) {
  auto arena = ShmArena::create(1 << 20);
  ASSERT_TRUE(arena.ok()) << arena.status().message();
  auto mapping = ShmMapping::open((*arena)->offer());
  ASSERT_TRUE(mapping.ok()) << mapping.status().message();
  auto a = pattern(300 << 10, 1), b = pattern(300 << 10, 2);

  std::unique_ptr<wire::FrameStorage> r = (*arena)->reserve(a.size());
  ASSERT_NE(r, nullptr);
  ASSERT_GE(r->capacity(), a.size());
  uint8_t* const block = r->data();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(block) % 64, 0u);
  EXPECT_TRUE((*arena)->owns(block));
  EXPECT_FALSE((*arena)->owns(a.data()));
  std::memcpy(block, a.data(), a.size());
  EXPECT_EQ((*arena)->commit(block + 64, a.size()), nullptr) << "not a block's start";
  EXPECT_EQ((*arena)->commit(block, r->capacity() + 1), nullptr) << "larger than the block";
  const ShmDescriptor* d = (*arena)->commit(block, a.size());
  ASSERT_NE(d, nullptr);
  EXPECT_EQ((*arena)->commit(block, a.size()), nullptr) << "committed twice";
  auto f = (*mapping)->frame(*d, 1 << 30);
  ASSERT_TRUE(f.ok()) << f.status().message();
  ASSERT_EQ((*f)->size(), a.size());
  EXPECT_EQ(std::memcmp((*f)->data(), a.data(), a.size()), 0);
  const ShmDescriptor first = *d;

  // Released by the trainer, the block is reserved anew (lowest first);
  // dropping the old, committed reservation must not free it.
  f->reset();
  std::unique_ptr<wire::FrameStorage> again = (*arena)->reserve(a.size());
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->data(), block);
  r.reset();
  const ShmDescriptor* other = (*arena)->put(b.data(), b.size());
  ASSERT_NE(other, nullptr);
  EXPECT_NE(other->offset, first.offset) << "the reserved block was given away";
  EXPECT_FALSE((*mapping)->frame(ShmDescriptor{first.offset, a.size()}, 1 << 30).ok())
      << "a block still reserved is not delivered";

  // Dropped uncommitted, the block is free again.
  again.reset();
  const ShmDescriptor* reused = (*arena)->put(b.data(), b.size());
  ASSERT_NE(reused, nullptr);
  EXPECT_EQ(reused->offset, first.offset);
  // Full (three blocks of 300 KiB in 1 MiB): no room to reserve.
  auto third = (*arena)->reserve(a.size());
  ASSERT_NE(third, nullptr);
  EXPECT_EQ((*arena)->reserve(a.size()), nullptr) << "a full arena has no room";
}

// Producer threads reserve, fill, commit or drop blocks while the owner
// thread puts frames and a trainer releases them: no two frames ever share
// bytes, and every delivered frame holds what was written into it.
TEST(ShmArenaTest, ConcurrentReservationsNeverOverlap) {
  auto arena = ShmArena::create(4 << 20);
  ASSERT_TRUE(arena.ok()) << arena.status().message();
  auto mapping = ShmMapping::open((*arena)->offer());
  ASSERT_TRUE(mapping.ok()) << mapping.status().message();
  std::mutex mu;  // guards `committed` (the owner thread's sends)
  std::deque<std::pair<ShmDescriptor, uint8_t>> committed;
  std::atomic<int> bad{0}, done{0};
  std::vector<std::thread> producers;
  for (int t = 0; t < 3; ++t) {
    producers.emplace_back([&, t] {
      for (int i = 0; i < 300; ++i) {
        const size_t size = (64 << 10) + static_cast<size_t>((i * 7919 + t * 104729) % (200 << 10));
        std::unique_ptr<wire::FrameStorage> r = (*arena)->reserve(size);
        if (r == nullptr) {
          std::this_thread::yield();
          continue;
        }
        const auto fill = static_cast<uint8_t>(1 + (t * 300 + i) % 251);
        std::memset(r->data(), fill, size);
        if (i % 3 == 0) continue;  // dropped unsent
        std::lock_guard<std::mutex> lock(mu);  // the owner's thread, in effect
        const ShmDescriptor* d = (*arena)->commit(r->data(), size);
        if (d == nullptr) {
          ++bad;
          continue;
        }
        committed.emplace_back(*d, fill);
      }
      ++done;
    });
  }
  auto put_pattern = pattern(100 << 10, 0);
  size_t delivered = 0;
  for (bool finished = false; !finished;) {
    std::pair<ShmDescriptor, uint8_t> next{};
    bool have = false;
    {
      std::lock_guard<std::mutex> lock(mu);
      finished = done == 3 && committed.empty();
      if (!committed.empty()) {
        next = committed.front();
        committed.pop_front();
        have = true;
      }
      // The owner also puts frames by copy now and then; they are released at once.
      if (delivered % 5 == 0) {
        const ShmDescriptor* p = (*arena)->put(put_pattern.data(), put_pattern.size());
        if (p != nullptr) {
          auto f = (*mapping)->frame(*p, 1 << 30);
          if (!f.ok() || std::memcmp((*f)->data(), put_pattern.data(), put_pattern.size()) != 0) ++bad;
        }
      }
    }
    if (!have) {
      std::this_thread::yield();
      continue;
    }
    auto f = (*mapping)->frame(next.first, 1 << 30);  // dropped at once: released
    if (!f.ok()) {
      ++bad;
      continue;
    }
    const uint8_t* p = (*f)->data();
    for (size_t k = 0; k < (*f)->size(); k += 4093)
      if (p[k] != next.second) {
        ++bad;
        break;
      }
    ++delivered;
  }
  for (auto& t : producers) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(delivered, 100u);
}

TEST(ShmArenaTest, BadDescriptorsAndOffersAreRefused) {
  auto arena = ShmArena::create(1 << 20);
  ASSERT_TRUE(arena.ok()) << arena.status().message();
  auto mapping = ShmMapping::open((*arena)->offer());
  ASSERT_TRUE(mapping.ok()) << mapping.status().message();
  auto a = pattern(100 << 10, 1);
  const ShmDescriptor* d = (*arena)->put(a.data(), a.size());
  ASSERT_NE(d, nullptr);

  auto refused = [&](ShmDescriptor bad, uint64_t limit = 1 << 30) {
    auto f = (*mapping)->frame(bad, limit);
    return f.ok() ? std::string("accepted") : f.status().message();
  };
  EXPECT_NE(refused({d->offset, uint64_t{1} << 40}, ~uint64_t{0}).find("outside the arena"), std::string::npos);
  EXPECT_NE(refused({~uint64_t{0} - 10, 100}).find("outside the arena"), std::string::npos);
  EXPECT_NE(refused({d->offset + 64, 100}).find("outside the arena"), std::string::npos) << "not a block start";
  EXPECT_NE(refused({d->offset, d->size - 1}).find("names no filled block"), std::string::npos) << "size differs";
  EXPECT_NE(refused({d->offset + 4096 * 50, 100}).find("names no filled block"), std::string::npos) << "free space";
  EXPECT_NE(refused(*d, 1000).find("limit 1000"), std::string::npos);
  EXPECT_TRUE((*mapping)->frame(*d, 1 << 30).ok()) << "the real descriptor still works after the refusals";

  // Offers that do not describe the arena.
  ShmOffer o = (*arena)->offer();
  auto open_error = [](const ShmOffer& bad) {
    auto m = ShmMapping::open(bad);
    return m.ok() ? std::string("accepted") : m.status().message();
  };
  ShmOffer key = o;
  key.key ^= 1;
  EXPECT_NE(open_error(key).find("key differs"), std::string::npos) << open_error(key);
  ShmOffer inode = o;
  inode.inode += 1;
  EXPECT_NE(open_error(inode).find("another file"), std::string::npos) << open_error(inode);
  ShmOffer size = o;
  size.size *= 2;
  EXPECT_NE(open_error(size).find("announced"), std::string::npos) << open_error(size);
  ShmOffer huge = o;
  huge.size = uint64_t{1} << 40;
  EXPECT_NE(open_error(huge).find("limit"), std::string::npos) << open_error(huge);
  ShmOffer node = o;
  node.boot_id = "00000000-0000-0000-0000-000000000000";
  EXPECT_NE(open_error(node).find("another node"), std::string::npos) << open_error(node);
  ShmOffer fd = o;
  fd.fd = 1 << 20;
  EXPECT_NE(open_error(fd).find("opening /proc/"), std::string::npos) << open_error(fd);
  auto bytes = o.encode();
  EXPECT_FALSE(ShmOffer::decode(bytes.data(), bytes.size() - 1).ok());
  bytes[0] ^= 0x40;
  auto v = ShmOffer::decode(bytes.data(), bytes.size());
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("version"), std::string::npos);
}

// A TCP listener on 127.0.0.1 (any free port) for the sweeper's tests.
int listen_tcp(uint16_t* port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  EXPECT_EQ(::listen(fd, 8), 0);
  socklen_t len = sizeof sa;
  getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  *port = ntohs(sa.sin_port);
  return fd;
}

int connect_tcp(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  return fd;
}

std::string local_address(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return sockaddr_text(&a, len);
}

// Sockets accepted on the port whose peer stays unknown past the timeout
// are reset (the peer sees ECONNRESET); known peers, the listener itself
// and sockets on other ports are left alone; a descriptor that no longer
// holds the socket it was found with is not touched.
TEST(StaleSocketSweeperTest, ResetsOnlyUnknownAcceptedSocketsPastTheTimeout) {
  uint16_t port = 0, other_port = 0;
  const int listener = listen_tcp(&port);
  const int other_listener = listen_tcp(&other_port);
  const int known_client = connect_tcp(port);
  const int stranger = connect_tcp(port);
  const int elsewhere = connect_tcp(other_port);
  const int known_accepted = accept(listener, nullptr, nullptr);
  const int stranger_accepted = accept(listener, nullptr, nullptr);
  const int elsewhere_accepted = accept(other_listener, nullptr, nullptr);
  ASSERT_GE(stranger_accepted, 0);

  auto found = accepted_sockets(port);
  ASSERT_EQ(found.size(), 2u) << "the two accepted sockets, not the listener nor the clients";
  std::set<std::string> peers;
  for (const auto& s : found) peers.insert(s.peer);
  EXPECT_EQ(peers, (std::set<std::string>{local_address(known_client), local_address(stranger)}));

  AcceptedSocket moved = found[0];
  moved.inode += 1;  // as if the descriptor had been closed and reused
  EXPECT_FALSE(reset_connection(moved));

  using Clock = StaleSocketSweeper::Clock;
  StaleSocketSweeper sweeper(port, std::chrono::milliseconds(1000));
  const std::set<std::string> known{local_address(known_client)};
  const auto t0 = Clock::now();
  EXPECT_TRUE(sweeper.sweep(known, t0).empty()) << "first seen now";
  EXPECT_TRUE(sweeper.sweep(known, t0 + std::chrono::milliseconds(500)).empty()) << "before the timeout";
  EXPECT_EQ(sweeper.sweep(known, t0 + std::chrono::milliseconds(1000)),
            std::vector<std::string>{local_address(stranger)});

  char byte;
  EXPECT_EQ(recv(stranger, &byte, 1, 0), -1);
  EXPECT_EQ(errno, ECONNRESET);
  int error = 0;
  socklen_t len = sizeof error;
  getsockopt(stranger_accepted, SOL_SOCKET, SO_ERROR, &error, &len);
  EXPECT_EQ(error, ECONNRESET) << "the owner's socket reports the reset";
  // The known connection and the one on another port still carry data.
  EXPECT_EQ(send(known_client, "k", 1, 0), 1);
  EXPECT_EQ(recv(known_accepted, &byte, 1, 0), 1);
  EXPECT_EQ(send(elsewhere, "e", 1, 0), 1);
  EXPECT_EQ(recv(elsewhere_accepted, &byte, 1, 0), 1);
  EXPECT_TRUE(sweeper.sweep(known, t0 + std::chrono::seconds(5)).empty()) << "a reset socket has no peer";
  for (int fd : {listener, other_listener, known_client, stranger, elsewhere, known_accepted, stranger_accepted,
                 elsewhere_accepted})
    close(fd);
}

#ifdef GOLDMINER_HAVE_UCX
// A ucx server on lo and a client of it with a 1 MiB arena, set in `*o`
// (which the test reuses to connect more clients).
void connect_with_arena(Options* o, std::unique_ptr<Endpoint>* server, std::unique_ptr<Endpoint>* client) {
  setenv("UCX_NET_DEVICES", "lo", 1);
  auto s = listen("ucx://127.0.0.1:0");
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
  auto large = pattern(1 << 20, 5);  // through shared memory
  if (!(*c)->send(0, large.data(), large.size()).ok()) _exit(4);
  for (;;) (void)(*c)->poll(100);
}();

// A worker killed with SIGKILL is a kDisconnected event; connections to the
// listener's port that send garbage or nothing are dropped and change
// nothing for the connected worker.
constexpr int kHandshakeTimeoutMs = 1500;
TEST(UcxTest, KilledPeerAndGarbageOnTheListener) {
  setenv("UCX_NET_DEVICES", "lo", 1);
  Options o;
  o.handshake_timeout_ms = kHandshakeTimeoutMs;
  auto server = listen("ucx://127.0.0.1:0", o);
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
  Event large = wait_for(server->get(), Event::Kind::kMessage);
  EXPECT_EQ((*server)->path_stats().shared_memory, 1u);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  Event d = wait_for(server->get(), Event::Kind::kDisconnected, 20000);
  EXPECT_EQ(d.peer, m.peer);
  // A frame in the dead worker's arena is still readable.
  ASSERT_EQ(large.frame->size(), size_t{1} << 20);
  auto want = pattern(1 << 20, 5);
  EXPECT_EQ(std::memcmp(large.frame->data(), want.data(), want.size()), 0);

  auto good = connect(addr);
  ASSERT_TRUE(good.ok());
  uint8_t msg[32] = {1};
  std::vector<Event> seen = send_while_polling(good->get(), msg, sizeof msg, server->get());
  Event g = next_of(&seen, server->get(), Event::Kind::kMessage);

  // Junk: short, which UCX drops when the sender closes; longer than UCX's
  // request buffer (2 KiB), which UCX alone would keep for good, closed or
  // held open; and nothing at all, held open. The trainer resets what UCX
  // keeps once handshake_timeout_ms has passed.
  const uint16_t port = static_cast<uint16_t>(std::stoi(addr.substr(addr.rfind(':') + 1)));
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<int> junk_fds;
  for (size_t bytes : {size_t{1000}, size_t{4096}, size_t{4096}, size_t{0}}) {
    int fd = connect_tcp(port);
    std::vector<uint8_t> junk = pattern(bytes, 3);
    if (bytes > 0) {
      ASSERT_EQ(::write(fd, junk.data(), junk.size()), static_cast<ssize_t>(bytes));
    }
    junk_fds.push_back(fd);
  }
  // Well-framed connection requests whose UCP part is junk (UCX 1.13's TCP
  // CM header: size_t length, uint8_t status, padded to 16 bytes; then 64
  // bytes of sa_data that name no address mode UCX knows). UCX hands each
  // to the trainer and ucp_ep_create fails; UCX neither rejects nor frees
  // them (ucp_ep_create_server_accept returns early), so the trainer resets
  // them like the junk above. Their descriptors stay with UCX (a leak in
  // UCX 1.13, not closed by us: UCX still owns the number).
  std::set<std::string> forged_peers;
  for (uint8_t version : {7, 0, 1}) {
    std::vector<uint8_t> forged(16);
    std::vector<uint8_t> sa_data = pattern(64, version + 11);
    sa_data[0] = static_cast<uint8_t>(version << 5);
    const size_t length = sa_data.size();
    std::memcpy(forged.data(), &length, sizeof length);
    forged.insert(forged.end(), sa_data.begin(), sa_data.end());
    int fd = connect_tcp(port);
    ASSERT_EQ(::write(fd, forged.data(), forged.size()), static_cast<ssize_t>(forged.size()));
    junk_fds.push_back(fd);
    sockaddr_storage local{};
    socklen_t len = sizeof local;
    ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len), 0);
    forged_peers.insert(sockaddr_text(reinterpret_cast<const sockaddr*>(&local), len));
  }
  for (int i = 0; i < 20; ++i) {
    auto e = (*server)->poll(20);
    ASSERT_TRUE(e.ok());
    EXPECT_FALSE(e->has_value() && (*e)->kind == Event::Kind::kConnected) << "junk became a peer";
  }
  close(junk_fds[0]);
  close(junk_fds[1]);
  // Until the sweep: the good worker's socket and the junk UCX keeps.
  std::set<ino_t> kept;
  size_t forged_kept = 0;
  for (const AcceptedSocket& a : accepted_sockets(port)) {
    if (forged_peers.count(a.peer) != 0) {
      ++forged_kept;
    } else {
      kept.insert(a.inode);
    }
  }
  EXPECT_GE(kept.size(), 4u);
  EXPECT_EQ(forged_kept, 3u);
  while (accepted_sockets(port).size() > 1 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10))
    (void)(*server)->poll(50);
  ASSERT_EQ(accepted_sockets(port).size(), 1u) << "only the connected worker's socket is left";
  kept.erase(accepted_sockets(port)[0].inode);
  // UCX closes the reset sockets itself: their descriptors are gone.
  auto open_sockets = [&] {
    size_t n = 0;
    for (int fd = 0; fd < 4096; ++fd) {
      struct stat st {};
      if (fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode) && kept.count(st.st_ino) != 0) ++n;
    }
    return n;
  };
  for (int i = 0; i < 40 && open_sockets() > 0; ++i) (void)(*server)->poll(50);
  EXPECT_EQ(open_sockets(), 0u) << "descriptors of dropped junk connections still open";
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(kHandshakeTimeoutMs))
      << "nothing is reset before the timeout";
  char byte;
  for (size_t i = 2; i < junk_fds.size(); ++i) {
    EXPECT_EQ(recv(junk_fds[i], &byte, 1, 0), -1) << "junk connection " << i << " is reset";
    EXPECT_EQ(errno, ECONNRESET);
    close(junk_fds[i]);
  }

  seen = send_while_polling(good->get(), msg, sizeof msg, server->get());
  Event g2 = next_of(&seen, server->get(), Event::Kind::kMessage);  // the connected worker goes on
  EXPECT_EQ(g2.peer, g.peer);
  ASSERT_TRUE((*server)->send(g.peer, msg, sizeof msg).ok());
  wait_for(good->get(), Event::Kind::kMessage);
}
#endif

}  // namespace
}  // namespace goldminer::transport
