#include "ctld/job_owner_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

namespace goldminer {
namespace {

// A lookup that counts its runs (squeue's): job 10 is uid 1000's and
// running; every other job is not known to Slurm.
struct CountingLookup {
  std::atomic<int> runs{0};
  JobOwnerCache::Lookup fn() {
    return [this](uint32_t job) -> Expected<JobOwner> {
      ++runs;
      if (job == 10) return JobOwner{1000, "RUNNING"};
      return Status::error("not known to Slurm");
    };
  }
};

TEST(JobOwnerCacheTest, AnAnswerIsKeptForItsTtlAndOneLookupServesEveryAsker) {
  CountingLookup squeue;
  JobOwnerCacheLimits limits;
  limits.ttl_s = 10;
  JobOwnerCache cache(limits, squeue.fn());
  JobOwnerCache::Refusal refusal;
  for (int i = 0; i < 1000; ++i) {
    auto owner = cache.get(10, 1000 + i % 7, 5, &refusal);
    ASSERT_TRUE(owner.ok());
    EXPECT_EQ(owner->uid, 1000u);
  }
  EXPECT_EQ(squeue.runs, 1) << "1,000 asks within the TTL: one squeue";
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(cache.get(99, 2000, 5, &refusal).status().message(), "not known to Slurm");
  EXPECT_EQ(squeue.runs, 2) << "a job Slurm does not know is kept too";
  ASSERT_TRUE(cache.get(10, 1000, 15.5, &refusal).ok());
  EXPECT_EQ(squeue.runs, 3) << "past the TTL it is looked up again";
  EXPECT_EQ(cache.lookups(), 3u);
}

TEST(JobOwnerCacheTest, AUidsLookupsOfUnknownJobsAreBoundedAndOtherUidsKeepTheirs) {
  CountingLookup squeue;
  JobOwnerCacheLimits limits;
  limits.burst = 10;
  limits.per_uid_per_s = 0.5;
  JobOwnerCache cache(limits, squeue.fn());
  JobOwnerCache::Refusal refusal;
  // Injected: uid 1001 asks about 1,000 different jobs Slurm does not know,
  // all at t=100 (the clock does not move).
  int throttled = 0;
  for (uint32_t job = 5000; job < 6000; ++job) {
    EXPECT_FALSE(cache.get(job, 1001, 100, &refusal).ok());
    throttled += refusal == JobOwnerCache::Refusal::kThrottled;
  }
  EXPECT_EQ(squeue.runs, 10) << "the burst, then nothing";
  EXPECT_EQ(throttled, 990);
  EXPECT_DOUBLE_EQ(cache.retry_after_s(1001, 100), 2);
  // Another uid is not held back by it.
  auto owner = cache.get(10, 1000, 100, &refusal);
  ASSERT_TRUE(owner.ok());
  EXPECT_EQ(refusal, JobOwnerCache::Refusal::kNone);
  // 20 s later uid 1001 has earned 10 more: 1,000 asks cost 10 lookups.
  for (uint32_t job = 7000; job < 8000; ++job) (void)cache.get(job, 1001, 120, &refusal);
  EXPECT_EQ(squeue.runs, 21);
}

TEST(JobOwnerCacheTest, TheCacheAndTheCountedUidsStayWithinTheirBounds) {
  CountingLookup squeue;
  JobOwnerCacheLimits limits;
  limits.max_jobs = 4;
  limits.max_uids = 2;
  limits.burst = 100;
  JobOwnerCache cache(limits, squeue.fn());
  JobOwnerCache::Refusal refusal;
  for (uint32_t job = 1; job <= 6; ++job) (void)cache.get(job, 1000, job, &refusal);  // expiring at 11..16
  EXPECT_EQ(squeue.runs, 6);
  (void)cache.get(6, 1000, 7, &refusal);
  EXPECT_EQ(squeue.runs, 6) << "the newest is kept";
  (void)cache.get(1, 1000, 7, &refusal);
  EXPECT_EQ(squeue.runs, 7) << "the soonest to expire went first";
  // A third uid while two are counted, neither back to its full burst:
  // refused, not counted (the map does not grow).
  (void)cache.get(100, 1001, 7, &refusal);
  EXPECT_EQ(refusal, JobOwnerCache::Refusal::kNone);
  EXPECT_FALSE(cache.get(101, 1002, 7, &refusal).ok());
  EXPECT_EQ(refusal, JobOwnerCache::Refusal::kThrottled);
}

TEST(JobOwnerCacheTest, OneLookupAtATimeAndAWaitOverItsBoundIsRefusedBusy) {
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> runs{0};
  JobOwnerCacheLimits limits;
  limits.wait_s = 0.2;
  // Injected: a squeue that hangs until released.
  JobOwnerCache cache(limits, [&](uint32_t) -> Expected<JobOwner> {
    ++runs;
    released.wait();
    return JobOwner{1000, "RUNNING"};
  });
  auto first = std::async(std::launch::async, [&] {
    JobOwnerCache::Refusal r;
    return cache.get(10, 1000, 0, &r).ok();
  });
  while (runs == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  JobOwnerCache::Refusal refusal;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(cache.get(11, 1001, 0, &refusal).ok());
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(refusal, JobOwnerCache::Refusal::kBusy);
  EXPECT_GE(waited, 0.15);
  EXPECT_LT(waited, 2.0);
  release.set_value();
  EXPECT_TRUE(first.get());
  EXPECT_EQ(runs, 1);
}

}  // namespace
}  // namespace goldminer
