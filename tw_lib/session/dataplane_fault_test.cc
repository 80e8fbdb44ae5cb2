// Fault tests of the data plane: workers of a real goldminer-consume killed
// with SIGKILL while others join, drained with SIGTERM, a worker without
// the job's secret and garbage on the listener.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gm_config.h"
#include "mpi_transport/test_util.h"
#ifdef GOLDMINER_HAVE_UCX
#include "mpi_transport/stranger.h"
#endif
#include "tw_lib/session/dataplane_test_util.h"

namespace goldminer {
namespace {

// Temp folders, input files, goldminer-consume processes and their --json
// epoch lines: the data plane's test helpers.
using namespace testing;  // NOLINT(build/namespaces)

// Waits until the consumer printed its address; returns it.
std::string wait_address(Process* p) {
  const std::regex re("listening on (ucx://[0-9.]+:[0-9]+)");
  for (int i = 0; i < 300; ++i) {
    std::smatch m;
    const std::string err = p->err();
    if (std::regex_search(err, m, re)) return m[1];
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ADD_FAILURE() << "no address printed; stderr: " << p->err();
  return "";
}

bool alive(pid_t pid) {
  // A zombie (exited, not yet reaped by its parent) counts as gone.
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string s;
  if (!std::getline(stat, s)) return false;
  const size_t r = s.rfind(')');
  return r != std::string::npos && r + 2 < s.size() && s[r + 2] != 'Z';
}

// kill -9 of workers mid-epoch, repeatedly, while new workers join at
// random: every epoch still has every sample exactly once. Batches of
// `batch` lines (~30 bytes each): small ones go by copy, ones over 64 KiB
// through the workers' shared-memory arenas (checked on the joined
// workers that were not killed).
// Returns the epochs goldminer-consume reported.
std::vector<Epoch> kill_nine_repeatedly(const std::string& batch, const std::string& split, int epochs,
                                        bool shared_memory, const std::map<std::string, std::string>& extra_env = {},
                                        const std::vector<std::string>& extra_args = {}) {
  TempDir d;
  write_text(d / "big.txt", 200000);
  auto env = kEnv;
  for (const auto& [k, v] : extra_env) env[k] = v;
  // -v: the trainer logs each worker that joins (whose kill then tests something).
  std::vector<std::string> args = {"-v", "--input", "text:" + (d / "big.txt"), "--batch-size", batch,
                                   "--records-per-split", split, "--epochs", std::to_string(epochs), "--workers", "3",
                                   "--queue-batches", "8"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  Process p(consume_args(args), env);
  const std::string addr = wait_address(&p);
  EXPECT_FALSE(addr.empty());
  if (addr.empty()) return {};
  std::mt19937 rng(42);
  std::vector<pid_t> live;
  std::vector<std::unique_ptr<Process>> joined;
  // Only workers the trainer has seen join are killed: one still loading
  // its libraries has not connected, so killing it would test nothing (on
  // a loaded machine that takes seconds, and every kill could hit one).
  // Workers are named HOST:PID (goldminer-dw's default id).
  const std::regex joined_re("worker [^ ]*:([0-9]+) joined");
  auto joined_pids = [&] {
    std::set<pid_t> pids;
    const std::string err = p.err();
    for (auto it = std::sregex_iterator(err.begin(), err.end(), joined_re); it != std::sregex_iterator(); ++it)
      pids.insert(std::stoi((*it)[1]));
    return pids;
  };
  int kills = 0;
  // 40 rounds, and more (up to 400) until 6 kills on a machine so loaded
  // that workers connect late; at most 25 joins.
  for (int round = 0; round < 400 && (round < 40 || kills < 6); ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100 + rng() % 150));
    if (!alive(p.pid())) break;
    for (pid_t w : worker_pids(&p)) live.push_back(w);
    for (auto& j : joined) live.push_back(j->pid());
    const std::set<pid_t> connected = joined_pids();
    std::vector<pid_t> candidates, settled;
    for (pid_t w : std::set<pid_t>(live.begin(), live.end())) {
      if (!alive(w)) continue;
      candidates.push_back(w);
      if (connected.count(w)) settled.push_back(w);
    }
    live.clear();
    // Another connected worker stays: with none, goldminer-consume would
    // (rightly) give up once its own three are gone.
    if (settled.size() > 1 && rng() % 2 == 0) {
      kill(settled[rng() % settled.size()], SIGKILL);
      ++kills;
    }
    if ((rng() % 2 == 0 && joined.size() < 25) || candidates.size() <= 1) {
      auto joiner_env = env;
      joiner_env["GOLDMINER_TRAINER"] = addr;
      joined.push_back(
          std::make_unique<Process>(std::vector<std::string>{builddir() + "/goldminer-dw", "-v"}, joiner_env));
    }
  }
  EXPECT_EQ(p.wait(), 0) << p.err();
  if (extra_env.count("UCX_RNDV_SCHEME")) {
    EXPECT_NE(p.err().find("UCX_RNDV_SCHEME=put_zcopy ignored"), std::string::npos) << p.err();
  }
  auto got = parse_json_lines(p.out());
  expect_clean(got, static_cast<size_t>(epochs), 200000);
  double lost = 0;
  for (const Epoch& e : got) lost += e.v.at("workers_lost");
  EXPECT_GT(kills, 3);
  EXPECT_GT(lost, 0) << "some kill hit a worker holding splits; the trainer's log:\n" << p.err();
  std::cerr << "kills " << kills << ", workers lost with splits " << lost << ", joins " << joined.size() << "\n";
  uint64_t through_arena = 0, built_there = 0;
  const std::regex re("([0-9]+) frames through shared memory, ([0-9]+) built there \\(in use\\)");
  for (auto& j : joined) {
    j->wait();
    std::smatch m;
    const std::string err = j->err();
    if (std::regex_search(err, m, re)) {
      through_arena += std::stoull(m[1]);
      built_there += std::stoull(m[2]);
    }
  }
  if (shared_memory) {
    EXPECT_GT(through_arena, 0u) << "no surviving joined worker sent through shared memory";
    // After the first batch (sent before the trainer accepted the arena),
    // batches are built in it: no copy by the transport.
    EXPECT_GT(built_there, 0u) << "no batch was built in shared memory";
  } else {
    EXPECT_EQ(through_arena, 0u) << "small batches go by copy";
  }
  return got;
}

TEST(DataplaneTest, KillNineRepeatedlyAndRandomJoinsLoseAndDuplicateNothing) { kill_nine_repeatedly("64", "2000", 12, false); }

TEST(DataplaneTest, KillNineRepeatedlyWithBatchesInSharedMemory) { kill_nine_repeatedly("2500", "2500", 250, true); }

// UCX 1.13's put_zcopy rendezvous crashed the trainer in the test above
// (2 to 3 runs in 4): the transport replaces it and says so.
TEST(DataplaneTest, KillNineRepeatedlyWithPutZcopyRequested) {
  kill_nine_repeatedly("64", "2000", 12, false, {{"UCX_RNDV_SCHEME", "put_zcopy"}});
}

// --deterministic: the batches come in one order, the same in every run,
// whatever the number of workers and threads, kill -9 and joins included
// (order_digest hashes the sample ids in the order next() returned them).
// With a shuffle buffer that order differs from epoch to epoch.
TEST(DataplaneTest, DeterministicOrderIsTheSameEveryRunThroughKillsAndJoins) {
  const std::vector<std::string> det = {"--deterministic", "--shuffle-buffer", "300", "--seed", "7"};
  TempDir d;
  write_text(d / "big.txt", 200000);
  std::vector<std::string> args = {"--input", "text:" + (d / "big.txt"), "--batch-size", "64", "--records-per-split",
                                   "2000", "--epochs", "10", "--workers", "1"};
  args.insert(args.end(), det.begin(), det.end());
  Process reference(consume_args(args), kEnv);
  ASSERT_EQ(reference.wait(), 0) << reference.err();
  auto want = parse_json_lines(reference.out());
  ASSERT_EQ(want.size(), 10u);
  EXPECT_NE(want[0].text.at("order_digest"), want[1].text.at("order_digest"));
  std::vector<std::string> threaded = det;
  threaded.insert(threaded.end(), {"--threads", "2"});
  auto got = kill_nine_repeatedly("64", "2000", 10, false, {}, threaded);
  ASSERT_EQ(got.size(), 10u);
  for (size_t e = 0; e < got.size(); ++e)
    EXPECT_EQ(got[e].text.at("order_digest"), want[e].text.at("order_digest")) << "epoch " << e;
  // Without it, several workers interleave by timing.
  args = {"--input", "text:" + (d / "big.txt"), "--batch-size", "64", "--records-per-split", "2000", "--epochs", "3",
          "--workers", "3", "--threads", "2", "--seed", "7", "--shuffle-buffer", "300"};
  Process free_order(consume_args(args), kEnv);
  ASSERT_EQ(free_order.wait(), 0) << free_order.err();
  auto loose = parse_json_lines(free_order.out());
  ASSERT_EQ(loose.size(), 3u);
  int same = 0;
  for (size_t e = 0; e < 3; ++e) same += loose[e].text.at("order_digest") == want[e].text.at("order_digest");
  EXPECT_LT(same, 3) << "three workers gave the one-worker order without --deterministic";
}

// SIGTERM: the worker finishes the batch in hand, returns its leases and
// exits 0; nothing is lost and no split is counted as lost.
void sigterm_drains_without_loss(const std::vector<std::string>& extra_args) {
  TempDir d;
  write_text(d / "big.txt", 200000);
  std::vector<std::string> args = {"--input", "text:" + (d / "big.txt"), "--batch-size", "64", "--records-per-split",
                                   "2000", "--epochs", "8", "--workers", "1", "--queue-batches", "8", "--verbose"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  Process p(consume_args(args), kEnv);
  const std::string addr = wait_address(&p);
  auto env = kEnv;
  env["GOLDMINER_TRAINER"] = addr;
  Process a({builddir() + "/goldminer-dw", "--verbose", "--id", "worker-a"}, env);
  Process b({builddir() + "/goldminer-dw", "--verbose", "--id", "worker-b"}, env);
  // Signal once worker-a streams (the consumer logs its join with --verbose).
  for (int i = 0; i < 500 && p.err().find("worker worker-a joined") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ASSERT_TRUE(alive(p.pid())) << "the run ended before the signal; make the input larger";
  kill(a.pid(), SIGTERM);
  EXPECT_EQ(a.wait(), 0) << a.err();
  EXPECT_NE(a.err().find("draining"), std::string::npos) << a.err();
  // It held splits when the signal came, and gave them back.
  std::smatch returned;
  const std::string a_err = a.err();
  ASSERT_TRUE(std::regex_search(a_err, returned, std::regex("finished [0-9]+ splits, returned ([0-9]+)"))) << a_err;
  EXPECT_GT(std::stoi(returned[1]), 0) << a_err;
  ASSERT_EQ(p.wait(), 0) << p.err();
  auto epochs = parse_json_lines(p.out());
  expect_clean(epochs, 8, 200000);
  for (const Epoch& e : epochs) EXPECT_EQ(e.v.at("workers_lost"), 0) << p.err();
  // The session says it left clean, not as a lost connection.
  EXPECT_NE(p.err().find("worker worker-a left after draining ("), std::string::npos) << p.err();
  b.wait();
}

TEST(DataplaneTest, SigtermDrainsWithoutLoss) { sigterm_drains_without_loss({}); }

// The drained worker gives back the split the others' batches wait for:
// it goes to another worker, not back to the one leaving.
TEST(DataplaneTest, SigtermDrainsWithoutLossInDeterministicOrder) {
  sigterm_drains_without_loss({"--deterministic", "--threads", "2"});
}

// A trainer that goes silent without closing its connections (its process
// stopped, as when its node is lost): the worker takes it as gone after
// --trainer-timeout and exits with the reason. A trainer that merely takes
// nothing still sends heartbeats, so its worker outlives a pause longer
// than the timeout (here the trainer waits for a second worker that never
// comes, its queue full).
TEST(DataplaneTest, AWorkerLeavesASilentTrainerWithinItsTimeout) {
  TempDir d;
  write_text(d / "big.txt", 200000);
  Process p(consume_args({"--input", "text:" + (d / "big.txt"), "--batch-size", "64", "--epochs", "1000",
                          "--workers", "0", "--min-workers", "2", "--join-timeout", "120", "--queue-batches", "4",
                          "--verbose"}),
            kEnv);
  const std::string addr = wait_address(&p);
  auto env = kEnv;
  env["GOLDMINER_TRAINER"] = addr;
  Process w({builddir() + "/goldminer-dw", "--verbose", "--id", "worker-a", "--trainer-timeout", "4"}, env);
  for (int i = 0; i < 500 && p.err().find("worker worker-a joined") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_NE(p.err().find("worker worker-a joined"), std::string::npos) << p.err() << w.err();
  std::this_thread::sleep_for(std::chrono::seconds(7));
  ASSERT_TRUE(alive(w.pid())) << "a trainer taking nothing for 7 s is not gone: " << w.err();
  kill(p.pid(), SIGSTOP);
  const auto stopped = std::chrono::steady_clock::now();
  EXPECT_EQ(w.wait(), 1) << w.err();
  const double after = std::chrono::duration<double>(std::chrono::steady_clock::now() - stopped).count();
  EXPECT_NE(w.err().find("no word from the trainer at " + addr), std::string::npos) << w.err();
  EXPECT_NE(w.err().find("its process is stopped or its node is gone"), std::string::npos) << w.err();
  EXPECT_GE(after, 3.0) << "not before the timeout (4 s, from the last message before the stop)";
  EXPECT_LT(after, 15.0) << "within the timeout, with room for a loaded machine";
  kill(p.pid(), SIGCONT);
  kill(p.pid(), SIGKILL);
  p.wait();

  // Out of range: refused before connecting.
  expect_refused({builddir() + "/goldminer-dw", "--trainer-timeout", "1"}, env,
                 "--trainer-timeout: invalid value '1': expected a number >= 2");
}

// No data worker ever joins (a companion job that stays pending): the
// session fails after first_worker_timeout with where the companion job
// stands, as squeue tells it (here a stand-in squeue on the PATH).
TEST(DataplaneTest, NoWorkerEverJoiningFailsTheSessionWithTheCompanionJobsState) {
  TempDir d;
  write_text(d / "in.txt", 1000);
  const std::string bin = d / "bin";
  ASSERT_EQ(mkdir(bin.c_str(), 0755), 0);
  {
    std::ofstream squeue(bin + "/squeue");
    squeue << "#!/bin/sh\n"
              "case \"$*\" in *--jobs=77*) echo 'PENDING Resources' ;; *) echo \"squeue: bad args: $*\" >&2; exit 1 ;; esac\n";
  }
  ASSERT_EQ(chmod((bin + "/squeue").c_str(), 0755), 0);
  auto env = kEnv;
  env["GOLDMINER_DW_JOB"] = "77";
  env["PATH"] = bin + ":/usr/bin:/bin";
  const auto start = std::chrono::steady_clock::now();
  Process p(consume_args({"--input", "text:" + (d / "in.txt"), "--workers", "0", "--first-worker-timeout", "3"}), env);
  EXPECT_EQ(p.wait(), 1) << p.err();
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(p.err().find("no data worker joined within 3 s of its start (first_worker_timeout); companion job 77 "
                         "is PENDING (Resources)"),
            std::string::npos)
      << p.err();
  EXPECT_GE(took, 3.0);
  EXPECT_LT(took, 20.0);

  // Without a companion job: the plain timeout; 0 waits (the run is stopped here).
  env.erase("GOLDMINER_DW_JOB");
  Process q(consume_args({"--input", "text:" + (d / "in.txt"), "--workers", "0", "--first-worker-timeout", "2"}), env);
  EXPECT_EQ(q.wait(), 1) << q.err();
  EXPECT_NE(q.err().find("no data worker joined within 2 s of its start (first_worker_timeout)\n"), std::string::npos)
      << q.err();
  Process forever(consume_args({"--input", "text:" + (d / "in.txt"), "--workers", "0", "--first-worker-timeout", "0"}),
                  env);
  std::this_thread::sleep_for(std::chrono::seconds(3));
  EXPECT_TRUE(alive(forever.pid())) << forever.err();
}

// A companion worker whose trainer never listened and whose trainer job
// has ended (here a stand-in squeue says NODE_FAIL) stops retrying and
// exits 0; while the job runs it goes on until --connect-timeout.
TEST(DataplaneTest, AWorkerStopsWaitingForATrainerWhoseJobEnded) {
  TempDir d;
  const std::string bin = d / "bin";
  ASSERT_EQ(mkdir(bin.c_str(), 0755), 0);
  {
    std::ofstream squeue(bin + "/squeue");
    squeue << "#!/bin/sh\n"
              "case \"$*\" in *--jobs=77*) echo NODE_FAIL ;; *--jobs=78*) echo RUNNING ;;"
              " *) echo \"squeue: bad args: $*\" >&2; exit 1 ;; esac\n";
  }
  ASSERT_EQ(chmod((bin + "/squeue").c_str(), 0755), 0);
  auto env = kEnv;
  env["PATH"] = bin + ":/usr/bin:/bin";
  env["GOLDMINER_TRAINER"] = "ucx://127.0.0.1:9";  // nobody listens (discard port)
  const auto start = std::chrono::steady_clock::now();
  Process gone({builddir() + "/goldminer-dw", "--trainer-job", "77", "--connect-timeout", "600"}, env);
  EXPECT_EQ(gone.wait(), 0) << gone.err();
  EXPECT_NE(gone.err().find("the trainer will not come: job 77 is NODE_FAIL"), std::string::npos) << gone.err();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  Process running({builddir() + "/goldminer-dw", "--trainer-job", "78", "--connect-timeout", "2"}, env);
  EXPECT_EQ(running.wait(), 1) << "a running trainer job: the connect timeout decides: " << running.err();
  EXPECT_EQ(running.err().find("will not come"), std::string::npos) << running.err();
}

// A worker without the job's secret is refused and logged; garbage bytes
// to the listener drop only that connection; the session goes on.
TEST(DataplaneTest, WrongSecretAndGarbageAreRefusedAndTheSessionGoesOn) {
  TempDir d;
  write_text(d / "big.txt", 100000);
  Process p(consume_args({"--input", "text:" + (d / "big.txt"), "--batch-size", "64", "--epochs", "6",
                          "--workers", "1", "--queue-batches", "8", "--verbose"}),
            kEnv);
  const std::string addr = wait_address(&p);
  auto env = kEnv;
  env["GOLDMINER_TRAINER"] = addr;
  env["GOLDMINER_SECRET"] = "not-the-secret";
  Process intruder({builddir() + "/goldminer-dw"}, env);
  EXPECT_EQ(intruder.wait(), 1);
  // The trainer proves the secret first: the intruder finds it does not
  // hold the same one, and says so, before it proves anything itself.
  EXPECT_NE(intruder.err().find("authentication: the trainer does not prove this job's secret"), std::string::npos)
      << intruder.err();

  // Junk of 1000..3000 bytes; the last, more than UCX's request buffer,
  // stays open until the trainer has finished, which it does as usual.
  const int port = std::stoi(addr.substr(addr.rfind(':') + 1));
  int held = -1;
  for (int i = 0; i < 5; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(static_cast<uint16_t>(port));
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) {
      std::string junk(1000 + 500 * i, static_cast<char>(0x5a + i));
      (void)!write(fd, junk.data(), junk.size());
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (i < 4) {
      close(fd);
    } else {
      held = fd;
    }
  }
  ASSERT_EQ(p.wait(), 0) << p.err();
  close(held);
  expect_clean(parse_json_lines(p.out()), 6, 100000);
  EXPECT_NE(p.err().find("dropped: the worker refuses this trainer: "), std::string::npos)
      << "the refusal is logged: " << p.err();
}

// The attacker of HundredStrangersAnnouncing2GiB... (this binary re-run
// with GM_TEST_ANNOUNCE=ADDRESS; mpi_transport/stranger.h): exits with
// how many of its 100 connections the trainer did not end (+100 if one
// got the trainer's UCP address).
const bool announcer_process = [] {
  const char* addr = getenv("GM_TEST_ANNOUNCE");
  if (addr == nullptr) return false;
#ifdef GOLDMINER_HAVE_UCX
  _exit(transport::testing::stranger_attack(addr, 100, size_t{2} << 30));
#else
  _exit(255);
#endif
}();

// Injects 100 strangers into a goldminer-consume's listener on every path
// (stranger.h: stock UCX sending a forced-eager 2 GiB message, the
// trainer's own record announcing 2 GiB, and connections speaking the
// handshake); checks the trainer's resident memory (sampled every 5 ms)
// grows by less than 64 MiB, each is ended and none learns the trainer's
// UCP address, and a real goldminer-dw joining afterwards runs both epochs
// exactly once.
TEST(DataplaneTest, HundredStrangersAnnouncing2GiBCostTheTrainerLittleAndAWorkerStillJoins) {
#ifndef GOLDMINER_HAVE_UCX
  GTEST_SKIP() << "built without UCX";
#endif
  TempDir d;
  write_text(d / "big.txt", 100000);
  Process p(consume_args({"--input", "text:" + (d / "big.txt"), "--batch-size", "64", "--epochs", "2", "--workers",
                          "0", "--verbose"}),
            kEnv);
  const std::string addr = wait_address(&p);
  const long before = transport::testing::rss_kib(p.pid());
  ASSERT_GT(before, 0);
  std::atomic<bool> attacked{false};
  long peak = before;
  std::thread sampler([&] {
    while (!attacked) {
      peak = std::max(peak, transport::testing::rss_kib(p.pid()));
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  auto env = kEnv;
  env["GM_TEST_ANNOUNCE"] = addr;
  env["UCX_TLS"] = "tcp";  // light contexts; the trainer's side is the same on any transport
  env["UCX_RNDV_THRESH"] = "inf";
  Process attacker({builddir() + "/tests/dataplane_test"}, env);
  const int undropped = attacker.wait();
  attacked = true;
  sampler.join();
  EXPECT_EQ(undropped, 0) << attacker.err();
  std::printf("goldminer-consume RSS %ld KiB before, %ld KiB at most during 100 strangers announcing 2 GiB\n",
              before, peak);
  EXPECT_LT(peak - before, 64 << 10) << "KiB";

  env = kEnv;
  env["GOLDMINER_TRAINER"] = addr;
  Process worker({builddir() + "/goldminer-dw"}, env);
  ASSERT_EQ(p.wait(), 0) << p.err();
  EXPECT_EQ(worker.wait(), 0) << worker.err();
  expect_clean(parse_json_lines(p.out()), 2, 100000);
}

}  // namespace
}  // namespace goldminer
