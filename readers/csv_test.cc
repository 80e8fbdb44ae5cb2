#include <cmath>

#include "readers/test_util.h"

namespace goldminer::readers {
namespace {

using testing::TempDir;

// The hash documented in README.md (63-bit FNV-1a).
int64_t fnv(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return static_cast<int64_t>(h & 0x7fffffffffffffffull);
}

TEST(CsvTest, QuotedFieldsTypesAndMissing) {
  TempDir dir;
  std::string text =
      "id,title,score,tag\r\n"
      "1,\"Bridges, The (1995)\",4.5,a\r\n"
      "2,\"say \"\"hi\"\"\",,\r\n"
      "3,\"two\r\nlines\",-1e2,\"\"\r\n"
      "4,plain,7,b";
  std::string path = dir.write("m.csv", text);
  auto plan = testing::plan_or_die(Format::kCsv, {path}, 2);
  ASSERT_EQ(plan.total_records, 4u);
  ASSERT_EQ(plan.splits.size(), 2u);
  EXPECT_EQ(plan.splits[0].byte_offset, 20u);
  EXPECT_EQ(plan.splits[1].byte_offset, text.find("3,\"two"));
  std::vector<float> num;
  std::vector<int64_t> cat;
  for (const SplitRange& s : plan.splits) {
    for (const Batch& b : testing::read_split(plan.config, s, 0, 8, 0)) {
      ASSERT_EQ(b.tensors.size(), 2u);
      EXPECT_TRUE(testing::has_layout(b.tensors[0], wire::DType::kFloat32, {2, 2}));  // id, score
      EXPECT_TRUE(testing::has_layout(b.tensors[1], wire::DType::kInt64, {2, 2}));  // title, tag
      auto n = testing::values<float>(b.tensors[0]);
      auto c = testing::values<int64_t>(b.tensors[1]);
      num.insert(num.end(), n.begin(), n.end());
      cat.insert(cat.end(), c.begin(), c.end());
    }
  }
  ASSERT_EQ(num.size(), 8u);
  EXPECT_EQ(num[0], 1.0f);
  EXPECT_EQ(num[1], 4.5f);
  EXPECT_EQ(num[2], 2.0f);
  EXPECT_TRUE(std::isnan(num[3]));
  EXPECT_EQ(num[5], -100.0f);
  EXPECT_EQ(num[7], 7.0f);
  EXPECT_EQ(cat[0], fnv("Bridges, The (1995)"));
  EXPECT_EQ(cat[1], fnv("a"));
  EXPECT_EQ(cat[2], fnv("say \"hi\""));
  EXPECT_EQ(cat[3], -1);
  EXPECT_EQ(cat[4], fnv("two\r\nlines"));
  EXPECT_EQ(cat[5], -1);
  EXPECT_EQ(cat[6], fnv("plain"));
}

TEST(CsvTest, WrongFieldCountAndBadNumbersAreCorrupt) {
  TempDir dir;
  std::string head = "a,b\n", r0 = "1,x\n", r1 = "2,y,z\n", r2 = "3\n", r3 = "4,\"open\n";
  std::string path = dir.write("c.csv", head + r0 + r1 + r2 + r3);
  auto plan = testing::plan_or_die(Format::kCsv, {path}, 100);
  ASSERT_EQ(plan.total_records, 4u);  // the unterminated quote runs to the end
  std::string err = testing::split_error(plan.config, plan.splits[0]);
  EXPECT_EQ(err, "csv: " + path + ": byte " + std::to_string(head.size() + r0.size()) +
                     " (record 1): 3 fields, the header has 2");
  plan = testing::plan_or_die(Format::kCsv, {path}, 100, 10);
  auto batches = testing::read_split(plan.config, plan.splits[0], 0, 8, 0);
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_EQ(batches[0].records, (std::vector<uint64_t>{0}));
  EXPECT_EQ(batches[0].bad_records, 3u);
}

TEST(CsvTest, NumericColumnWithTextLaterIsCorrupt) {
  TempDir dir;
  std::string path = dir.write("c.csv", "a\n1\n2\n");
  auto plan = testing::plan_or_die(Format::kCsv, {path}, 100);
  dir.write("c.csv", "a\n1\nzz\n");
  std::string err = testing::split_error(plan.config, plan.splits[0]);
  EXPECT_NE(err.find("byte 4 (record 1): field 1 (a): 'zz' is not a number"), std::string::npos) << err;
}

TEST(CsvTest, HeadersMustAgreeAcrossFiles) {
  TempDir dir;
  InputSpec spec;
  spec.format = Format::kCsv;
  spec.paths = {dir.write("a.csv", "x,y\n1,2\n"), dir.write("b.csv", "x,z\n1,2\n")};
  auto plan = plan_dataset(spec, ReaderOptions(), 10);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("b.csv: header differs"), std::string::npos);
  spec.paths = {dir.write("e.csv", "")};
  EXPECT_FALSE(plan_dataset(spec, ReaderOptions(), 10).ok());
}

TEST(CsvTest, SplitsAtArbitraryRecordsWithQuotedNewlines) {
  TempDir dir;
  testing::TestRng rng(3);
  std::string text = "k,v\n";
  for (int i = 0; i < 57; ++i) {
    text += std::to_string(i) + ",";
    switch (rng.below(3)) {
      case 0: text += "\"multi\nline " + std::to_string(i) + "\"\n"; break;
      case 1: text += "\"comma, " + std::to_string(i) + "\"\r\n"; break;
      default: text += "w" + std::to_string(i) + "\n"; break;
    }
  }
  std::string path = dir.write("q.csv", text);
  testing::expect_each_record_once(Format::kCsv, path, 57, {1, 4, 56, 57}, 1, 5, 3, [](const Batch& b) {
    auto k = testing::values<float>(b.tensors[0]);
    for (size_t i = 0; i < b.records.size(); ++i) EXPECT_EQ(k[i], static_cast<float>(b.records[i]));
  });
}

}  // namespace
}  // namespace goldminer::readers
