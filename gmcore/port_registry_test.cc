// The node's registry of trainer ports (gmcore/port_registry.h) in a
// temporary directory, with stand-in step liveness and a real bind probe.
#include "gmcore/port_registry.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

namespace goldminer {
namespace {

class PortRegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gm-ports-test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    r_.path = dir_ + "/goldminer/ports";  // its directory is made on first use
    r_.range = PortRange{30000, 30003};
    r_.alive = [this](pid_t pid) { return live_.count(pid) > 0; };
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
  std::string registry_text() const {
    std::ifstream in(r_.path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  std::string dir_;
  PortRegistry r_;
  std::set<pid_t> live_ = {101, 102, 103, 104, 105};
};

TEST_F(PortRegistryTest, JobsWhoseIdsWouldCollideGetDifferentPortsAndAJobKeepsItsOwn) {
  // 7 and 11 both start at 30003 (id mod 4 = 3): the second gets the next
  // free one, wrapping to the range's start.
  EXPECT_EQ(*reserve_port(r_, 7, 101), 30003);
  EXPECT_EQ(*reserve_port(r_, 11, 102), 30000);
  EXPECT_EQ(*reserve_port(r_, 7, 103), 30003) << "a later step of job 7 gets the job's port";
  EXPECT_EQ(registry_text(), "30003 7 101\n30000 11 102\n") << "owned by the step that reserved it";
  EXPECT_TRUE(release_port(r_, 7, 103).ok());
  EXPECT_EQ(registry_text(), "30003 7 101\n30000 11 102\n") << "only the owner releases";
  EXPECT_TRUE(release_port(r_, 7, 101).ok());
  EXPECT_EQ(registry_text(), "30000 11 102\n");
  EXPECT_TRUE(release_port(r_, 99, 101).ok()) << "a job without an entry is fine";
}

// The ranks of a data-parallel step each get a port of their own beside
// the job's trainer port (tag "rank:R"); a later step's rank R gets the
// same one while it lives; the step's exit releases every entry it holds.
TEST_F(PortRegistryTest, RanksOfAStepGetTheirOwnPortsReleasedWithTheStep) {
  EXPECT_EQ(*reserve_port(r_, 7, 101), 30003);
  EXPECT_EQ(*reserve_port(r_, 7, 102, "rank:1"), 30000);
  EXPECT_EQ(*reserve_port(r_, 7, 102, "rank:2"), 30001);
  EXPECT_EQ(*reserve_port(r_, 7, 103, "rank:1"), 30000) << "rank 1 of a later step keeps its port";
  EXPECT_EQ(registry_text(), "30003 7 101\n30000 7 102 rank:1\n30001 7 102 rank:2\n");
  EXPECT_TRUE(release_port(r_, 7, 102).ok());
  EXPECT_EQ(registry_text(), "30003 7 101\n") << "the step's ranks' ports go with it, the trainer's stays";
  EXPECT_EQ(reserve_port(r_, 7, 102, "rank 1").status().message(), "port registry: invalid tag 'rank 1'");
  std::ofstream(r_.path, std::ios::app) << "30002 8 101 Rank!\n";
  EXPECT_FALSE(reserve_port(r_, 9, 104).ok()) << "a line with a bad tag is an error naming it";
}

TEST_F(PortRegistryTest, AStepGoneWithoutReleasingFreesItsPort) {
  EXPECT_EQ(*reserve_port(r_, 4, 101), 30000);
  live_.erase(101);  // killed before its exit callback
  EXPECT_EQ(*reserve_port(r_, 8, 102), 30000);
  EXPECT_EQ(registry_text(), "30000 8 102\n");
}

TEST_F(PortRegistryTest, AFullRangeAndABadLineAreErrorsNamingThem) {
  for (uint32_t job = 1; job <= 4; ++job) ASSERT_TRUE(reserve_port(r_, job, 100 + static_cast<pid_t>(job)).ok());
  EXPECT_EQ(reserve_port(r_, 5, 105).status().message(),
            "port registry: " + r_.path + ": every port of 30000-30003 is reserved or in use on this node");
  std::ofstream(r_.path, std::ios::app) << "30001 x 3\n";
  EXPECT_EQ(reserve_port(r_, 5, 105).status().message(),
            "port registry: " + r_.path +
                ":5: expected 'PORT JOB PID [TAG]', got '30001 x 3' (remove the line, or the file when no job runs on the node)");
  EXPECT_EQ(parse_port_range("30000-29999").status().message(), "expected 1024 <= LOW <= HIGH <= 65535");
  EXPECT_EQ(parse_port_range("30000").status().message(), "expected LOW-HIGH, for example 20000-39999");
  EXPECT_EQ(parse_port_range("20000-39999x").status().message(), "expected LOW-HIGH, for example 20000-39999");
  EXPECT_EQ(parse_port_range("40000-40009")->size(), 10);
}

// A port another process listens on is skipped; one merely bound and
// closed (TIME_WAIT-like reuse) is not.
TEST_F(PortRegistryTest, APortSomeoneListensOnIsSkipped) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int held = 0;
  for (int p = 30100; p < 30200 && held == 0; ++p) {
    sa.sin_port = htons(static_cast<uint16_t>(p));
    if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0 && ::listen(fd, 1) == 0) held = p;
  }
  ASSERT_NE(held, 0) << "no free port to listen on in 30100-30199";
  r_.range = PortRange{held, held + 1};
  r_.bindable = [](int port) { return bind_probe("127.0.0.1", port); };
  auto port = reserve_port(r_, 2, 101);  // 2 mod 2 = 0: it starts at `held`
  ASSERT_TRUE(port.ok()) << port.status().message();
  EXPECT_EQ(*port, held + 1) << "the job's first port has a listener";
  EXPECT_FALSE(bind_probe("127.0.0.1", held));
  ::close(fd);
  EXPECT_TRUE(bind_probe("127.0.0.1", held)) << "free again once closed";
  EXPECT_FALSE(bind_probe("not-an-address", held + 1));
}

// On an IPv6 node address (dw_network with only IPv6) the probe binds that
// address: a port an IPv6 listener holds is not bindable.
TEST_F(PortRegistryTest, TheProbeBindsIpv6Addresses) {
  const int fd = ::socket(AF_INET6, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in6 sa{};
  sa.sin6_family = AF_INET6;
  sa.sin6_addr = in6addr_loopback;
  int held = 0;
  for (int p = 30200; p < 30300 && held == 0; ++p) {
    sa.sin6_port = htons(static_cast<uint16_t>(p));
    if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0 && ::listen(fd, 1) == 0) held = p;
  }
  ASSERT_NE(held, 0) << "no free port to listen on in [::1]:30200-30299";
  EXPECT_FALSE(bind_probe("::1", held));
  ::close(fd);
  EXPECT_TRUE(bind_probe("::1", held)) << "free again once closed";
}

}  // namespace
}  // namespace goldminer
