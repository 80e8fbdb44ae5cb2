#include "gmcore/lease_table.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

namespace goldminer {
namespace {

std::vector<InputSplit> splits(int n) {
  std::vector<InputSplit> out;
  for (int i = 0; i < n; ++i) out.push_back({static_cast<uint64_t>(100 + i), "f" + std::to_string(i % 3), 0, 10});
  return out;
}

// Batches per split in these tests: 1 + id % 4 (a function of the split, as
// a seeded re-run guarantees).
uint64_t batches_of(uint64_t id) { return 1 + id % 4; }

TEST(LeaseTableTest, EverySplitOnceInASeededOrderPerEpoch) {
  LeaseConfig c;
  c.seed = 7;
  auto t = LeaseTable::create(splits(20), c);
  ASSERT_TRUE(t.ok());
  std::vector<uint64_t> first, second;
  while (auto l = t->grant(1, 0)) first.push_back(l->split.id);
  EXPECT_EQ(std::set<uint64_t>(first.begin(), first.end()).size(), 20u);
  t->start_epoch(1);
  while (auto l = t->grant(1, 0)) second.push_back(l->split.id);
  EXPECT_NE(first, second) << "a new order each epoch";
  auto again = LeaseTable::create(splits(20), c);
  std::vector<uint64_t> replay;
  while (auto l = again->grant(9, 0)) replay.push_back(l->split.id);
  EXPECT_EQ(first, replay) << "same seed, same order";

  EXPECT_EQ(t->epoch_order(), second);

  // Deterministic order shuffles alike; each lease names its rank.
  c.deterministic_order = true;
  auto ordered = LeaseTable::create(splits(20), c);
  std::vector<uint64_t> ids;
  uint64_t rank = 0;
  while (auto l = ordered->grant(1, 0)) {
    ids.push_back(l->split.id);
    EXPECT_EQ(l->rank, rank++);
  }
  EXPECT_EQ(ids, first);
}

TEST(LeaseTableTest, UnshuffledSplitsComeInPlanOrderEveryEpoch) {
  LeaseConfig c;
  c.seed = 7;
  c.shuffle_splits = false;
  c.deterministic_order = true;
  auto t = LeaseTable::create(splits(6), c);
  ASSERT_TRUE(t.ok());
  const std::vector<uint64_t> plan = {100, 101, 102, 103, 104, 105};
  for (uint32_t epoch = 0; epoch < 3; ++epoch) {
    if (epoch > 0) ASSERT_TRUE(t->start_epoch(epoch).ok());
    std::vector<uint64_t> ids;
    while (auto l = t->grant(1, 0)) ids.push_back(l->split.id);
    EXPECT_EQ(ids, plan) << "epoch " << epoch;
  }
}

TEST(LeaseTableTest, SplitSeedsDependOnSeedEpochAndSplit) {
  uint64_t a = LeaseTable::split_seed(1, 0, 5);
  EXPECT_EQ(a, LeaseTable::split_seed(1, 0, 5));
  EXPECT_NE(a, LeaseTable::split_seed(2, 0, 5));
  EXPECT_NE(a, LeaseTable::split_seed(1, 1, 5));
  EXPECT_NE(a, LeaseTable::split_seed(1, 0, 6));
}

TEST(LeaseTableTest, ReRunAfterALostWorkerSkipsDeliveredBatches) {
  auto t = LeaseTable::create(splits(1), LeaseConfig());
  ASSERT_TRUE(t.ok());
  auto l = t->grant(1, 0);
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ(*t->accept_batch(1, 100, 0, 1), BatchVerdict::kDeliver);
  EXPECT_EQ(*t->accept_batch(1, 100, 1, 2), BatchVerdict::kDeliver);
  EXPECT_EQ(t->drop_worker(1), (std::vector<uint64_t>{100}));  // kill -9
  auto again = t->grant(2, 3);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->skip_batches, 2u);
  EXPECT_EQ(again->split_seed, l->split_seed) << "the re-run yields the same batches";
  EXPECT_EQ(*t->accept_batch(2, 100, 0, 4), BatchVerdict::kDuplicate);
  EXPECT_EQ(*t->accept_batch(1, 100, 2, 4), BatchVerdict::kStale) << "the dead worker's late batch";
  EXPECT_EQ(*t->accept_batch(2, 100, 1, 4), BatchVerdict::kDuplicate);
  EXPECT_EQ(*t->accept_batch(2, 100, 2, 5), BatchVerdict::kDeliver);
  ASSERT_TRUE(t->complete(2, 100, 3).ok());
  EXPECT_TRUE(t->epoch_done());
}

// A split that failed on a worker (its environment's fault) is pending
// again first, re-run from the first batch not delivered; another worker
// takes it while one that it has not failed on may (the one it failed on
// gets the next split), else one it failed on; each failure's cause is
// kept for the epoch, and a new epoch starts without them.
TEST(LeaseTableTest, AFailedSplitIsReRunFromItsFirstBatchNotDeliveredWithItsCausesKept) {
  auto t = LeaseTable::create(splits(3), LeaseConfig());
  ASSERT_TRUE(t.ok());
  auto l = t->grant(1, 0);
  ASSERT_TRUE(l.has_value());
  const uint64_t id = l->split.id;
  EXPECT_EQ(*t->accept_batch(1, id, 0, 1), BatchVerdict::kDeliver);
  auto count = t->fail(1, id, "worker w1: python dataset: the Python process was killed by signal 9");
  ASSERT_TRUE(count.ok()) << count.status().message();
  EXPECT_EQ(*count, 1u);
  EXPECT_TRUE(t->is_pending(id));
  EXPECT_TRUE(t->failed_on(id, 1));
  EXPECT_FALSE(t->failed_on(id, 2));
  EXPECT_EQ(*t->accept_batch(1, id, 1, 2), BatchVerdict::kStale) << "a late batch of the failed run";
  auto other = t->grant(1, 2, {2});
  ASSERT_TRUE(other.has_value());
  EXPECT_NE(other->split.id, id) << "spared: worker 1 gets another split";
  auto again = t->grant(2, 3, {1});
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->split.id, id);
  EXPECT_EQ(again->skip_batches, 1u) << "batch 0 was delivered: the re-run skips it";
  EXPECT_EQ(*t->fail(2, id, "worker w2: text: f: read: Input/output error"), 2u);
  EXPECT_FALSE(t->fail(2, id, "twice").ok()) << "no longer its lease";
  auto last = t->grant(1, 4, {2, 3});
  ASSERT_TRUE(last.has_value());
  EXPECT_NE(last->split.id, id) << "the third split, behind the failed one";
  EXPECT_FALSE(t->grant(1, 4, {2, 3}).has_value()) << "left for worker 3, on which it has not failed";
  EXPECT_FALSE(t->grant(2, 4, {1, 2, 3}).has_value()) << "the list may name the worker itself";
  auto same = t->grant(2, 5, {1});
  ASSERT_TRUE(same.has_value()) << "it failed on every worker that may take it: one of them does";
  EXPECT_EQ(same->split.id, id);
  EXPECT_EQ(t->failures(id), (std::vector<std::string>{"worker w1: python dataset: the Python process was killed by signal 9",
                                                       "worker w2: text: f: read: Input/output error"}));
  EXPECT_EQ(t->split(id)->file, l->split.file);
  EXPECT_FALSE(t->split(999).has_value());
  ASSERT_TRUE(t->start_epoch(1).ok());
  EXPECT_TRUE(t->failures(id).empty());
  EXPECT_FALSE(t->failed_on(id, 1));
}

