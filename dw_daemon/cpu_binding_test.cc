// Tests of the data worker's core binding (hwloc): the cores a process
// may use follow its affinity, and a bound thread runs on its core only.
#include "dw_daemon/cpu_binding.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include "tests/test_util.h"

namespace goldminer::dw {
namespace {

TEST(CpuBinderTest, ThreadsGoOneACoreOfThoseAllowed) {
  auto b = CpuBinder::create();
  ASSERT_TRUE(b.ok()) << b.status().message();
  ASSERT_GE((*b)->cores(), 1u);
  EXPECT_EQ((*b)->describe().rfind((*b)->cores() == 1 ? "core " : "cores ", 0), 0u) << (*b)->describe();
  const size_t cores = (*b)->cores();
  auto cpus_of = [&](size_t i, size_t threads) {
    std::vector<int> got;
    std::thread t([&] {
      EXPECT_TRUE((*b)->bind_this_thread(i, threads).ok());
      got = CpuBinder::this_thread_cpus();
    });
    t.join();
    return got;
  };
  // As many threads as cores or more: one core each, in turn.
  for (size_t i = 0; i < cores + 1; ++i) {
    const std::vector<int> got = cpus_of(i, cores + 1);
    ASSERT_FALSE(got.empty());
    EXPECT_NE((*b)->describe().find(std::to_string(got[0])), std::string::npos) << (*b)->describe();
    EXPECT_LE(got.size(), 2u) << "one core's PUs (SMT siblings at most)";
  }
  // One thread: all the cores, where its intra-op threads run too.
  EXPECT_GE(cpus_of(0, 1).size(), cores);
}

// A process whose affinity is one CPU (as a Slurm step given one core):
// one core, and its threads bound there.
TEST(CpuBinderTest, AProcessLimitedToOneCpuHasOneCore) {
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2) GTEST_SKIP() << "needs two CPUs";
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(1, &one);
    std::string text;
    if (sched_setaffinity(0, sizeof one, &one) != 0) {
      text = "setaffinity failed";
    } else {
      auto b = CpuBinder::create();
      if (!b.ok()) {
        text = b.status().message();
      } else {
        text = (*b)->describe();
        std::thread t([&] {
          (void)(*b)->bind_this_thread(5, 8);
          for (int c : CpuBinder::this_thread_cpus()) text += " " + std::to_string(c);
        });
        t.join();
      }
    }
    (void)!write(out[1], text.data(), text.size());
    _exit(0);
  }
  const std::string got = testing::output_of_child(out, child);
  EXPECT_EQ(got.rfind("core 1 of ", 0), 0u) << got;
  EXPECT_EQ(got.substr(got.size() - 2), " 1") << got;
}

}  // namespace
}  // namespace goldminer::dw
