#include "gmcore/reorder_buffer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace goldminer {
namespace {

using Batch = std::pair<uint64_t, uint64_t>;  // split, sequence

// Batches of splits 10, 11, ... (split 10 + k has 1 + k % 3 batches) as
// `workers` workers interleave them: each worker runs its splits' batches in
// sequence order, the workers' streams merged at random.
std::vector<Batch> interleaved(int splits, int workers, uint64_t seed) {
  std::vector<std::deque<Batch>> streams(workers);
  for (int k = 0; k < splits; ++k)
    for (uint64_t b = 0; b < 1 + static_cast<uint64_t>(k) % 3; ++b)
      streams[k % workers].push_back({10 + static_cast<uint64_t>(k), b});
  std::mt19937_64 rng(seed);
  std::vector<Batch> out;
  for (;;) {
    std::vector<size_t> live;
    for (size_t w = 0; w < streams.size(); ++w)
      if (!streams[w].empty()) live.push_back(w);
    if (live.empty()) return out;
    auto& s = streams[live[rng() % live.size()]];
    out.push_back(s.front());
    s.pop_front();
  }
}

bool is_last(const Batch& b) { return b.second == (b.first - 10) % 3; }

TEST(ReorderBufferTest, DeliversInSplitThenSequenceOrderWhateverTheArrival) {
  std::vector<uint64_t> order;
  for (uint64_t k = 0; k < 12; ++k) order.push_back(10 + k);
  std::vector<Batch> want;
  for (uint64_t id : order)
    for (uint64_t b = 0; b <= (id - 10) % 3; ++b) want.push_back({id, b});
  for (uint64_t seed = 0; seed < 50; ++seed) {
    ReorderBuffer<Batch> r;
    r.start(order);
    std::vector<Batch> got;
    for (const Batch& b : interleaved(12, 3, seed)) {
      auto out = r.add(b.first, b.second, is_last(b), b);
      ASSERT_TRUE(out.ok()) << out.status().message();
      got.insert(got.end(), out->begin(), out->end());
    }
    EXPECT_EQ(got, want) << "seed " << seed;
    EXPECT_EQ(r.held(), 0u);
    EXPECT_FALSE(r.head().has_value());
  }
}

TEST(ReorderBufferTest, HeadIsTheFirstSplitNotWhollyDelivered) {
  ReorderBuffer<int> r;
  r.start({5, 3, 9});  // any order, not only ascending ids
  EXPECT_EQ(r.head(), 5u);
  auto out = r.add(3, 0, true, 30);
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE(out->empty()) << "split 3 waits for split 5";
  EXPECT_EQ(r.held(), 1u);
  out = r.add(5, 0, false, 50);
  EXPECT_EQ(*out, std::vector<int>{50});
  EXPECT_EQ(r.head(), 5u);
  out = r.add(5, 1, true, 51);
  EXPECT_EQ(*out, (std::vector<int>{51, 30}));
  EXPECT_EQ(r.head(), 9u);
}

TEST(ReorderBufferTest, ResumesAfterDeliveredSplitsAndBatches) {
  ReorderBuffer<int> r;
  r.start({1, 2, 3}, {1}, {{2, 2}});
  EXPECT_EQ(r.head(), 2u);
  auto out = r.add(3, 0, true, 30);
  EXPECT_TRUE(out->empty());
  out = r.add(2, 2, true, 22);  // batches 0 and 1 were delivered before
  EXPECT_EQ(*out, (std::vector<int>{22, 30}));
  EXPECT_FALSE(r.head().has_value());
}

TEST(ReorderBufferTest, RefusesWhatCannotBeNext) {
  ReorderBuffer<int> r;
  r.start({1, 2}, {1});
  EXPECT_EQ(r.add(1, 0, true, 0).status().message(), "reorder: split 1 is not to be delivered this epoch");
  EXPECT_EQ(r.add(7, 0, true, 0).status().message(), "reorder: split 7 is not to be delivered this epoch");
  EXPECT_EQ(r.add(2, 1, false, 0).status().message(), "reorder: split 2: batch 1 where batch 0 was next");
  ASSERT_TRUE(r.add(2, 0, true, 0).ok());
  EXPECT_EQ(r.add(2, 1, false, 0).status().message(), "reorder: split 2 is not to be delivered this epoch");
}

}  // namespace
}  // namespace goldminer