TEST(LeaseTableTest, ProtocolViolationsAreErrors) {
  auto t = LeaseTable::create(splits(2), LeaseConfig());
  ASSERT_TRUE(t.ok());
  auto l = t->grant(1, 0);
  auto gap = t->accept_batch(1, l->split.id, 1, 0);
  ASSERT_FALSE(gap.ok());
  EXPECT_EQ(gap.status().message(), "lease table: split " + std::to_string(l->split.id) +
                                        ": batch 1 from worker 1 before batch 0");
  EXPECT_EQ(t->accept_batch(1, 999, 0, 0).status().message(), "lease table: split 999: unknown");
  Status early = t->complete(1, l->split.id, 3);
  EXPECT_EQ(early.message(), "lease table: split " + std::to_string(l->split.id) +
                                 ": worker 1 ended it after 3 batches, 0 were delivered");
  EXPECT_FALSE(t->complete(2, l->split.id, 0).ok()) << "not the lease holder";
  EXPECT_FALSE(LeaseTable::create({{1, "a", 0, 1}, {1, "b", 0, 1}}, LeaseConfig()).ok());
}

TEST(LeaseTableTest, ExpiredLeasesGoBackFirst) {
  LeaseConfig c;
  c.lease_timeout_s = 10;
  c.deterministic_order = true;
  auto t = LeaseTable::create(splits(3), c);
  auto a = t->grant(1, 0);
  auto b = t->grant(2, 0);
  t->heartbeat(2, 8);
  EXPECT_EQ(t->expire(15), (std::vector<uint64_t>{1})) << "worker 2 renewed at 8";
  EXPECT_EQ(t->grant(3, 15)->split.id, a->split.id) << "the expired split is next";
  EXPECT_EQ(*t->accept_batch(1, a->split.id, 0, 16), BatchVerdict::kStale);
  ASSERT_TRUE(t->give_back(2, b->split.id).ok());  // SIGTERM drain
  EXPECT_EQ(t->grant(4, 16)->split.id, b->split.id);
}

