// The node's registry of trainer ports (launch/port_registry.h) in a
// temporary directory, with stand-in step liveness and a real bind probe.
#include "launch/port_registry.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gmcore/log.h"

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
    r_.random_start = false;  // the order tests: low + job mod size (RandomStart... tests the offset)
    // Stand-in processes: each live PID started at PID * 10.
    r_.start_time = [this](pid_t pid) -> Expected<uint64_t> {
      if (live_.count(pid) == 0) return Status::error("no process " + std::to_string(pid));
      return static_cast<uint64_t>(pid) * 10;
    };
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
  std::string registry_text() const {
    std::ifstream in(r_.path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  void append(const std::string& line) const { std::ofstream(r_.path, std::ios::app) << line; }
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
  EXPECT_EQ(registry_text(), "30003 7 101 1010\n30000 11 102 1020\n") << "owned by the step that reserved it";
  EXPECT_TRUE(release_port(r_, 7, 103).ok());
  EXPECT_EQ(registry_text(), "30003 7 101 1010\n30000 11 102 1020\n") << "only the owner releases";
  EXPECT_TRUE(release_port(r_, 7, 101).ok());
  EXPECT_EQ(registry_text(), "30000 11 102 1020\n");
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
  EXPECT_EQ(registry_text(), "30003 7 101 1010\n30000 7 102 1020 rank:1\n30001 7 102 1020 rank:2\n");
  EXPECT_TRUE(release_port(r_, 7, 102).ok());
  EXPECT_EQ(registry_text(), "30003 7 101 1010\n") << "the step's ranks' ports go with it, the trainer's stays";
  EXPECT_EQ(reserve_port(r_, 7, 102, "rank 1").status().message(), "port registry: invalid tag 'rank 1'");
  append("30002 8 101 1010 Rank!\n");
  EXPECT_FALSE(reserve_port(r_, 9, 104).ok()) << "a line with a bad tag is an error naming it";
}

TEST_F(PortRegistryTest, AStepGoneWithoutReleasingFreesItsPort) {
  EXPECT_EQ(*reserve_port(r_, 4, 101), 30000);
  live_.erase(101);  // killed before its exit callback
  EXPECT_EQ(*reserve_port(r_, 8, 102), 30000);
  EXPECT_EQ(registry_text(), "30000 8 102 1020\n");
}

TEST_F(PortRegistryTest, AFullRangeAndABadLineAreErrorsNamingThem) {
  for (uint32_t job = 1; job <= 4; ++job) ASSERT_TRUE(reserve_port(r_, job, 100 + static_cast<pid_t>(job)).ok());
  // Then who listens in the range by uid (this machine's, whatever it is).
  EXPECT_EQ(reserve_port(r_, 5, 105).status().message().rfind(
                "port registry: " + r_.path +
                    ": every port of 30000-30003 is reserved or in use on this node (reserved by goldminer job 1: 1, "
                    "job 2: 1, job 3: 1, job 4: 1; listening now, by owner: ",
                0),
            0u);
  append("30001 x 3\n");
  EXPECT_EQ(reserve_port(r_, 5, 105).status().message(),
            "port registry: " + r_.path +
                ":5: expected 'PORT JOB PID START [TAG]', got '30001 x 3' (remove the line, or the file when no job runs on the node)");
  EXPECT_EQ(parse_port_range("30000-29999").status().message(), "expected 1024 <= LOW <= HIGH <= 65535");
  EXPECT_EQ(parse_port_range("30000").status().message(), "expected LOW-HIGH, for example 20000-39999");
  EXPECT_EQ(parse_port_range("20000-39999x").status().message(), "expected LOW-HIGH, for example 20000-39999");
  EXPECT_EQ(parse_port_range("40000-40009")->size(), 10);
}

// The first port of a job is low + (job + salt) mod size, the salt a
// random 32-bit number in the lock file (0600, written by the first
// reservation, the same for every later one until the file goes with the
// boot's /run); another registry (another boot) has its own.
TEST_F(PortRegistryTest, RandomStartComesFromThisBootsSaltInTheLockFile) {
  r_.random_start = true;
  r_.range = PortRange{20000, 39999};
  auto first = reserve_port(r_, 7, 101);
  ASSERT_TRUE(first.ok()) << first.status().message();
  std::ifstream lock(r_.path + ".lock");
  std::string hex;
  lock >> hex;
  ASSERT_EQ(hex.size(), 8u) << hex;
  const uint64_t salt = std::stoul(hex, nullptr, 16);
  EXPECT_EQ(*first, 20000 + static_cast<int>((7 + salt) % 20000));
  EXPECT_EQ(*reserve_port(r_, 1000, 102), 20000 + static_cast<int>((1000 + salt) % 20000));
  struct stat st {};
  ASSERT_EQ(::stat((r_.path + ".lock").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  PortRegistry other = r_;
  other.path = dir_ + "/other/ports";
  std::set<int> firsts;
  for (int boot = 0; boot < 4; ++boot) {
    other.path = dir_ + "/boot" + std::to_string(boot) + "/ports";
    firsts.insert(*reserve_port(other, 7, 101));
  }
  EXPECT_GT(firsts.size(), 1u) << "four boots, four salts: not all the same port";
  std::ofstream(r_.path + ".lock", std::ios::trunc) << "zz\n";
  EXPECT_NE(reserve_port(r_, 8, 103).status().message().find("expected 8 hex digits"), std::string::npos);
}

// One job holds at most kMaxPortsPerJob ports on a node: more tags than
// that are refused with the count, and other jobs still get theirs.
TEST_F(PortRegistryTest, AJobHoldsAtMostItsShareOfPorts) {
  r_.range = PortRange{30000, 30999};
  std::vector<std::string> tags;
  for (size_t i = 0; i <= kMaxPortsPerJob; ++i) tags.push_back("rank:" + std::to_string(i));
  EXPECT_EQ(reserve_ports(r_, 7, 101, tags).status().message(),
            "port registry: job 7 would hold 257 ports on this node (at most 256)");
  tags.pop_back();
  auto got = reserve_ports(r_, 7, 101, tags);
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(got->size(), kMaxPortsPerJob);
  EXPECT_NE(reserve_port(r_, 7, 102, "rank:999").status().message().find("would hold 257 ports"), std::string::npos);
  EXPECT_TRUE(reserve_port(r_, 8, 102).ok());
}

// Another process listening on every port of the range but one (real
// listeners on 127.0.0.1): the job gets that one; on all of them: the
// error names the uid that listens there and how many.
TEST_F(PortRegistryTest, AllButOnePortHeldByAnotherProcessLeavesThatOneAndAFullRangeNamesTheHolder) {
  std::vector<int> fds;
  int low = 0;
  for (int base = 31000; base < 32000 && low == 0; base += 4) {
    for (int fd : fds) ::close(fd);
    fds.clear();
    for (int p = base; p < base + 4; ++p) {
      const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in sa{};
      sa.sin_family = AF_INET;
      sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      sa.sin_port = htons(static_cast<uint16_t>(p));
      if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || ::listen(fd, 1) != 0) {
        ::close(fd);
        break;
      }
      fds.push_back(fd);
    }
    if (fds.size() == 4) low = base;
  }
  ASSERT_NE(low, 0) << "no 4 free ports in 31000-31999";
  r_.range = PortRange{low, low + 3};
  r_.bindable = [](int port) { return bind_probe("127.0.0.1", port); };
  ::close(fds[2]);  // the one left
  fds[2] = -1;
  auto port = reserve_port(r_, 4, 101);  // its first port is low + 0: held
  ASSERT_TRUE(port.ok()) << port.status().message();
  EXPECT_EQ(*port, low + 2);
  auto full = reserve_port(r_, 5, 102);
  ASSERT_FALSE(full.ok());
  EXPECT_NE(full.status().message().find("reserved by goldminer job 4: 1; listening now, by owner: uid " +
                                         std::to_string(::geteuid()) + ": "),
            std::string::npos)
      << full.status().message();
  EXPECT_GE(listeners_by_uid(r_.range, "/proc/net")[::geteuid()], 3u);
  for (int fd : fds)
    if (fd >= 0) ::close(fd);
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

// A process of this test's, ended and reaped when it goes: it runs
// `body` (async-signal-safe calls only), then waits for SIGKILL; a 60 s
// alarm ends it if the test does not.
class Child {
 public:
  template <typename Body>
  explicit Child(Body body) {
    int p[2];
    if (::pipe(p) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(p[0]);
      ::alarm(60);
      body();
      if (::write(p[1], "r", 1) != 1) ::_exit(1);
      for (;;) ::pause();
    }
    ::close(p[1]);
    char c = 0;
    ready_ = pid_ > 0 && ::read(p[0], &c, 1) == 1;
    ::close(p[0]);
  }
  ~Child() { end(); }
  pid_t pid() const { return pid_; }
  bool ready() const { return ready_; }
  void end() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  bool ready_ = false;
};

mode_t mode_of(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 ? (st.st_mode & 07777) : 0;
}

// The first use makes the directory 0700 and the registry and its lock
// 0600, the process's own (root's in slurmstepd): nobody else can open
// them, so nobody else can lock them.
TEST_F(PortRegistryTest, TheRegistryDirectoryFileAndLockAreTheOwnersAlone) {
  ASSERT_TRUE(reserve_port(r_, 7, 101).ok());
  const std::string dir = dir_ + "/goldminer";
  EXPECT_EQ(mode_of(dir), 0700u);
  EXPECT_EQ(mode_of(r_.path), 0600u);
  EXPECT_EQ(mode_of(r_.path + ".lock"), 0600u);
  struct stat st {};
  ASSERT_EQ(::stat(r_.path.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, ::geteuid());
}

// Injected: another process holds the lock file's flock and never lets go
// (the only one who can is root: a stuck step). Checked: reservation and
// release each fail after the bound (0.5 s here), not before and not much
// later, with an error naming the lock file; once the holder is gone the
// next reservation succeeds at once.
TEST_F(PortRegistryTest, ALockHeldByAnotherProcessFailsClearlyWithinTheBound) {
  ASSERT_TRUE(reserve_port(r_, 7, 101).ok());  // makes the lock file
  const std::string lock = r_.path + ".lock";
  Child holder([&] {
    const int fd = ::open(lock.c_str(), O_RDONLY);
    if (fd < 0 || ::flock(fd, LOCK_EX) != 0) ::_exit(1);
  });
  ASSERT_TRUE(holder.ready()) << "the holder could not lock " << lock;
  r_.lock_wait_s = 0.5;
  const std::string held = "port registry: " + lock +
                           ": locked by another process for more than 0.5 s: no port reserved (a stuck step or a "
                           "root process holds it: fuser -v " + lock + ")";
  using Clock = std::chrono::steady_clock;
  auto t0 = Clock::now();
  auto port = reserve_port(r_, 8, 102);
  const double reserve_s = std::chrono::duration<double>(Clock::now() - t0).count();
  ASSERT_FALSE(port.ok());
  EXPECT_EQ(port.status().message(), held);
  EXPECT_GE(reserve_s, 0.5);
  EXPECT_LT(reserve_s, 1.5) << "the bound is 0.5 s";
  t0 = Clock::now();
  EXPECT_EQ(release_port(r_, 7, 101).message(), held);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 1.5);
  holder.end();
  t0 = Clock::now();
  port = reserve_port(r_, 8, 102);
  ASSERT_TRUE(port.ok()) << port.status().message();
  EXPECT_EQ(*port, 30000);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 0.5) << "a free lock is had at once";
}

// Injected: the directory, the registry and its lock with another owner,
// modes group or others may write, a hard link, symbolic links and things
// that are not files. Checked: each is refused with the path and what is
// wrong (nothing is followed or changed), and a directory or file that is
// merely readable by others (an older registry's 0755 and 0644) is tightened
// to 0700 / 0600 and used.
TEST_F(PortRegistryTest, AnUnsafeDirectoryOrFileIsRefusedAndAReadableOneTightened) {
  const std::string dir = dir_ + "/goldminer", lock = r_.path + ".lock";
  const std::string fix = ": refused (remove it when no job runs on the node)";
  std::vector<std::string> logged;
  log::Sink previous = log::set_sink([&](log::Level, const std::string& line) { logged.push_back(line); });
  ASSERT_TRUE(reserve_port(r_, 7, 101).ok());
  const std::string before = registry_text();
  auto refused = [&](PortRegistry r = PortRegistry()) {
    if (r.path.empty()) r = r_;
    auto port = reserve_port(r, 8, 102);
    return port.ok() ? std::string("reserved ") + std::to_string(*port) : port.status().message();
  };

  r_.owner_uid = static_cast<int64_t>(::geteuid()) + 1;
  EXPECT_EQ(refused(), "port registry: " + dir + ": owned by uid " + std::to_string(::geteuid()) + ", expected uid " +
                           std::to_string(::geteuid() + 1) + fix);
  r_.owner_uid = -1;

  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  EXPECT_EQ(refused(), "port registry: " + dir + ": mode 0777: group or others may write it" + fix);
  ASSERT_EQ(::chmod(dir.c_str(), 0755), 0);
  ASSERT_EQ(::chmod(r_.path.c_str(), 0666), 0);
  EXPECT_EQ(refused(), "port registry: " + r_.path + ": mode 0666: group or others may write it" + fix);
  EXPECT_EQ(mode_of(dir), 0700u) << "the readable directory was tightened before the file was refused";
  ASSERT_EQ(::chmod(r_.path.c_str(), 0644), 0);
  ASSERT_EQ(::chmod(lock.c_str(), 0620), 0);
  EXPECT_EQ(refused(), "port registry: " + lock + ": mode 0620: group or others may write it" + fix);
  ASSERT_EQ(::chmod(lock.c_str(), 0640), 0);
  EXPECT_EQ(registry_text(), before) << "nothing refused was written";
  EXPECT_EQ(refused(), "reserved 30000");
  EXPECT_EQ(mode_of(r_.path), 0600u);
  EXPECT_EQ(mode_of(lock), 0600u);
  log::set_sink(previous);
  EXPECT_EQ(logged, (std::vector<std::string>{"port registry: " + dir + ": mode 0755 tightened to 0700",
                                              "port registry: " + lock + ": mode 0640 tightened to 0600",
                                              "port registry: " + r_.path + ": mode 0644 tightened to 0600"}));
  ASSERT_TRUE(release_port(r_, 8, 102).ok());

  ASSERT_EQ(::link(r_.path.c_str(), (dir_ + "/second-name").c_str()), 0);
  EXPECT_EQ(refused(), "port registry: " + r_.path + ": 2 links to it" + fix);
  ASSERT_EQ(::unlink((dir_ + "/second-name").c_str()), 0);

  // The registry a symbolic link to a file of the same content: refused, the
  // file untouched.
  ASSERT_EQ(::rename(r_.path.c_str(), (dir_ + "/real").c_str()), 0);
  ASSERT_EQ(::symlink((dir_ + "/real").c_str(), r_.path.c_str()), 0);
  EXPECT_EQ(refused(), "port registry: " + r_.path + ": a symbolic link: refused (remove it)");
  EXPECT_EQ(registry_text(), before);
  ASSERT_EQ(::unlink(r_.path.c_str()), 0);
  ASSERT_EQ(::rename((dir_ + "/real").c_str(), r_.path.c_str()), 0);

  ASSERT_EQ(::rename(lock.c_str(), (dir_ + "/real").c_str()), 0);
  ASSERT_EQ(::symlink((dir_ + "/real").c_str(), lock.c_str()), 0);
  EXPECT_EQ(refused(), "port registry: " + lock + ": a symbolic link: refused (remove it)");
  ASSERT_EQ(::unlink(lock.c_str()), 0);
  ASSERT_EQ(::mkfifo(lock.c_str(), 0600), 0);
  EXPECT_EQ(refused(), "port registry: " + lock + ": not a regular file" + fix) << "a FIFO is opened without blocking";
  ASSERT_EQ(::unlink(lock.c_str()), 0);
  ASSERT_EQ(::rename((dir_ + "/real").c_str(), lock.c_str()), 0);

  PortRegistry through_link = r_;
  through_link.path = dir_ + "/link/ports";
  ASSERT_EQ(::symlink(dir.c_str(), (dir_ + "/link").c_str()), 0);
  EXPECT_EQ(refused(through_link), "port registry: " + dir_ + "/link: a symbolic link: refused (remove it)");
  through_link.path = r_.path + "/ports";  // the registry file as the directory
  EXPECT_EQ(refused(through_link), "port registry: " + r_.path + ": not a directory: refused (remove it)");

  ASSERT_EQ(::rename(r_.path.c_str(), (dir_ + "/real").c_str()), 0);
  ASSERT_EQ(::mkdir(r_.path.c_str(), 0700), 0);
  EXPECT_EQ(refused(), "port registry: " + r_.path + ": not a regular file" + fix);
  ASSERT_EQ(::rmdir(r_.path.c_str()), 0);
  ASSERT_EQ(::rename((dir_ + "/real").c_str(), r_.path.c_str()), 0);
  EXPECT_EQ(refused(), "reserved 30000") << "usable again once repaired";
}

// Injected: a crash (the process exits) after the new registry is written
// and synced, before it is renamed over the old one. Checked: the registry
// is the old one, whole; the next reservation writes its own and removes
// what the crash left.
TEST_F(PortRegistryTest, ACrashBetweenWriteAndRenameLeavesTheOldRegistry) {
  ASSERT_EQ(*reserve_port(r_, 7, 101), 30003);
  const std::string before = registry_text(), tmp = dir_ + "/goldminer/.ports.new";
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::alarm(60);
    r_.before_rename = [] { ::_exit(3); };
    (void)reserve_port(r_, 8, 102);
    ::_exit(4);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 3) << "the child did not reach the rename";
  EXPECT_EQ(registry_text(), before) << "the old registry, whole";
  std::ifstream left(tmp);
  std::stringstream text;
  text << left.rdbuf();
  EXPECT_EQ(text.str(), "30003 7 101 1010\n30000 8 102 1020\n") << "the crash left the new text aside";
  EXPECT_EQ(*reserve_port(r_, 8, 102), 30000);
  EXPECT_EQ(registry_text(), "30003 7 101 1010\n30000 8 102 1020\n");
  EXPECT_NE(::access(tmp.c_str(), F_OK), 0) << tmp << " is left";
}

// Injected, with real processes: an entry whose PID now belongs to another
// process (its start time differs) even though that process calls itself
// slurmstepd; an entry whose process still runs; a line of an older
// registry (no start time). Checked: the first is reclaimed, the second
// kept, the third kept while its PID exists and reclaimed once it ends.
TEST_F(PortRegistryTest, AnEntryWhosePidWasReusedByAnotherProcessIsReclaimed) {
  r_.start_time = nullptr;  // /proc
  Child other([] { ::prctl(PR_SET_NAME, "slurmstepd", 0, 0, 0); });
  ASSERT_TRUE(other.ready());
  auto start = process_start_time(other.pid());
  auto mine = process_start_time(::getpid());
  ASSERT_TRUE(start.ok()) << start.status().message();
  ASSERT_TRUE(mine.ok()) << mine.status().message();
  ASSERT_TRUE(reserve_port(r_, 99, ::getpid()).ok());  // makes the files
  ASSERT_TRUE(release_port(r_, 99, ::getpid()).ok());
  const std::string o = std::to_string(other.pid()), me = std::to_string(::getpid()) + " " + std::to_string(*mine);
  std::ofstream(r_.path, std::ios::trunc) << "30000 4 " << o << " " << (*start + 1) << "\n"
                                          << "30001 5 " << o << " " << *start << "\n"
                                          << "30002 6 " << o << "\n";
  EXPECT_EQ(*reserve_port(r_, 8, ::getpid()), 30000) << "8 mod 4: its first port, whose entry's PID was reused";
  EXPECT_EQ(registry_text(), "30001 5 " + o + " " + std::to_string(*start) + "\n30002 6 " + o + "\n30000 8 " + me + "\n");
  other.end();
  EXPECT_FALSE(process_start_time(other.pid()).ok());
  EXPECT_EQ(*reserve_port(r_, 6, ::getpid()), 30002) << "6 mod 4: the older registry's line went with its PID";
  EXPECT_EQ(registry_text(), "30000 8 " + me + "\n30002 6 " + me + "\n");
}

// A process may name itself anything, ')' and digits too: the start time
// is read after the name's last ')', the same before and after a rename.
TEST_F(PortRegistryTest, TheStartTimeIsReadPastAnyProcessName) {
  int go[2], renamed[2];
  ASSERT_EQ(::pipe(go), 0);
  ASSERT_EQ(::pipe(renamed), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::alarm(60);
    char c;
    if (::read(go[0], &c, 1) != 1) ::_exit(1);
    ::prctl(PR_SET_NAME, "x) R 1 2 3 (y", 0, 0, 0);
    if (::write(renamed[1], "r", 1) != 1) ::_exit(1);
    for (;;) ::pause();
  }
  auto before = process_start_time(child);  // the child waits in read: not renamed yet
  char c = 0;
  const bool ok = ::write(go[1], "g", 1) == 1 && ::read(renamed[0], &c, 1) == 1;
  auto after = process_start_time(child);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  for (int fd : {go[0], go[1], renamed[0], renamed[1]}) ::close(fd);
  ASSERT_TRUE(ok) << "the child did not rename itself";
  ASSERT_TRUE(before.ok()) << before.status().message();
  ASSERT_TRUE(after.ok()) << after.status().message();
  EXPECT_EQ(*before, *after);
  EXPECT_GT(*after, 0u);
}

// A step's ranks and trainer in one hold of the lock, in the caller's
// order; a tag for which no port is left is missing from the answer.
TEST_F(PortRegistryTest, SeveralTagsAreReservedInOneHoldInTheCallersOrder) {
  auto ports = reserve_ports(r_, 7, 102, {"rank:1", "rank:2", "", "rank:3", "rank:4"});
  ASSERT_TRUE(ports.ok()) << ports.status().message();
  EXPECT_EQ(*ports, (std::map<std::string, int>{{"rank:1", 30003}, {"rank:2", 30000}, {"", 30001}, {"rank:3", 30002}}));
  EXPECT_EQ(reserve_ports(r_, 7, 102, {"1"}).status().message(), "port registry: invalid tag '1'");
}

}  // namespace
}  // namespace goldminer
