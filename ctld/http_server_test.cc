#include "ctld/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

namespace goldminer {
namespace {

TEST(HttpTest, AServerAnswersCallsAndRefusesWhatIsNotARequest) {
  auto server = HttpServer::listen("127.0.0.1:0");
  ASSERT_TRUE(server.ok()) << server.status().message();
  HttpServer* s = server->get();
  std::thread serving([s] {
    s->serve([](const HttpRequest& r) { return HttpResponse{200, "text/plain", r.method + " " + r.path + " " + r.body}; });
  });
  const std::string address = "127.0.0.1:" + std::to_string(s->port());
  auto r = http_call(address, HttpRequest{"POST", "/x", std::string(60000, 'b')}, 5);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body.size(), 8u + 60000);
  // Bytes that are not HTTP: 400 naming why.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_port = htons(static_cast<uint16_t>(s->port()));
  sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&sin), sizeof sin), 0);
  const std::string junk = "HELLO\r\n\r\n";
  ASSERT_EQ(::write(fd, junk.data(), junk.size()), static_cast<ssize_t>(junk.size()));
  std::string answer;
  char buf[512];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) answer.append(buf, static_cast<size_t>(n));
  ::close(fd);
  EXPECT_EQ(answer.rfind("HTTP/1.0 400 Bad Request\r\n", 0), 0u) << answer;
  EXPECT_NE(answer.find("http: bad request line 'HELLO'"), std::string::npos) << answer;
  s->stop();
  serving.join();
  server->reset();
  // Nobody listens any more.
  auto gone = http_call(address, HttpRequest{"GET", "/", ""}, 2);
  ASSERT_FALSE(gone.ok());
  EXPECT_NE(gone.status().message().find("Connection refused"), std::string::npos) << gone.status().message();
}

TEST(HttpTest, ACallToAServerThatNeverAnswersTimesOut) {
  auto server = HttpServer::listen("127.0.0.1:0");  // listens, never accepts
  ASSERT_TRUE(server.ok());
  auto r = http_call("127.0.0.1:" + std::to_string((*server)->port()), HttpRequest{"GET", "/jobs", ""}, 0.3);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("timed out"), std::string::npos) << r.status().message();
}

// A connection from `source` (a loopback address) to the server's port;
// -1 when the source cannot be bound.
int connect_from(const char* source, int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  inet_pton(AF_INET, source, &from.sin_addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0) {
    ::close(fd);
    return -1;
  }
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

std::string read_all(int fd) {
  std::string answer;
  char buf[512];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) answer.append(buf, static_cast<size_t>(n));
  return answer;
}

// Injected: 40 connections from 127.0.0.2, each sending half a request
// head and then nothing (slowloris), and a 41st. Checked: 4 (max_per_peer)
// are held, the others refused at once (503 "busy"); a request from
// 127.0.0.1 meanwhile is answered within 0.5 s; each held connection is
// answered 408 once its 1 s is over.
TEST(HttpTest, SlowConnectionsFromOnePeerHoldItsOwnSlotsOnly) {
  auto server = HttpServer::listen("127.0.0.1:0");
  ASSERT_TRUE(server.ok()) << server.status().message();
  HttpServer* s = server->get();
  HttpServeLimits limits;
  limits.max_connections = 16;
  limits.max_per_peer = 4;
  limits.timeout_s = 1;
  std::thread serving([s, limits] {
    s->serve([](const HttpRequest& r) { return HttpResponse{200, "text/plain", "hello " + r.peer}; }, limits);
  });
  std::vector<int> slow;
  int probe = connect_from("127.0.0.2", s->port());
  if (probe < 0) {
    s->stop();
    serving.join();
    GTEST_SKIP() << "cannot connect from 127.0.0.2 on this machine's loopback";
  }
  slow.push_back(probe);
  for (int i = 1; i < 40; ++i) slow.push_back(connect_from("127.0.0.2", s->port()));
  const std::string half = "GET /jobs HTTP/1.0\r\nHost: x\r\n";
  for (int fd : slow) (void)::send(fd, half.data(), half.size(), MSG_NOSIGNAL);
  // One more that sends nothing: its refusal is read whole (the others'
  // may be cut by the reset their unread bytes cause).
  int quiet = connect_from("127.0.0.2", s->port());
  ASSERT_GE(quiet, 0);
  const auto start = std::chrono::steady_clock::now();
  auto r = http_call("127.0.0.1:" + std::to_string(s->port()), HttpRequest{"GET", "/jobs", ""}, 2);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "hello 127.0.0.1");
  EXPECT_LT(took, 0.5);
  std::string refused = read_all(quiet);
  ::close(quiet);
  EXPECT_EQ(refused.rfind("HTTP/1.0 503 Service Unavailable\r\n", 0), 0u) << refused;
  EXPECT_NE(refused.find("busy: 4 connections from 127.0.0.2 in hand"), std::string::npos) << refused;
  int held = 0, other = 0;
  for (int fd : slow) {
    std::string answer = read_all(fd);
    ::close(fd);
    if (answer.rfind("HTTP/1.0 408 Request Timeout\r\n", 0) == 0) {
      ++held;
      EXPECT_NE(answer.find("http: receive: timed out"), std::string::npos) << answer;
    } else {
      ++other;
      EXPECT_TRUE(answer.empty() || answer.rfind("HTTP/1.0 503 ", 0) == 0) << answer;
    }
  }
  EXPECT_EQ(held, 4);
  EXPECT_EQ(other, 36);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 3.0)
      << "the held ones are let go after their second";
  s->stop();
  serving.join();
}

}  // namespace
}  // namespace goldminer
