// Tests of the data worker's loop (dw_daemon/worker.h) on its own, part of
// tests/dataplane_test: stopping while the trainer is out of reach, the
// default worker id.
#include "dw_daemon/worker.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

namespace goldminer {
namespace {

// SIGTERM to a worker whose trainer never listened (a companion job ended
// with its batch job): it stops retrying at once and says it was stopped,
// which goldminer-dw turns into exit 0.
TEST(WorkerTest, StopWhileTheTrainerIsOutOfReachEndsTheRetries) {
  dw::WorkerOptions w;
  w.trainer = "local://nobody-listens-here";
  w.secret = "s";
  w.connect_timeout_s = 600;
  std::atomic<bool> stop{false};
  std::thread stopper([&stop] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    stop = true;
  });
  const auto start = std::chrono::steady_clock::now();
  auto r = dw::run_worker(w, stop);
  stopper.join();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), dw::kStopped);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

// A worker's default id: the Slurm node name in a Slurm task (nodes may
// share a host name), else the host name; then the process id.
TEST(WorkerIdTest, SlurmNodeNameElseHostName) {
  const std::string pid = ":" + std::to_string(getpid());
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  const char* saved = std::getenv("SLURMD_NODENAME");
  const std::string before = saved != nullptr ? saved : "";
  setenv("SLURMD_NODENAME", "c7", 1);
  EXPECT_EQ(dw::default_worker_id(), "c7" + pid);
  setenv("SLURMD_NODENAME", "", 1);
  EXPECT_EQ(dw::default_worker_id(), host + pid);
  unsetenv("SLURMD_NODENAME");
  EXPECT_EQ(dw::default_worker_id(), host + pid);
  if (saved != nullptr) setenv("SLURMD_NODENAME", before.c_str(), 1);
}

}  // namespace
}  // namespace goldminer
