// Tests of the handshake socket's records (handshake_socket.h) on a
// socket pair: limits per kind, bounded reads, split and queued writes.
#include "mpi_transport/handshake_socket.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <vector>

namespace goldminer::transport {
namespace {

struct Pair {
  Pair() {
    int fds[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds), 0);
    a = std::make_unique<HandshakeSocket>(fds[0]);
    b_fd = fds[1];
    b = std::make_unique<HandshakeSocket>(fds[1]);
  }
  std::unique_ptr<HandshakeSocket> a, b;
  int b_fd = -1;
};

HandshakeSocket::Limit frames_up_to(size_t n) {
  return [n](RecordKind k) -> std::optional<size_t> {
    if (k == RecordKind::kFrame) return n;
    return std::nullopt;
  };
}

TEST(HandshakeSocketTest, RecordsArriveWholeAndInOrder) {
  Pair p;
  const std::vector<uint8_t> one(100, 1), two(3000, 2);
  ASSERT_TRUE(p.a->write(RecordKind::kFrame, one.data(), one.size()).ok());
  ASSERT_TRUE(p.a->write(RecordKind::kFrame, two.data(), two.size()).ok());
  ASSERT_TRUE(p.a->write(RecordKind::kFrame, nullptr, 0).ok());
  std::vector<Record> got;
  ASSERT_TRUE(p.b->read(frames_up_to(4096), 16, &got).ok());
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].payload, one);
  EXPECT_EQ(got[1].payload, two);
  EXPECT_TRUE(got[2].payload.empty());
  EXPECT_TRUE(p.b->heard());
}

// A head announcing more than the limit ends the connection before any
// byte of the payload is read (the reader holds the head alone).
TEST(HandshakeSocketTest, ARecordOverItsLimitEndsTheConnection) {
  Pair p;
  const uint8_t head[kRecordHead] = {0x00, 0x00, 0x00, 0x80, 1};  // a 2 GiB frame
  ASSERT_EQ(::write(p.b_fd == -1 ? -1 : p.a->fd(), head, sizeof head), static_cast<ssize_t>(sizeof head));
  std::vector<Record> got;
  Status s = p.b->read(frames_up_to(16 << 10), 16, &got);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("a frame record of 2147483648 bytes (limit 16384 now)"), std::string::npos)
      << s.message();
  EXPECT_TRUE(got.empty());
}

TEST(HandshakeSocketTest, AKindNotExpectedNowEndsTheConnection) {
  Pair p;
  const std::vector<uint8_t> address(40, 7);
  ASSERT_TRUE(p.a->write(RecordKind::kBind, address.data(), address.size()).ok());
  std::vector<Record> got;
  Status s = p.b->read(frames_up_to(100), 16, &got);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("a record of kind bind that is not expected now"), std::string::npos) << s.message();
  const uint8_t junk[kRecordHead] = {1, 0, 0, 0, 99};
  Pair q;
  ASSERT_EQ(::write(q.a->fd(), junk, sizeof junk), static_cast<ssize_t>(sizeof junk));
  s = q.b->read(frames_up_to(100), 16, &got);
  EXPECT_NE(s.message().find("kind unknown (99)"), std::string::npos) << s.message();
}

// A record split over many writes is taken only once whole; the reader
// yields at most max_records per call and leaves the rest in the kernel.
TEST(HandshakeSocketTest, PartialRecordsWaitAndReadsAreBounded) {
  Pair p;
  const uint8_t head[kRecordHead] = {4, 0, 0, 0, 1};
  ASSERT_EQ(::write(p.a->fd(), head, 3), 3);
  std::vector<Record> got;
  ASSERT_TRUE(p.b->read(frames_up_to(100), 16, &got).ok());
  EXPECT_TRUE(got.empty());
  ASSERT_EQ(::write(p.a->fd(), head + 3, 2), 2);
  ASSERT_EQ(::write(p.a->fd(), "ab", 2), 2);
  ASSERT_TRUE(p.b->read(frames_up_to(100), 16, &got).ok());
  EXPECT_TRUE(got.empty());
  ASSERT_EQ(::write(p.a->fd(), "cd", 2), 2);
  ASSERT_TRUE(p.b->read(frames_up_to(100), 16, &got).ok());
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(std::string(got[0].payload.begin(), got[0].payload.end()), "abcd");
  got.clear();
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(p.a->write(RecordKind::kFrame, nullptr, 0).ok());
  ASSERT_TRUE(p.b->read(frames_up_to(100), 16, &got).ok());
  EXPECT_EQ(got.size(), 16u);
  ASSERT_TRUE(p.b->read(frames_up_to(100), 100, &got).ok());
  EXPECT_EQ(got.size(), 40u);
}

// What the socket does not take now stays queued and goes with flush();
// the peer's end is reported with a reason.
TEST(HandshakeSocketTest, WritesQueueUntilTakenAndTheEndIsReported) {
  Pair p;
  const std::vector<uint8_t> big(1 << 20, 5);
  ASSERT_TRUE(p.a->write(RecordKind::kFrame, big.data(), big.size()).ok());
  EXPECT_TRUE(p.a->wants_write());
  std::vector<Record> got;
  for (int i = 0; i < 10000 && got.empty(); ++i) {
    ASSERT_TRUE(p.a->flush().ok());
    ASSERT_TRUE(p.b->read(frames_up_to(big.size()), 16, &got).ok());
  }
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].payload, big);
  EXPECT_FALSE(p.a->wants_write());
  p.a.reset();
  Status s = p.b->read(frames_up_to(100), 16, &got);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("connection closed by the peer"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace goldminer::transport
