// Tests of the data-parallel deal: every split to one rank, the same
// number of batches on every rank, batch sizes within the batch size and
// never empty, drop_last leaving out only what does not divide evenly.
#include "gmcore/rank_share.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <vector>

#include "gmcore/lease_table.h"

namespace goldminer {
namespace {

// Every record read by one rank (at most one with drop_last; with pad by
// a second rank at most, never twice by one), every rank with the same
// number of batches (and with pad of records), every batch within the
// batch size and never empty.
void check_deal(const std::vector<uint64_t>& records, uint32_t bs, uint32_t world, RankTail tail) {
  auto d = deal_splits(records, bs, world, tail);
  ASSERT_TRUE(d.ok()) << d.status().message();
  std::vector<uint64_t> batches(world, 0), rank_records(world, 0);
  std::vector<std::vector<std::vector<int>>> readers(records.size());
  for (size_t i = 0; i < records.size(); ++i) readers[i].resize(records[i]);
  for (const RankPiece& p : d->pieces) {
    ASSERT_LT(p.owner, world);
    ASSERT_LT(p.split, records.size());
    ASSERT_LE(p.skip + p.records, records[p.split]);
    for (uint64_t k = p.skip; k < p.skip + p.records; ++k) {
      auto& who = readers[p.split][k];
      ASSERT_TRUE(std::find(who.begin(), who.end(), static_cast<int>(p.owner)) == who.end())
          << "split " << p.split << " record " << k << " twice on rank " << p.owner;
      who.push_back(static_cast<int>(p.owner));
      ASSERT_LE(who.size(), tail == RankTail::kPad ? 2u : 1u) << "split " << p.split << " record " << k;
    }
    batches[p.owner] += p.batches;
    rank_records[p.owner] += p.records;
    uint64_t sum = 0;
    for (uint64_t k = 0; k < p.batches; ++k) {
      const uint64_t size = batch_size_at(p.records, p.batches, bs, k);
      ASSERT_GE(size, 1u) << "split " << p.split << " batch " << k;
      ASSERT_LE(size, bs);
      sum += size;
    }
    EXPECT_EQ(sum, p.records) << "split " << p.split << ": the batches hold the part's records";
    EXPECT_EQ(batch_size_at(p.records, p.batches, bs, p.batches), 0u);
  }
  for (uint32_t r = 0; r < world; ++r) EXPECT_EQ(batches[r], d->batches_per_rank) << "rank " << r;
  if (tail == RankTail::kPad)
    for (uint32_t r = 1; r < world; ++r) EXPECT_EQ(rank_records[r], rank_records[0]) << "rank " << r;
  if (tail != RankTail::kDropLast)
    for (const auto& split : readers)
      for (const auto& who : split) ASSERT_FALSE(who.empty()) << "a record no rank reads";
}

TEST(RankShareTest, BatchSizesAreFullFirstThenTheRestShared) {
  // The cut without ranks: full batches, then the tail.
  EXPECT_EQ(batch_size_at(10, 0, 4, 0), 4u);
  EXPECT_EQ(batch_size_at(10, 0, 4, 2), 2u);
  EXPECT_EQ(batch_size_at(10, 0, 4, 3), 0u);
  // 20 records in 4 batches of at most 8: 8, 8, then 2 and 2.
  EXPECT_EQ(batch_size_at(20, 4, 8, 1), 8u);
  EXPECT_EQ(batch_size_at(20, 4, 8, 2), 2u);
  EXPECT_EQ(batch_size_at(20, 4, 8, 3), 2u);
  // One record per batch at most.
  EXPECT_EQ(batch_size_at(3, 3, 8, 2), 1u);
}

TEST(RankShareTest, EveryRankTakesTheSameNumberOfBatches) {
  check_deal({100, 100, 100}, 10, 2, RankTail::kSmallerBatches);  // the middle split read by both
  check_deal({5000, 777}, 50, 2, RankTail::kSmallerBatches);
  check_deal({1}, 1, 1, RankTail::kSmallerBatches);
  check_deal({1000}, 64, 8, RankTail::kSmallerBatches);  // more ranks than splits
  check_deal({100, 100, 101}, 10, 2, RankTail::kPad);  // rank 1 reads split 0's first record again
  std::mt19937_64 rng(3);
  for (int round = 0; round < 300; ++round) {
    std::vector<uint64_t> records(1 + rng() % 40);
    for (auto& r : records) r = 50 + rng() % 2000;
    const uint32_t bs = 2 + rng() % 64, world = 1 + rng() % 8;
    SCOPED_TRACE("round " + std::to_string(round));
    check_deal(records, bs, world, RankTail::kSmallerBatches);
    check_deal(records, bs, world, RankTail::kDropLast);
    if (records.size() > world) check_deal(records, bs, world, RankTail::kPad);
  }
}

TEST(RankShareTest, TooFewRecordsForEqualBatchesIsAnErrorUnlessDropLast) {
  // Batch size 1: 3 records on 2 ranks are 2 batches and 1.
  auto d = deal_splits({3}, 1, 2, RankTail::kSmallerBatches);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().message(),
            "ranks: 2 ranks cannot take the same number of batches: rank 1 has 1 records for the 2 batches of "
            "another (batch size 1); use drop_last, pad, fewer ranks or a larger batch size");
  auto dropped = deal_splits({3}, 1, 2, RankTail::kDropLast);
  ASSERT_TRUE(dropped.ok());
  EXPECT_EQ(dropped->batches_per_rank, 1u);
  ASSERT_EQ(dropped->pieces.size(), 2u);
  EXPECT_EQ(dropped->pieces[0].records, 1u) << "rank 0 leaves out its second record";
  EXPECT_EQ(dropped->pieces[1].skip, 2u);
  EXPECT_FALSE(deal_splits({3}, 4, 4, RankTail::kSmallerBatches).ok()) << "rank 3 has no record";
  EXPECT_FALSE(deal_splits({30}, 0, 2, RankTail::kSmallerBatches).ok());
  EXPECT_FALSE(deal_splits({30}, 10, 0, RankTail::kSmallerBatches).ok());
  // pad: 3 records in 2 splits on 2 ranks: rank 1 reads split 0's first again.
  auto padded = deal_splits({2, 1}, 1, 2, RankTail::kPad);
  ASSERT_TRUE(padded.ok()) << padded.status().message();
  EXPECT_EQ(padded->batches_per_rank, 2u);
  ASSERT_EQ(padded->pieces.size(), 3u);
  EXPECT_EQ(padded->pieces.back().owner, 1u);
  EXPECT_EQ(padded->pieces.back().split, 0u);
  EXPECT_EQ(padded->pieces.back().skip, 0u);
  // One split read in part by both ranks: nothing left to repeat from.
  auto no_split = deal_splits({3}, 1, 2, RankTail::kPad);
  ASSERT_FALSE(no_split.ok());
  EXPECT_EQ(no_split.status().message(), "ranks: pad: rank 1 reads a part of every split, so none is left to "
                                         "repeat a record of; use smaller splits or drop_last");
}

// Two lease tables, ranks 0 and 1 of the same splits: each epoch they
// lease parts that cover every record once, with the same batch count; a
// position of one is refused by the other.
TEST(RankShareTest, TwoRanksLeaseDisjointPartsOfEveryEpoch) {
  std::vector<InputSplit> splits;
  for (uint64_t i = 0; i < 9; ++i) splits.push_back(InputSplit{i, "f", i * 100, i * 100 + (i == 8 ? 37 : 100)});
  std::vector<LeaseTable> ranks;
  for (uint32_t r = 0; r < 2; ++r) {
    LeaseConfig c;
    c.seed = 11;
    c.trainer_rank = r;
    c.world_size = 2;
    c.batch_size = 16;
    auto t = LeaseTable::create(splits, c);
    ASSERT_TRUE(t.ok()) << t.status().message();
    ranks.push_back(std::move(t).value());
  }
  for (uint32_t epoch = 0; epoch < 3; ++epoch) {
    std::vector<int> reader(837, -1);
    for (uint32_t r = 0; r < 2; ++r) {
      ASSERT_TRUE(ranks[r].start_epoch(epoch).ok());
      uint64_t batches = 0;
      while (auto lease = ranks[r].grant(1, 0)) {
        for (uint64_t k = lease->split.begin + lease->skip; k < lease->split.end; ++k) {
          ASSERT_EQ(reader[k], -1) << "record " << k << " on two ranks";
          reader[k] = static_cast<int>(r);
        }
        for (uint64_t b = 0; b < lease->batches; ++b)
          ASSERT_EQ(*ranks[r].accept_batch(1, lease->split.id, b, 0), BatchVerdict::kDeliver);
        ASSERT_TRUE(ranks[r].complete(1, lease->split.id, lease->batches).ok());
        batches += lease->batches;
      }
      EXPECT_TRUE(ranks[r].epoch_done());
      EXPECT_EQ(batches, ranks[r].epoch_batches());
    }
    for (int r : reader) ASSERT_NE(r, -1);
    EXPECT_EQ(ranks[0].epoch_batches(), ranks[1].epoch_batches()) << "epoch " << epoch;
    EXPECT_EQ(ranks[0].epoch_records() + ranks[1].epoch_records(), 837u);
  }
  ASSERT_TRUE(ranks[0].start_epoch(1).ok());
  ASSERT_TRUE(ranks[1].start_epoch(1).ok());
  // A split only rank 0 reads in epoch 1.
  std::set<uint64_t> of_rank1(ranks[1].epoch_order().begin(), ranks[1].epoch_order().end());
  uint64_t only0 = UINT64_MAX;
  for (uint64_t id : ranks[0].epoch_order())
    if (!of_rank1.count(id)) only0 = id;
  ASSERT_NE(only0, UINT64_MAX);
  LeasePosition p = ranks[0].state();
  p.partial.emplace_back(only0, 1);
  Status wrong = ranks[1].resume(p);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.message().find("split " + std::to_string(only0) + " is not rank 1's in epoch 1"), std::string::npos)
      << wrong.message();
}

}  // namespace
}  // namespace goldminer