// Workers that crash, drain and join at random: every batch of every split
// is delivered exactly once per epoch.
TEST(LeaseTableTest, ExactlyOnceUnderRandomFailures) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    std::mt19937_64 rng(seed);
    LeaseConfig c;
    c.seed = seed;
    auto t = LeaseTable::create(splits(30), c);
    ASSERT_TRUE(t.ok());
    std::map<std::pair<uint64_t, uint64_t>, int> delivered;  // (split, batch) -> times
    struct Worker { uint64_t id; std::optional<Lease> lease; uint64_t next = 0; };
    std::vector<Worker> workers;
    uint64_t next_worker = 1;
    double now = 0;
    for (int step = 0; step < 100000 && !t->epoch_done(); ++step) {
      now += 1;
      int r = static_cast<int>(rng() % 100);
      if (workers.empty() || r < 3) {
        workers.push_back({next_worker++, std::nullopt, 0});  // a worker joins
        continue;
      }
      size_t k = rng() % workers.size();
      Worker& w = workers[k];
      if (r < 6) {  // kill -9
        t->drop_worker(w.id);
        workers.erase(workers.begin() + static_cast<long>(k));
        continue;
      }
      if (r < 8 && w.lease) {  // SIGTERM: give the split back and leave
        ASSERT_TRUE(t->give_back(w.id, w.lease->split.id).ok());
        workers.erase(workers.begin() + static_cast<long>(k));
        continue;
      }
      if (r < 10 && w.lease) {  // its Python process killed: the split fails, the worker stays
        ASSERT_TRUE(t->fail(w.id, w.lease->split.id, "killed").ok());
        w.lease.reset();
        continue;
      }
      if (!w.lease) {
        std::vector<uint64_t> others;
        for (const Worker& o : workers)
          if (o.id != w.id && rng() % 2 == 0) others.push_back(o.id);
        w.lease = t->grant(w.id, now, others);
        w.next = 0;  // a worker runs a split from its start
        continue;
      }
      uint64_t id = w.lease->split.id;
      if (w.next < batches_of(id)) {
        auto v = t->accept_batch(w.id, id, w.next++, now);
        ASSERT_TRUE(v.ok()) << v.status().message();
        if (*v == BatchVerdict::kDeliver) ++delivered[{id, w.next - 1}];
      } else {
        ASSERT_TRUE(t->complete(w.id, id, w.next).ok());
        w.lease.reset();
      }
    }
    ASSERT_TRUE(t->epoch_done()) << "seed " << seed;
    size_t expected = 0;
    for (const auto& s : splits(30)) expected += batches_of(s.id);
    EXPECT_EQ(delivered.size(), expected) << "seed " << seed;
    for (const auto& [key, times] : delivered) EXPECT_EQ(times, 1) << "split " << key.first << " batch " << key.second;
  }
}

