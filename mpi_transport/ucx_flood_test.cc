// A descriptor flood against a ucx:// trainer: 5,000 plain TCP connections
// opened as fast as one process can and held open, at soft descriptor
// limits of 1,024 (hard too: nothing to raise) and 65,536 (or the hard
// limit, where that is lower: 20,000 on this project's CI). The trainer is
// this binary re-run in a process of its own, so its descriptors, its
// limit and its exit status are its own.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "gm_config.h"
#include "mpi_transport/test_util.h"
#include "mpi_transport/transport.h"

namespace goldminer::transport {
namespace {

#ifdef GOLDMINER_HAVE_UCX
using Clock = std::chrono::steady_clock;

size_t open_descriptors() {
  size_t n = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd"); it != std::filesystem::directory_iterator();
       ++it)
    ++n;
  return n;
}

// The trainer (GM_TEST_FLOOD_SOFT=LIMIT): listens, prints its address,
// authenticates a peer whose first frame is "worker" and answers it
// "welcome"; every 50 ms counts its descriptors and opens /dev/null once.
// When its standard input ends it closes the endpoint (UCX's teardown
// included), prints "max_fds=N open_failures=M peers=P" and exits 0.
const bool flood_trainer = [] {
  const char* soft = getenv("GM_TEST_FLOOD_SOFT");
  if (soft == nullptr) return false;
  rlimit lim{};
  getrlimit(RLIMIT_NOFILE, &lim);
  // At most the hard limit: raising that needs CAP_SYS_RESOURCE.
  lim.rlim_cur = std::min<rlim_t>(std::strtoul(soft, nullptr, 10), lim.rlim_max);
  if (lim.rlim_cur <= 1024) lim.rlim_max = lim.rlim_cur;  // the trainer cannot raise it
  if (setrlimit(RLIMIT_NOFILE, &lim) != 0) _exit(3);
  std::fprintf(stderr, "trainer: soft descriptor limit %llu, hard %llu\n",
               static_cast<unsigned long long>(lim.rlim_cur), static_cast<unsigned long long>(lim.rlim_max));
  setenv("UCX_NET_DEVICES", "lo", 1);
  size_t max_fds = 0, open_failures = 0, peers = 0;
  {
    auto server = listen("ucx://127.0.0.1:0", Options{});
    if (!server.ok()) _exit(4);
    std::printf("%s\n", (*server)->address().c_str());
    std::fflush(stdout);
    fcntl(0, F_SETFL, O_NONBLOCK);
    const std::string welcome = "welcome";
    auto checked = Clock::now();
    for (;;) {
      char c;
      const ssize_t n = ::read(0, &c, 1);
      if (n == 0 || (n < 0 && errno != EAGAIN)) break;
      auto e = (*server)->poll(10);
      if (!e.ok()) _exit(5);
      if (e->has_value() && (*e)->kind == Event::Kind::kMessage &&
          std::string(reinterpret_cast<const char*>((*e)->frame->data()), (*e)->frame->size()) == "worker") {
        ++peers;
        (*server)->authenticated((*e)->peer);
        (void)(*server)->send_async((*e)->peer, reinterpret_cast<const uint8_t*>(welcome.data()), welcome.size(),
                                    [](Status) {});
      }
      if (Clock::now() - checked > std::chrono::milliseconds(50)) {
        checked = Clock::now();
        max_fds = std::max(max_fds, open_descriptors());
        const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
          ++open_failures;
        } else {
          ::close(fd);
        }
      }
    }
  }
  std::printf("max_fds=%zu open_failures=%zu peers=%zu\n", max_fds, open_failures, peers);
  std::fflush(stdout);
  _exit(0);
}();

// A worker's connection, retried as goldminer-dw does: sends "worker",
// waits for "welcome"; the time it took, or a failure.
Expected<Clock::duration> join(const std::string& address, int timeout_ms) {
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::milliseconds(timeout_ms);
  std::string last = "never tried";
  while (Clock::now() < deadline) {
    Options o;
    o.shm_arena_bytes = 0;
    o.send_timeout_ms = 2000;
    auto c = connect(address, o);
    if (!c.ok()) {
      last = c.status().message();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      continue;
    }
    const std::string hello = "worker";
    Status s = (*c)->send(0, reinterpret_cast<const uint8_t*>(hello.data()), hello.size());
    while (s.ok() && Clock::now() < deadline) {
      auto e = (*c)->poll(20);
      if (!e.ok()) break;
      if (!e->has_value()) continue;
      if ((*e)->kind == Event::Kind::kDisconnected) {
        last = (*e)->reason;
        break;
      }
      if ((*e)->kind == Event::Kind::kMessage) {
        // Then a frame on UCX: the endpoints exist.
        std::vector<uint8_t> big(256 << 10, 1);
        Status sent = (*c)->send(0, big.data(), big.size());
        if (!sent.ok()) return sent;
        return Clock::now() - start;
      }
    }
    if (!s.ok()) last = s.message();
  }
  return Status::error("no join within " + std::to_string(timeout_ms) + " ms: " + last);
}

