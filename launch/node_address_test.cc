#include "launch/node_address.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "gmcore/net_interface.h"
#include "tests/test_util.h"

namespace goldminer {
namespace {

TEST(NodeAddressTest, NodeAddressIsAnIpv4AddressOfTheSitesInterface) {
  auto a = node_address("");
  ASSERT_TRUE(a.ok()) << a.status().message();
  in_addr parsed{};
  EXPECT_EQ(inet_pton(AF_INET, a->c_str(), &parsed), 1) << *a;
  auto lo = node_address("lo");
  ASSERT_TRUE(lo.ok()) << lo.status().message();
  EXPECT_EQ(*lo, "127.0.0.1");
  auto none = node_address("gm-no-such0");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().message(), "dw_network: this node has no interface 'gm-no-such0'");
}

sockaddr_storage address_of(int family, const char* text) {
  sockaddr_storage ss{};
  ss.ss_family = static_cast<sa_family_t>(family);
  void* where = family == AF_INET ? static_cast<void*>(&reinterpret_cast<sockaddr_in*>(&ss)->sin_addr)
                                  : static_cast<void*>(&reinterpret_cast<sockaddr_in6*>(&ss)->sin6_addr);
  EXPECT_EQ(inet_pton(family, text, where), 1) << text;
  return ss;
}

// The interface an address is on: the node's own address's, loopback's;
// none for a wildcard or an address no interface here holds.
TEST(NodeAddressTest, TheInterfaceHoldingAnAddressIsNamed) {
  auto mine = node_address("");
  ASSERT_TRUE(mine.ok()) << mine.status().message();
  EXPECT_EQ(interface_holding(address_of(AF_INET, "127.0.0.1")), "lo");
  if (*mine != "127.0.0.1") {
    const std::string name = interface_holding(address_of(AF_INET, mine->c_str()));
    EXPECT_FALSE(name.empty()) << *mine;
    EXPECT_NE(name, "lo") << *mine;
  }
  EXPECT_EQ(interface_holding(address_of(AF_INET, "0.0.0.0")), "");
  EXPECT_EQ(interface_holding(address_of(AF_INET, "192.0.2.77")), "");  // TEST-NET-1: nobody's
  EXPECT_EQ(interface_holding(address_of(AF_INET6, "::")), "");
  EXPECT_EQ(interface_holding(address_of(AF_INET6, "2001:db8::77")), "");  // documentation prefix
}

// An interface with only IPv6 addresses gives its first one that is not
// link-local. Run in a
// network namespace of a child (needs root and `ip`), on a veth there
// (which also gets a link-local address, to be skipped).
TEST(NodeAddressTest, AnInterfaceWithOnlyIpv6GivesItsGlobalAddress) {
  if (geteuid() != 0 || std::system("command -v ip >/dev/null") != 0)
    GTEST_SKIP() << "needs root and ip(8) to make an interface in a network namespace";
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(out[0]);
    std::string text;
    if (unshare(CLONE_NEWNET) != 0 ||
        std::system("ip link add gm6 type veth peer name gm6p && ip link set gm6 up && ip link set gm6p up && "
                    "ip addr add fd00:6d67::11/64 dev gm6 nodad && ip addr add fd00:6d67::12/64 dev gm6 nodad") != 0) {
      text = "setup failed";
    } else {
      for (const char* name : {"gm6", "gm6p"}) {
        auto a = node_address(name);
        text += (a.ok() ? *a : "error: " + a.status().message()) + "\n";
      }
    }
    (void)!write(out[1], text.data(), text.size());
    _exit(0);
  }
  const std::string got = testing::output_of_child(out, child);
  if (got == "setup failed") GTEST_SKIP() << "cannot make a veth in a network namespace here";
  const size_t nl = got.find('\n');
  ASSERT_NE(nl, std::string::npos) << got;
  const std::string gm6 = got.substr(0, nl), gm6p = got.substr(nl + 1);
  // Either ULA address (getifaddrs lists them newest first).
  EXPECT_TRUE(gm6 == "fd00:6d67::11" || gm6 == "fd00:6d67::12") << gm6;
  EXPECT_EQ(gm6p, "error: dw_network: interface 'gm6p' has no IPv4 address and no IPv6 address other than "
                  "link-local on this node\n");
}

}  // namespace
}  // namespace goldminer
