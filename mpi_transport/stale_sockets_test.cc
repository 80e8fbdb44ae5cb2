// Tests of the stale socket sweeper (stale_sockets.h) on plain TCP sockets.
#include "mpi_transport/stale_sockets.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <set>
#include <string>
#include <vector>

#include "mpi_transport/test_util.h"

namespace goldminer::transport {
namespace {

using testing::connect_tcp;

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


}  // namespace
}  // namespace goldminer::transport