class FloodTest : public ::testing::TestWithParam<int> {};

// Injects 5,000 plain TCP connections to the trainer's port from one
// thread, as fast as non-blocking connect() goes, each held open; a real
// worker joins while they arrive. Checks it joins within 10 s, the
// trainer's descriptors stay below 300 and it can open files all along,
// and it exits 0 after UCX's teardown.
TEST_P(FloodTest, FiveThousandConnectionsNeitherExhaustNorCrashTheTrainer) {
  rlimit mine{};
  getrlimit(RLIMIT_NOFILE, &mine);
  if (mine.rlim_cur < 6000) {
    rlimit want = mine;
    want.rlim_cur = std::max<rlim_t>(6000, mine.rlim_cur);
    if (want.rlim_max < want.rlim_cur) want.rlim_max = want.rlim_cur;
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &want), 0) << "cannot hold 5,000 connections (descriptor limit)";
  }
  int out[2], in[2];
  ASSERT_EQ(pipe(out), 0);
  ASSERT_EQ(pipe(in), 0);
  pid_t child = fork();
  if (child == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    close(in[1]);
    close(out[0]);
    setenv("GM_TEST_FLOOD_SOFT", std::to_string(GetParam()).c_str(), 1);
    execl("/proc/self/exe", "transport_test", nullptr);
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  FILE* from = fdopen(out[0], "r");
  char line[256] = {};
  ASSERT_NE(fgets(line, sizeof line, from), nullptr) << "the trainer did not start";
  const std::string address = std::string(line, strcspn(line, "\n"));
  const uint16_t port = static_cast<uint16_t>(std::stoi(address.substr(address.rfind(':') + 1)));

  std::vector<int> held;
  std::atomic<int> opened{0};
  std::thread flood([&] {
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int i = 0; i < 5000; ++i) {
      const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (fd < 0) break;
      (void)::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
      held.push_back(fd);
      ++opened;
    }
  });
  while (opened < 500) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  setenv("UCX_NET_DEVICES", "lo", 1);
  auto joined = join(address, 10000);
  flood.join();
  EXPECT_TRUE(joined.ok()) << joined.status().message();
  if (joined.ok())
    std::printf("a worker joined in %.0f ms while 5,000 connections arrived (soft limit %d)\n",
                std::chrono::duration<double, std::milli>(*joined).count(), GetParam());
  EXPECT_EQ(opened.load(), 5000);
  std::this_thread::sleep_for(std::chrono::seconds(3));  // held open past the handshake timeout
  // Another worker joins after the flood, its connections still held.
  auto again = join(address, 10000);
  EXPECT_TRUE(again.ok()) << again.status().message();

  close(in[1]);  // the trainer stops
  int status = -1;
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (waitpid(child, &status, WNOHANG) != child && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (status == -1) {
    kill(child, SIGKILL);
    waitpid(child, &status, 0);
  }
  char stats[256] = {};
  const bool have = fgets(stats, sizeof stats, from) != nullptr;
  fclose(from);
  for (int fd : held) close(fd);
  ASSERT_TRUE(WIFEXITED(status)) << "the trainer died: status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
  ASSERT_TRUE(have);
  size_t max_fds = 0, failures = 0, peers = 0;
  ASSERT_EQ(std::sscanf(stats, "max_fds=%zu open_failures=%zu peers=%zu", &max_fds, &failures, &peers), 3) << stats;
  std::printf("trainer: at most %zu descriptors, %zu failed opens, %zu workers\n", max_fds, failures, peers);
  EXPECT_LT(max_fds, 300u);
  EXPECT_EQ(failures, 0u);
  EXPECT_EQ(peers, 2u);
}

INSTANTIATE_TEST_SUITE_P(SoftLimits, FloodTest, ::testing::Values(1024, 65536));
#endif

}  // namespace
}  // namespace goldminer::transport
