// Where UCX's TCP transport listens when a firewall guards its port: on
// the interface the trainer listens on only, so that a worker on a node
// with several networks cannot wire its data connection over another one
// (another address family or subnet, whose addresses the job's firewall
// does not admit: its connection would be dropped and it would never
// attach).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>
#include <string>

#include "gm_config.h"
#include "mpi_transport/test_util.h"
#include "mpi_transport/transport.h"
#include "tests/test_util.h"

namespace goldminer::transport {
namespace {

#ifdef GOLDMINER_HAVE_UCX
constexpr char kV4[] = "10.213.99.1";        // on gmv4
constexpr char kV6[] = "fd00:6d67:99::1";    // on gmv6
constexpr int kDataPort = 29311;

// This process's listening TCP sockets on `port`: their addresses, as
// /proc/net/tcp{,6} write them (hex).
std::set<std::string> own_listeners_on(int port) {
  std::set<std::string> found;
  for (const std::string& local : testing::own_listening_sockets())
    if (testing::listening_port(local) == port) found.insert(local.substr(0, local.rfind(':')));
  return found;
}

// The trainer's side, in a network namespace with two networks (this
// binary re-run there with GM_TEST_GUARDED_LISTEN set; UCX state does not
// survive fork()): listens on the IPv4 one with the guarded data port and
// prints the addresses UCX's transport listens on at that port.
const bool guarded_listener_process = [] {
  const char* at = std::getenv("GM_TEST_GUARDED_LISTEN");
  if (at == nullptr) return false;
  unsetenv("UCX_NET_DEVICES");  // the site set none
  Options o = testing::trusting();
  o.tcp_data_port = kDataPort;
  auto server = listen(at, o);
  if (!server.ok()) {
    std::printf("listen error: %s\n", server.status().message().c_str());
    _exit(0);
  }
  for (const std::string& a : own_listeners_on(kDataPort)) std::printf("listener %s\n", a.c_str());
  std::fflush(stdout);
  _exit(0);
}();

std::string hex_of_v4(const char* text) {
  in_addr a{};
  inet_pton(AF_INET, text, &a);
  char hex[16];
  std::snprintf(hex, sizeof hex, "%08X", a.s_addr);  // /proc/net/tcp: the address's bytes as one host-order word
  return hex;
}

TEST(UcxNetDevicesTest, AGuardedDataPortListensOnTheTrainersNetworkOnly) {
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  const pid_t child = fork();
  if (child == 0) {
    close(out[0]);
    dup2(out[1], STDOUT_FILENO);
    // Its own network and a sysfs of it (UCX lists interfaces there), as
    // `ip netns exec` gives a node of the devcluster.
    if (unshare(CLONE_NEWNET | CLONE_NEWNS) != 0 || mount("", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        umount2("/sys", MNT_DETACH) != 0 || mount("sysfs", "/sys", "sysfs", 0, nullptr) != 0 ||
        std::system("ip link set lo up && ip link add gmv4 type veth peer name gmv4p && "
                    "ip link add gmv6 type veth peer name gmv6p && "
                    "for l in gmv4 gmv4p gmv6 gmv6p; do ip link set $l up || exit 1; done && "
                    "ip addr add 10.213.99.1/24 dev gmv4 && ip addr add fd00:6d67:99::1/64 dev gmv6 nodad") != 0) {
      std::printf("setup failed\n");
      std::fflush(stdout);
      _exit(0);
    }
    setenv("GM_TEST_GUARDED_LISTEN", (std::string("ucx://") + kV4 + ":0").c_str(), 1);
    execl("/proc/self/exe", "transport_test", nullptr);
    _exit(127);
  }
  const std::string got = goldminer::testing::output_of_child(out, child);
  // What the child said (UCX's warnings go to stdout too).
  std::string said;
  std::istringstream lines(got);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("listener ", 0) == 0 || line.rfind("listen error", 0) == 0 || line == "setup failed")
      said += line + "\n";
  if (said == "setup failed\n") GTEST_SKIP() << "cannot make veths in a network namespace here (needs root and ip)";
  // One listener at the port, on the trainer's address; none on the IPv6
  // network (kV6) or any other.
  EXPECT_EQ(said, "listener " + hex_of_v4(kV4) + "\n")
      << "UCX's TCP transport listens at port " << kDataPort << " on: " << said << "(expected " << kV4 << " only, not "
      << kV6 << "); the trainer's process printed:\n" << got;
}
#endif

}  // namespace
}  // namespace goldminer::transport
