#include <cmath>

#include "readers/test_util.h"

namespace goldminer::readers {
namespace {

using testing::TempDir;

// A full row: label, I1..I13 = i*10+k, C1..C26 = 8 hex digits.
std::string row(int i, const std::string& eol = "\n") {
  std::string s = std::to_string(i % 2);
  for (int k = 1; k <= 13; ++k) s += "\t" + std::to_string(i * 10 + k);
  char hex[16];
  for (int k = 1; k <= 26; ++k) {
    std::snprintf(hex, sizeof hex, "%08x", 0x10000000u * (k % 16) + static_cast<unsigned>(i));
    s += "\t" + std::string(hex);
  }
  return s + eol;
}

TEST(CriteoTsvTest, ExactValuesMissingRaggedAndCrLf) {
  TempDir dir;
  // Row 1: missing values inside; row 2: ragged (only 15 fields), CRLF;
  // row 3: no final newline.
  std::string r1 = "1\t\t-2\t3.5" + std::string(10, '\t') + "\t\tdeadbeef";
  for (int k = 3; k <= 26; ++k) r1 += "\t";
  std::string r2 = "0\t5\t6\t7\t8\t9\t10\t11\t12\t13\t14\t15\t16\t17\tABCDEF01\r\n";
  std::string path = dir.write("day", row(0) + r1 + "\n" + r2 + row(3, ""));
  auto plan = testing::plan_or_die(Format::kCriteoTsv, {path}, 100);
  ASSERT_EQ(plan.total_records, 4u);
  auto batches = testing::read_split(plan.config, plan.splits[0], 0, 4, 0);
  ASSERT_EQ(batches.size(), 1u);
  const Batch& b = batches[0];
  ASSERT_EQ(b.tensors.size(), 3u);
  EXPECT_TRUE(testing::has_layout(b.tensors[0], wire::DType::kFloat32, {4}));
  EXPECT_EQ(b.tensors[1].shape, (std::vector<int64_t>{4, 13}));
  EXPECT_TRUE(testing::has_layout(b.tensors[2], wire::DType::kInt64, {4, 26}));
  auto label = testing::values<float>(b.tensors[0]);
  auto dense = testing::values<float>(b.tensors[1]);
  auto sparse = testing::values<int64_t>(b.tensors[2]);
  EXPECT_EQ(label, (std::vector<float>{0, 1, 0, 1}));
  EXPECT_EQ(dense[0], 1.0f);
  EXPECT_EQ(dense[12], 13.0f);
  EXPECT_EQ(sparse[0], 0x10000000);
  EXPECT_EQ(sparse[25], 0xa0000000);
  // Row 1.
  EXPECT_TRUE(std::isnan(dense[13]));
  EXPECT_EQ(dense[14], -2.0f);
  EXPECT_EQ(dense[15], 3.5f);
  for (int k = 3; k < 13; ++k) EXPECT_TRUE(std::isnan(dense[13 + k])) << k;
  EXPECT_EQ(sparse[26], -1);
  EXPECT_EQ(sparse[27], 0xdeadbeef);
  for (int k = 2; k < 26; ++k) EXPECT_EQ(sparse[26 + k], -1) << k;
  // Row 2: ragged, CRLF.
  EXPECT_EQ(dense[26 + 12], 17.0f);
  EXPECT_EQ(sparse[52], 0xabcdef01);
  for (int k = 1; k < 26; ++k) EXPECT_EQ(sparse[52 + k], -1) << k;
  // Row 3: no final newline.
  EXPECT_EQ(dense[39], 31.0f);
  EXPECT_EQ(sparse[78 + 25], 0xa0000003);
}

TEST(CriteoTsvTest, CorruptRecordNamesFileAndByteOffset) {
  TempDir dir;
  std::string good = row(0);
  std::string bad_number = "0\t1\tabc\n";
  std::string too_many = row(1, "") + "\textra\n";
  std::string path = dir.write("day", good + bad_number + row(2) + too_many + row(4));
  auto plan = testing::plan_or_die(Format::kCriteoTsv, {path}, 100);
  ASSERT_EQ(plan.total_records, 5u);
  std::string err = testing::split_error(plan.config, plan.splits[0]);
  EXPECT_EQ(err, "criteo-tsv: " + path + ": byte " + std::to_string(good.size()) +
                     " (record 1): field 3 (I2): 'abc' is not a number");

  // With a budget: skipped and counted; the rest comes through.
  plan = testing::plan_or_die(Format::kCriteoTsv, {path}, 100, 2);
  auto batches = testing::read_split(plan.config, plan.splits[0], 0, 2, 0);
  uint64_t bad = 0;
  std::vector<uint64_t> records;
  for (const Batch& b : batches) {
    bad += b.bad_records;
    records.insert(records.end(), b.records.begin(), b.records.end());
  }
  EXPECT_EQ(bad, 2u);
  EXPECT_EQ(records, (std::vector<uint64_t>{0, 2, 4}));
  EXPECT_EQ(batches[0].bad_records, 2u);  // read-ahead met both while making it

  // A budget of one is exceeded by the second.
  plan = testing::plan_or_die(Format::kCriteoTsv, {path}, 100, 1);
  err = testing::split_error(plan.config, plan.splits[0]);
  EXPECT_NE(err.find("byte " + std::to_string(good.size() + bad_number.size() + row(2).size()) +
                     " (record 3): more than 40 fields (max_bad_records 1 exceeded)"),
            std::string::npos)
      << err;
}

TEST(CriteoTsvTest, AllBadRecordsStillReported) {
  TempDir dir;
  std::string path = dir.write("day", "x\ny\n");
  auto plan = testing::plan_or_die(Format::kCriteoTsv, {path}, 100, 5);
  auto batches = testing::read_split(plan.config, plan.splits[0], 0, 4, 0);
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_EQ(batches[0].bad_records, 2u);
  EXPECT_TRUE(batches[0].records.empty());
  EXPECT_EQ(batches[0].tensors[1].shape, (std::vector<int64_t>{0, 13}));
}

TEST(CriteoTsvTest, SplitsAtArbitraryRecords) {
  TempDir dir;
  testing::TestRng rng(7);
  std::string text;
  for (int i = 0; i < 101; ++i) text += rng.below(3) == 0 ? row(i, "\r\n") : row(i);
  std::string path = dir.write("day", text);
  testing::expect_each_record_once(Format::kCriteoTsv, path, 101, {1, 9, 50, 101, 1000}, 5, 8, 16, [](const Batch& b) {
    auto dense = testing::values<float>(b.tensors[1]);
    for (size_t i = 0; i < b.records.size(); ++i) EXPECT_EQ(dense[i * 13], static_cast<float>(b.records[i] * 10 + 1));
  });
}

}  // namespace
}  // namespace goldminer::readers