TEST(LeaseTableTest, ResumeDeliversExactlyTheRest) {
  LeaseConfig c;
  c.seed = 3;
  auto t = LeaseTable::create(splits(6), c);
  std::set<std::pair<uint64_t, uint64_t>> before, after;
  // Finish two splits and half of a third, then "crash" the trainer.
  for (int n = 0; n < 2; ++n) {
    auto l = t->grant(1, 0);
    for (uint64_t b = 0; b < batches_of(l->split.id); ++b)
      if (*t->accept_batch(1, l->split.id, b, 0) == BatchVerdict::kDeliver) before.insert({l->split.id, b});
    ASSERT_TRUE(t->complete(1, l->split.id, batches_of(l->split.id)).ok());
  }
  auto half = t->grant(1, 0);
  ASSERT_EQ(*t->accept_batch(1, half->split.id, 0, 0), BatchVerdict::kDeliver);
  before.insert({half->split.id, 0});
  LeasePosition pos = t->state();
  EXPECT_EQ(pos.done.size(), 2u);
  ASSERT_EQ(pos.partial.size(), 1u);

  auto resumed = LeaseTable::create(splits(6), c);
  ASSERT_TRUE(resumed->resume(pos).ok());
  while (auto l = resumed->grant(2, 0)) {
    for (uint64_t b = 0; b < batches_of(l->split.id); ++b)
      if (*resumed->accept_batch(2, l->split.id, b, 0) == BatchVerdict::kDeliver) after.insert({l->split.id, b});
    ASSERT_TRUE(resumed->complete(2, l->split.id, batches_of(l->split.id)).ok());
  }
  EXPECT_TRUE(resumed->epoch_done());
  size_t total = 0;
  for (const auto& s : splits(6)) total += batches_of(s.id);
  EXPECT_EQ(before.size() + after.size(), total);
  for (const auto& key : after) EXPECT_EQ(before.count(key), 0u) << "delivered twice";
  LeaseConfig other = c;
  other.seed = 4;
  auto mismatch = LeaseTable::create(splits(6), other);
  EXPECT_EQ(mismatch->resume(pos).message(), "lease table: resume: position has seed 3, this table 4");
}

// A position written by hand that names a split twice would count it twice
// and end the epoch early: refused, naming the split.
TEST(LeaseTableTest, ResumeRefusesASplitNamedTwice) {
  LeaseConfig c;
  c.seed = 3;
  const std::string twice = "lease table: resume: position names split 102 twice (in done or partial)";
  LeasePosition done_twice{0, 3, {102, 102}, {}};
  EXPECT_EQ(LeaseTable::create(splits(6), c)->resume(done_twice).message(), twice);
  LeasePosition done_and_partial{0, 3, {102}, {{102, 1}}};
  EXPECT_EQ(LeaseTable::create(splits(6), c)->resume(done_and_partial).message(), twice);
  LeasePosition partial_twice{0, 3, {}, {{102, 1}, {102, 1}}};
  EXPECT_EQ(LeaseTable::create(splits(6), c)->resume(partial_twice).message(), twice);
  LeasePosition fine{0, 3, {101, 102}, {{103, 1}}};
  EXPECT_TRUE(LeaseTable::create(splits(6), c)->resume(fine).ok());
}

// With deterministic order a split that becomes pending again goes back
// to its place in the epoch's order, not to the front; holder() and
// is_pending() say where each split is.
TEST(LeaseTableTest, DeterministicOrderKeepsPendingSplitsInEpochOrder) {
  LeaseConfig c;
  c.seed = 11;
  c.deterministic_order = true;
  auto t = LeaseTable::create(splits(5), c);
  const std::vector<uint64_t> order = t->epoch_order();
  ASSERT_EQ(order.size(), 5u);
  EXPECT_NE(order, (std::vector<uint64_t>{100, 101, 102, 103, 104})) << "shuffled (seed 11)";
  auto a = t->grant(1, 0);
  auto b = t->grant(2, 0);
  auto d = t->grant(2, 0);
  ASSERT_EQ(a->split.id, order[0]);
  ASSERT_EQ(b->split.id, order[1]);
  ASSERT_EQ(d->split.id, order[2]);
  EXPECT_EQ(d->rank, 2u);
  EXPECT_EQ(t->holder(order[0]), 1u);
  EXPECT_EQ(t->holder(order[2]), 2u);
  EXPECT_FALSE(t->holder(order[3]).has_value());
  EXPECT_TRUE(t->is_pending(order[3]));
  ASSERT_TRUE(t->give_back(2, order[2]).ok());  // after order[1], before order[3]
  EXPECT_TRUE(t->is_pending(order[2]));
  EXPECT_EQ(t->drop_worker(1), std::vector<uint64_t>{order[0]});
  std::vector<uint64_t> next, ranks;
  while (auto l = t->grant(3, 0)) {
    next.push_back(l->split.id);
    ranks.push_back(l->rank);
  }
  EXPECT_EQ(next, (std::vector<uint64_t>{order[0], order[2], order[3], order[4]}));
  EXPECT_EQ(ranks, (std::vector<uint64_t>{0, 2, 3, 4}));
  EXPECT_FALSE(t->is_pending(order[0]));
}

}  // namespace
}  // namespace goldminer
