#include "readers/test_util.h"

namespace goldminer::readers {
namespace {

using testing::TempDir;

TEST(TextTest, LinesCrLfAndFinalLineWithoutNewline) {
  TempDir dir;
  std::string path = dir.write("t.txt", "alpha\r\n\nbeta gamma\nlast");
  auto plan = testing::plan_or_die(Format::kText, {path}, 2);
  EXPECT_EQ(plan.total_records, 4u);
  ASSERT_EQ(plan.splits.size(), 2u);
  EXPECT_EQ(plan.splits[1].byte_offset, 8u);
  auto batches = testing::read_split(plan.config, plan.splits[0], 0, 8, 0);
  ASSERT_EQ(batches.size(), 1u);
  const Batch& b = batches[0];
  ASSERT_EQ(b.tensors.size(), 2u);
  EXPECT_TRUE(testing::has_layout(b.tensors[0], wire::DType::kUInt8, {5}));
  EXPECT_EQ(testing::bytes_of(b.tensors[0]), "alpha");
  EXPECT_TRUE(testing::has_layout(b.tensors[1], wire::DType::kInt64, {2}));
  EXPECT_EQ(testing::values<int64_t>(b.tensors[1]), (std::vector<int64_t>{5, 0}));
  EXPECT_EQ(b.records, (std::vector<uint64_t>{0, 1}));
  batches = testing::read_split(plan.config, plan.splits[1], 0, 1, 0);
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(testing::bytes_of(batches[0].tensors[0]), "beta gamma");
  EXPECT_EQ(testing::bytes_of(batches[1].tensors[0]), "last");
  EXPECT_EQ(batches[1].records, (std::vector<uint64_t>{3}));
}

TEST(TextTest, EmptyFileHasNoSplits) {
  TempDir dir;
  auto plan = testing::plan_or_die(Format::kText, {dir.write("e.txt", "")}, 5);
  EXPECT_EQ(plan.total_records, 0u);
  EXPECT_TRUE(plan.splits.empty());
}

TEST(TextTest, LongLinesCrossReadBuffers) {
  TempDir dir;
  std::string big(3 << 20, 'x');
  std::string path = dir.write("big.txt", "a\n" + big + "\nb\n");
  auto plan = testing::plan_or_die(Format::kText, {path}, 1);
  ASSERT_EQ(plan.total_records, 3u);
  EXPECT_EQ(plan.splits[2].byte_offset, 2 + big.size() + 1);
  auto batches = testing::read_split(plan.config, plan.splits[1], 0, 4, 0);
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_EQ(testing::bytes_of(batches[0].tensors[0]), big);
}

}  // namespace
}  // namespace goldminer::readers
