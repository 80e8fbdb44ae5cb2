// Tests of the ucx:// trainer's limits on peers it has not authenticated
// (transport.h, Endpoint::authenticated and Options) and of its receive
// budget: frames over the pre-authentication cap or too many of them drop
// the peer before anything of their size exists; pending peers beyond the
// cap close the oldest; the UCP address and the arena come only after
// authentication; 100 strangers on every path announcing 2 GiB cost the
// trainer little memory; rendezvous frames beyond the budget wait and lose
// nothing. Descriptor floods: ucx_flood_test.cc.
#include "mpi_transport/transport.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gm_config.h"
#include "mpi_transport/handshake_socket.h"
#include "mpi_transport/test_util.h"
#ifdef GOLDMINER_HAVE_UCX
#include "mpi_transport/stranger.h"
#endif

namespace goldminer::transport {
namespace {

#ifdef GOLDMINER_HAVE_UCX
using testing::connect_tcp;
using testing::next_at_client;
using testing::next_of;
using testing::pattern;
using testing::rss_kib;
using testing::send_while_polling;
using testing::trusting;
using testing::wait_for;

constexpr size_t kTwoGiB = size_t{2} << 30;

// The attacker process of HundredStrangersAnnouncing2GiBCostLittleMemory
// (this binary re-run with GM_TEST_ANNOUNCE=ADDRESS): exits with how many
// of its 100 connections the trainer did not end (stranger.h).
const bool attacker_process = [] {
  const char* addr = getenv("GM_TEST_ANNOUNCE");
  if (addr == nullptr) return false;
  _exit(testing::stranger_attack(addr, 100, kTwoGiB));
}();

// Writes one record to a raw socket, as a stranger would.
void write_record(int fd, RecordKind kind, uint32_t announced, const std::vector<uint8_t>& payload) {
  const uint8_t head[kRecordHead] = {static_cast<uint8_t>(announced), static_cast<uint8_t>(announced >> 8),
                                     static_cast<uint8_t>(announced >> 16), static_cast<uint8_t>(announced >> 24),
                                     static_cast<uint8_t>(kind)};
  ASSERT_EQ(::send(fd, head, sizeof head, MSG_NOSIGNAL), static_cast<ssize_t>(sizeof head));
  if (!payload.empty()) (void)::send(fd, payload.data(), payload.size(), MSG_NOSIGNAL);
}

uint16_t port_of(const std::string& address) {
  return static_cast<uint16_t>(std::stoi(address.substr(address.rfind(':') + 1)));
}

Expected<std::unique_ptr<Endpoint>> serve(Options o = {}) {
  setenv("UCX_NET_DEVICES", "lo", 1);
  return listen("ucx://127.0.0.1:0", o);
}

Options without_arena() {
  Options o;
  o.shm_arena_bytes = 0;
  return o;
}

// Polls `server` while `client` has not yet been accepted (its first send,
// of one byte, waits for that); the kConnected event's peer. Other events
// seen meanwhile go to `*others`, when given.
PeerId accept(Endpoint* server, Endpoint* client, std::vector<Event>* others = nullptr) {
  uint8_t none = 0;
  // The byte goes on the handshake socket at once: the server's events
  // (its accept, an eviction it makes room with, the frame) come after.
  std::vector<Event> seen = send_while_polling(client, &none, 1, server);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  auto message = [&] {
    return std::find_if(seen.begin(), seen.end(), [](const Event& e) { return e.kind == Event::Kind::kMessage; });
  };
  while (message() == seen.end() && std::chrono::steady_clock::now() < deadline) {
    auto e = server->poll(10);
    if (e.ok() && e->has_value()) seen.push_back(std::move(**e));
  }
  auto m = message();
  if (m == seen.end()) {
    ADD_FAILURE() << "the server never got the new peer's frame";
    return 0;
  }
  const PeerId peer = m->peer;
  seen.erase(m);
  auto c = std::find_if(seen.begin(), seen.end(),
                        [&](const Event& e) { return e.kind == Event::Kind::kConnected && e.peer == peer; });
  EXPECT_TRUE(c != seen.end()) << "no kConnected before the frame";
  if (c != seen.end()) seen.erase(c);
  if (others != nullptr)
    for (Event& e : seen) others->push_back(std::move(e));
  return peer;
}

// Injects, from a raw socket not yet authenticated, one small frame (it
// arrives) and then a record announcing a 1 MiB frame (over the 16 KiB
// cap), with its bytes, to a trainer receiving into (recorded, "pinned")
// memory; checks the peer is dropped with the reason and that no buffer
// was taken from that memory; once authenticated, a real worker's 1 MiB
// frame arrives in that memory.
TEST(UcxPreauthTest, AFrameOverTheCapDropsThePeerAndAllocatesNothing) {
  auto memory = std::make_shared<testing::RecordingMemory>(/*pinned=*/true);
  Options so;
  so.memory = memory;
  auto server = serve(so);
  ASSERT_TRUE(server.ok()) << server.status().message();
  const int stranger = connect_tcp(port_of((*server)->address()));
  write_record(stranger, RecordKind::kFrame, 3, {1, 2, 3});
  Event c = wait_for(server->get(), Event::Kind::kConnected);
  Event m0 = wait_for(server->get(), Event::Kind::kMessage);
  EXPECT_EQ(m0.frame->size(), 3u);
  auto big = pattern(1 << 20, 1);
  write_record(stranger, RecordKind::kFrame, big.size(), big);
  Event d = wait_for(server->get(), Event::Kind::kDisconnected);
  EXPECT_EQ(d.peer, c.peer);
  EXPECT_EQ(d.reason, "a frame record of 1048576 bytes (limit 16384 now)");
  EXPECT_EQ(memory->allocations(), 0u) << "nothing taken from the receive memory for a stranger";
  ::close(stranger);

  auto worker = connect((*server)->address(), without_arena());
  ASSERT_TRUE(worker.ok());
  const PeerId w = accept(server->get(), worker->get());
  (*server)->authenticated(w);
  std::vector<Event> seen = send_while_polling(worker->get(), big.data(), big.size(), server->get());
  Event m = next_of(&seen, server->get(), Event::Kind::kMessage);
  ASSERT_EQ(m.frame->size(), big.size());
  EXPECT_EQ(std::memcmp(m.frame->data(), big.data(), big.size()), 0);
  EXPECT_TRUE(memory->owns(m.frame->data(), m.frame->size()));
}

// Injects, from a fake trainer (a plain socket where the worker expects
// its trainer) to a worker's endpoint that has not yet verified its
// trainer (verify_trainer, as goldminer-dw connects), a record announcing
// a 1 MiB frame, and from another a bind record (a UCP address the worker
// would connect to); checks the worker drops each with the reason. A real
// trainer that trusts anyone: once the worker has called authenticated(0)
// a 1 MiB frame arrives whole.
TEST(UcxPreauthTest, AWorkerHoldsItsUnverifiedTrainerToTheCap) {
  Options co = without_arena();
  co.verify_trainer = true;
  auto big = pattern(1 << 20, 7);
  for (RecordKind kind : {RecordKind::kFrame, RecordKind::kBind}) {
    sockaddr_storage any{};
    socklen_t len = 0;
    auto* in = reinterpret_cast<sockaddr_in*>(&any);
    in->sin_family = AF_INET;
    in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    len = sizeof *in;
    auto fake = listen_socket(any, len, "127.0.0.1:0");
    ASSERT_TRUE(fake.ok()) << fake.status().message();
    auto port = local_port(*fake);
    ASSERT_TRUE(port.ok());
    setenv("UCX_NET_DEVICES", "lo", 1);
    auto worker = connect("ucx://127.0.0.1:" + std::to_string(*port), co);
    ASSERT_TRUE(worker.ok()) << worker.status().message();
    int conn = -1;
    for (int i = 0; i < 1000 && conn < 0; ++i) {
      conn = ::accept(*fake, nullptr, nullptr);
      if (conn < 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_GE(conn, 0);
    write_record(conn, kind, big.size(), kind == RecordKind::kFrame ? big : std::vector<uint8_t>(64, 1));
    Event e = wait_for(worker->get(), Event::Kind::kDisconnected);
    EXPECT_EQ(e.reason, kind == RecordKind::kFrame ? "a frame record of 1048576 bytes (limit 16384 now)"
                                                   : "a record of kind bind that is not expected now");
    ::close(conn);
    ::close(*fake);
  }
  auto server = serve(trusting());
  ASSERT_TRUE(server.ok()) << server.status().message();
  auto worker = connect((*server)->address(), co);
  ASSERT_TRUE(worker.ok()) << worker.status().message();
  const PeerId peer = accept(server->get(), worker->get());
  (*worker)->authenticated(0);
  ASSERT_TRUE((*server)->send_async(peer, big.data(), big.size(), [](Status) {}).ok());
  Event m = next_at_client(server->get(), worker->get());
  ASSERT_EQ(m.kind, Event::Kind::kMessage) << m.reason;
  ASSERT_EQ(m.frame->size(), big.size());
  EXPECT_EQ(std::memcmp(m.frame->data(), big.data(), big.size()), 0);
}

// Injects 9 small frames from a peer not yet authenticated (the handshake
// needs 2; the cap is 8); checks the 9th drops it with the reason, the
// first 8 having arrived.
TEST(UcxPreauthTest, MoreFramesThanTheCapDropThePeer) {
  auto server = serve();
  ASSERT_TRUE(server.ok());
  auto stranger = connect((*server)->address(), without_arena());
  ASSERT_TRUE(stranger.ok());
  const PeerId peer = accept(server->get(), stranger->get());  // frame 1
  uint8_t small[64] = {3};
  for (int i = 2; i <= 9; ++i) ASSERT_TRUE((*stranger)->send_async(0, small, sizeof small, [](Status) {}).ok());
  int messages = 1;
  std::string reason;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (reason.empty() && std::chrono::steady_clock::now() < deadline) {
    auto e = (*server)->poll(50);
    ASSERT_TRUE(e.ok());
    if (!e->has_value() || (*e)->peer != peer) continue;
    if ((*e)->kind == Event::Kind::kMessage) ++messages;
    if ((*e)->kind == Event::Kind::kDisconnected) reason = (*e)->reason;
  }
  EXPECT_EQ(messages, 8);
  EXPECT_EQ(reason, "more than 8 frames before authentication");
}

// Injects a 4th connection while 3 (max_pending_peers) wait to
// authenticate; then, one of them authenticated, a 5th (room for it) and a
// 6th; checks the oldest waiting one is evicted each time (with the
// reason), never an authenticated one, and the others stay.
TEST(UcxPreauthTest, PendingPeersBeyondTheCapEvictTheOldest) {
  Options so;
  so.max_pending_peers = 3;
  auto server = serve(so);
  ASSERT_TRUE(server.ok());
  std::vector<std::unique_ptr<Endpoint>> clients;
  std::vector<PeerId> peers;
  std::vector<Event> seen;
  auto join = [&] {
    auto c = connect((*server)->address(), without_arena());
    ASSERT_TRUE(c.ok());
    clients.push_back(std::move(c).value());
    peers.push_back(accept(server->get(), clients.back().get(), &seen));
  };
  for (int i = 0; i < 3; ++i) ASSERT_NO_FATAL_FAILURE(join());
  ASSERT_TRUE(seen.empty());
  ASSERT_NO_FATAL_FAILURE(join());
  Event d = next_of(&seen, server->get(), Event::Kind::kDisconnected);
  EXPECT_EQ(d.peer, peers[0]);
  EXPECT_EQ(d.reason, "evicted: 3 connections were waiting to authenticate (max_pending_peers), this one the oldest");
  wait_for(clients[0].get(), Event::Kind::kDisconnected);

  (*server)->authenticated(peers[1]);
  ASSERT_NO_FATAL_FAILURE(join());
  EXPECT_TRUE(seen.empty()) << "the authenticated peer left room for the 5th";
  ASSERT_NO_FATAL_FAILURE(join());
  d = next_of(&seen, server->get(), Event::Kind::kDisconnected);
  EXPECT_EQ(d.peer, peers[2]) << "the oldest still waiting, not the authenticated one";
  // The authenticated peer and the three newest still reach the trainer.
  uint8_t msg[16] = {9};
  for (size_t i : {size_t{1}, size_t{3}, size_t{4}, size_t{5}}) {
    std::vector<Event> got = send_while_polling(clients[i].get(), msg, sizeof msg, server->get());
    EXPECT_EQ(next_of(&got, server->get(), Event::Kind::kMessage).peer, peers[i]) << "client " << i;
  }
}

// A worker not yet authenticated has no UCX endpoint and offers no arena
// (its frames go on the socket); once the trainer authenticated it, its
// next send offers the arena, which the trainer maps before the frame that
// follows: large frames go through shared memory.
TEST(UcxPreauthTest, TheArenaIsOfferedOnlyAfterAuthentication) {
  auto server = serve();
  ASSERT_TRUE(server.ok());
  Options co;
  co.shm_arena_bytes = 1 << 20;
  auto worker = connect((*server)->address(), co);
  ASSERT_TRUE(worker.ok());
  const PeerId peer = accept(server->get(), worker->get());
  for (int i = 0; i < 10; ++i) (void)(*worker)->poll(10);
  EXPECT_EQ((*worker)->path_stats().shared_memory_status, "");
  EXPECT_EQ((*worker)->reserve(400 << 10), nullptr);

  (*server)->authenticated(peer);
  uint8_t program[32] = {5};  // what the session sends next: it waits for the worker's address
  std::atomic<bool> sent{false};
  ASSERT_TRUE((*server)->send_async(peer, program, sizeof program, [&](Status s) {
    EXPECT_TRUE(s.ok()) << s.message();
    sent = true;
  }).ok());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  bool got = false;
  while (!got && std::chrono::steady_clock::now() < deadline) {
    (void)(*server)->poll(1);
    auto e = (*worker)->poll(10);
    ASSERT_TRUE(e.ok());
    got = e->has_value() && (*e)->kind == Event::Kind::kMessage;
  }
  ASSERT_TRUE(got) << "the frame queued after authentication never arrived";
  auto large = pattern(400 << 10, 6);
  std::vector<Event> seen = send_while_polling(worker->get(), large.data(), large.size(), server->get());
  EXPECT_EQ((*worker)->path_stats().shared_memory_status, "in use");
  Event m = next_of(&seen, server->get(), Event::Kind::kMessage);
  ASSERT_EQ(m.frame->size(), large.size());
  EXPECT_EQ(std::memcmp(m.frame->data(), large.data(), large.size()), 0);
  EXPECT_EQ((*server)->path_stats().shared_memory, 1u);
  EXPECT_TRUE(sent);
}

// A worker that proved itself (here: a trusting trainer, a plain socket
// that sent one frame) but whose UCX never attaches, as when a network
// between the nodes drops its data connection: a frame the trainer sends
// it is taken at once, not after the send timeout (the trainer's loop
// serves its other workers meanwhile), and once that timeout passed the
// trainer drops it, naming why, and closes its socket.
TEST(UcxPreauthTest, AWorkerWhoseUcxNeverAttachesHoldsUpNoSendAndIsDropped) {
  Options so = testing::trusting();
  so.send_timeout_ms = 700;
  auto server = serve(so);
  ASSERT_TRUE(server.ok()) << server.status().message();
  const int half = connect_tcp(port_of((*server)->address()));
  write_record(half, RecordKind::kFrame, 4, {1, 2, 3, 4});
  const Event c = wait_for(server->get(), Event::Kind::kConnected);
  (void)wait_for(server->get(), Event::Kind::kMessage);
  // Its bind record comes (the trainer trusts it); it never attaches.
  std::vector<uint8_t> got;
  for (int i = 0; i < 40 && got.size() < kRecordHead; ++i) {
    (void)(*server)->poll(5);
    (void)testing::closed_by_peer(half, 20, &got);
  }
  ASSERT_GE(got.size(), kRecordHead) << "no bind record came";
  EXPECT_EQ(got[4], static_cast<uint8_t>(RecordKind::kBind));
  const auto start = std::chrono::steady_clock::now();
  auto program = pattern(200, 3);
  Status sent = (*server)->send(c.peer, program.data(), program.size());
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_TRUE(sent.ok()) << sent.message();
  EXPECT_LT(took, std::chrono::milliseconds(200)) << "the send waited for the worker's UCX to attach";
  const Event d = wait_for(server->get(), Event::Kind::kDisconnected, 5000);
  EXPECT_EQ(d.peer, c.peer);
  EXPECT_EQ(d.reason.rfind("its UCX did not attach within 700 ms of its bind", 0), 0u) << d.reason;
  EXPECT_TRUE(testing::closed_by_peer(half, 2000, nullptr)) << "its socket stayed open";
  ::close(half);
}

// Injects 100 strangers (another process, this binary re-run; stranger.h)
// while the trainer polls: a third with stock UCX, a client-server
// endpoint sending one forced-eager 2 GiB active message; a third with
// the trainer's own frame record announcing 2 GiB and streaming 64 MiB of
// it; a third at once speaking the handshake (a Hello-sized frame) and
// reading all the trainer sends. Checks the trainer ends every one, none
// receives a bind record (the trainer's UCP address), its resident memory
// grows by less than 64 MiB (sampled at every poll), and a real worker
// joining afterwards sends an 8 MiB frame that arrives intact.
TEST(UcxPreauthTest, HundredStrangersAnnouncing2GiBCostLittleMemory) {
  auto server = serve();
  ASSERT_TRUE(server.ok());
  const long before = rss_kib();
  ASSERT_GT(before, 0);
  pid_t child = fork();
  if (child == 0) {
    setenv("GM_TEST_ANNOUNCE", (*server)->address().c_str(), 1);
    setenv("UCX_TLS", "tcp", 1);  // light contexts; the trainer's side is the same on any transport
    setenv("UCX_RNDV_THRESH", "inf", 1);
    execl("/proc/self/exe", "transport_test", nullptr);
    _exit(127);
  }
  long peak = before;
  std::set<PeerId> connected, dropped;
  int status = -1;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(180);
  while (std::chrono::steady_clock::now() < deadline) {
    auto e = (*server)->poll(20);
    ASSERT_TRUE(e.ok()) << e.status().message();
    peak = std::max(peak, rss_kib());
    if (e->has_value() && (*e)->kind == Event::Kind::kConnected) connected.insert((*e)->peer);
    if (e->has_value() && (*e)->kind == Event::Kind::kDisconnected) dropped.insert((*e)->peer);
    if (e->has_value() && (*e)->kind == Event::Kind::kMessage) {
      // What a session does with a Hello that does not check out (a peer
      // evicted meanwhile is gone already: nothing happens).
      (*server)->disconnect((*e)->peer);
      dropped.insert((*e)->peer);
    }
    if (waitpid(child, &status, WNOHANG) == child) break;
  }
  if (status == -1) {
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
    FAIL() << "the attacker did not finish within 180 s";
  }
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "connections the trainer did not end (+100: a stranger got a bind record): "
                                    << WEXITSTATUS(status);
  EXPECT_EQ(connected, dropped) << "every stranger that became a peer was dropped";
  EXPECT_FALSE(connected.empty()) << "the talking strangers' frames reached the owner as pending peers";
  const long grown_kib = peak - before;
  RecordProperty("rss_growth_kib", std::to_string(grown_kib));
  std::printf("trainer RSS %ld KiB before, %ld KiB at most during 100 strangers announcing 2 GiB\n", before, peak);
  EXPECT_LT(grown_kib, 64 << 10);

  auto worker = connect((*server)->address(), without_arena());
  ASSERT_TRUE(worker.ok());
  const PeerId w = accept(server->get(), worker->get());
  (*server)->authenticated(w);
  auto frame = pattern(8 << 20, 7);
  std::vector<Event> seen = send_while_polling(worker->get(), frame.data(), frame.size(), server->get());
  Event m = next_of(&seen, server->get(), Event::Kind::kMessage);
  ASSERT_EQ(m.frame->size(), frame.size());
  EXPECT_EQ(std::memcmp(m.frame->data(), frame.data(), frame.size()), 0);
}

// A trainer started at a soft descriptor limit of 1,024 (what Slurm passes
// on from a submitting shell) under a higher hard one: listening raises the
// soft limit to the hard one, at most 65,536, so connections that are none
// of its workers' leave room for the files the trainer opens.
TEST(UcxPreauthTest, ListeningRaisesTheSoftDescriptorLimitTowardsTheHardOne) {
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  if (saved.rlim_max <= 1024) GTEST_SKIP() << "the hard descriptor limit is " << saved.rlim_max << ": nothing to raise";
  rlimit low = saved;
  low.rlim_cur = 1024;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  auto server = serve();
  ASSERT_TRUE(server.ok()) << server.status().message();
  rlimit now{};
  getrlimit(RLIMIT_NOFILE, &now);
  EXPECT_EQ(now.rlim_cur, std::min<rlim_t>(saved.rlim_max, 65536));
  setrlimit(RLIMIT_NOFILE, &saved);
}

// Injects 4 rendezvous frames of 1 MiB to a trainer whose receive budget
// holds 2, holding the frames it delivered; checks the third is not
// delivered while both are held (its sender waits), each arrives once a
// held one is dropped, all in order and intact; and a frame larger than
// the whole budget drops its peer with the reason.
TEST(UcxBudgetTest, RendezvousFramesWaitForRoomAndNothingIsLost) {
  auto memory = std::make_shared<testing::RecordingMemory>();
  Options so = trusting();
  so.memory = memory;
  so.receive_budget = 2 << 20;
  auto server = serve(so);
  ASSERT_TRUE(server.ok());
  auto worker = connect((*server)->address(), without_arena());
  ASSERT_TRUE(worker.ok());
  (void)accept(server->get(), worker->get());
  std::vector<std::vector<uint8_t>> frames;
  for (int i = 0; i < 4; ++i) frames.push_back(pattern(1 << 20, static_cast<uint8_t>(10 + i)));
  std::atomic<int> sent{0};
  Status failed;
  std::thread sender([&] {
    for (auto& f : frames) {
      Status s = (*worker)->send(0, f.data(), f.size());
      if (!s.ok()) {
        failed = s;
        return;
      }
      ++sent;
    }
  });
  std::vector<Event> held;
  auto next_message = [&](int timeout_ms) -> std::optional<Event> {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < deadline) {
      auto e = (*server)->poll(10);
      EXPECT_TRUE(e.ok());
      if (e.ok() && e->has_value() && (*e)->kind == Event::Kind::kMessage) return std::move(**e);
      if (e.ok() && e->has_value() && (*e)->kind == Event::Kind::kDisconnected) ADD_FAILURE() << (*e)->reason;
    }
    return std::nullopt;
  };
  for (int i = 0; i < 2; ++i) {
    auto m = next_message(10000);
    ASSERT_TRUE(m.has_value()) << "frame " << i;
    held.push_back(std::move(*m));
  }
  EXPECT_FALSE(next_message(500).has_value()) << "a third frame beyond the budget";
  EXPECT_LE(memory->allocations() - memory->releases(), 2u);
  EXPECT_LE(sent.load(), 3) << "the fourth send cannot have finished";
  for (int i = 2; i < 4; ++i) {
    held.erase(held.begin());  // dropping a held frame makes room
    auto m = next_message(10000);
    ASSERT_TRUE(m.has_value()) << "frame " << i;
    held.push_back(std::move(*m));
    EXPECT_LE(memory->allocations() - memory->releases(), 2u);
  }
  sender.join();
  EXPECT_TRUE(failed.ok()) << failed.message();
  EXPECT_EQ(sent.load(), 4);
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(held[i].frame->size(), frames[2 + i].size());
    EXPECT_EQ(std::memcmp(held[i].frame->data(), frames[2 + i].data(), frames[2 + i].size()), 0) << "frame " << 2 + i;
  }

  auto huge = pattern(3 << 20, 1);
  ASSERT_TRUE((*worker)->send_async(0, huge.data(), huge.size(), [](Status) {}).ok());
  Event d = wait_for(server->get(), Event::Kind::kDisconnected);
  EXPECT_EQ(d.reason, "message of 3145728 bytes refused (more than the whole receive budget, 2097152 bytes)");
}

#endif

// A peer's strings are bounded and escaped before they reach a log line.
TEST(PeerTextTest, BoundsAndEscapes) {
  EXPECT_EQ(peer_text("worker-1"), "worker-1");
  EXPECT_EQ(peer_text(std::string("a\nb\x01\\", 5)), "a\\x0ab\\x01\\x5c");
  EXPECT_EQ(peer_text(std::string(1000, 'x'), 10), std::string(10, 'x') + "... (1000 bytes)");
}

}  // namespace
}  // namespace goldminer::transport
