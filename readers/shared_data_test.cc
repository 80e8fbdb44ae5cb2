// Reads the real datasets under $GOLDMINER_SHARED_DATA/datasets (never
// copied into the project); each test skips, naming the path, without them.
#include <cmath>
#include <fstream>
#include <map>

#include "readers/test_util.h"

namespace goldminer::readers {
namespace {

#define SHARED_OR_SKIP(var, rel)                      \
  std::string var##_why;                              \
  std::string var = testing::shared_dataset(rel, &var##_why); \
  if (var.empty()) GTEST_SKIP() << var##_why

// Reads every split with a shuffle; checks each record comes once.
std::vector<Batch> read_everything(const DatasetPlan& plan, uint32_t batch) {
  std::vector<Batch> all;
  std::map<std::pair<uint32_t, uint64_t>, int> seen;
  for (const SplitRange& s : plan.splits) {
    for (Batch& b : testing::read_split(plan.config, s, 11, batch, 32)) {
      EXPECT_EQ(b.bad_records, 0u);
      for (uint64_t r : b.records) ++seen[{s.file_index, r}];
      all.push_back(std::move(b));
    }
  }
  EXPECT_EQ(seen.size(), plan.total_records);
  for (const auto& [key, n] : seen) EXPECT_EQ(n, 1);
  return all;
}

TEST(SharedDataTest, CriteoRawTsv) {
  SHARED_OR_SKIP(dir, "criteo_raw_tsv");
  std::string train = dir + "/sample_train.part1.txt", test = dir + "/sample_test.part1.txt";
  auto plan = testing::plan_or_die(Format::kCriteoTsv, {train, test}, 16);
  EXPECT_EQ(plan.records_per_file, (std::vector<uint64_t>{75, 75}));
  auto batches = read_everything(plan, 8);
  // First train row: 0, I1 missing, I2 = 0, ..., C1 = 05db9164.
  auto first = testing::read_split(plan.config, plan.splits[0], 0, 1, 0);
  ASSERT_FALSE(first.empty());
  auto dense = testing::values<float>(first[0].tensors[1]);
  auto sparse = testing::values<int64_t>(first[0].tensors[2]);
  EXPECT_EQ(testing::values<float>(first[0].tensors[0])[0], 0.0f);
  EXPECT_TRUE(std::isnan(dense[0]));
  EXPECT_EQ(dense[1], 0.0f);
  EXPECT_EQ(dense[4], 13275.0f);
  EXPECT_EQ(sparse[0], 0x05db9164);
  // Test file row 3 (record 2) has 38 fields: C25 and C26 missing.
  SplitRange s = plan.splits[plan.splits.size() - 5];
  ASSERT_EQ(s.file_index, 1u);
  ASSERT_EQ(s.first_record, 0u);
  auto test_rows = testing::read_split(plan.config, s, 0, 3, 0);
  auto test_sparse = testing::values<int64_t>(test_rows[0].tensors[2]);
  EXPECT_EQ(test_sparse[2 * 26 + 23], 0xded4aac9);
  EXPECT_EQ(test_sparse[2 * 26 + 24], -1);
  EXPECT_EQ(test_sparse[2 * 26 + 25], -1);
}

TEST(SharedDataTest, CriteoKaggleCsv) {
  SHARED_OR_SKIP(dir, "criteo_kaggle_tiny_csv");
  for (const char* name : {"/train.tiny.part1.csv", "/test.tiny.part1.csv"}) {
    auto plan = testing::plan_or_die(Format::kCsv, {dir + name}, 500);
    EXPECT_EQ(plan.total_records, 1499u);
    auto batches = read_everything(plan, 128);
    ASSERT_FALSE(batches.empty());
    // Id, Label, I1..I13 numeric; C1..C26 (hex hashes) categorical.
    EXPECT_EQ(batches[0].tensors[0].shape[1], 15);
    EXPECT_EQ(batches[0].tensors[1].shape[1], 26);
  }
}

TEST(SharedDataTest, MovielensQuotedCommas) {
  SHARED_OR_SKIP(path, "movielens_deepctr_sample/movielens_sample.part1.txt");
  auto plan = testing::plan_or_die(Format::kCsv, {path}, 64);
  EXPECT_EQ(plan.total_records, 150u);
  auto batches = read_everything(plan, 32);
  // user_id, movie_id, rating, timestamp, age, occupation | title, genres, gender, zip.
  EXPECT_EQ(batches[0].tensors[0].shape[1], 6);
  EXPECT_EQ(batches[0].tensors[1].shape[1], 4);
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : std::string("Bridges of Madison County, The (1995)")) h = (h ^ c) * 0x100000001b3ull;
  bool found = false;
  for (const Batch& b : batches) {
    auto cat = testing::values<int64_t>(b.tensors[1]);
    for (size_t i = 0; i < cat.size(); i += 4) found |= cat[i] == static_cast<int64_t>(h & 0x7fffffffffffffffull);
  }
  EXPECT_TRUE(found);
}

TEST(SharedDataTest, CriteoTfRecord) {
  SHARED_OR_SKIP(path, "criteo_deepctr_tfrecord/criteo_sample.tr.tfrecords");
  auto plan = testing::plan_or_die(Format::kTfRecord, {path}, 50);
  EXPECT_EQ(plan.total_records, 160u);
  EXPECT_EQ(plan.splits.size(), 4u);
  auto batches = read_everything(plan, 32);
  ASSERT_FALSE(batches.empty());
  EXPECT_GE(batches[0].tensors.size(), 39u);  // I1..I13, C1..C26, label
  EXPECT_NE(plan.config.schema.find("name 2:C1\n"), std::string::npos);
}

TEST(SharedDataTest, ImagesFromManifestAndFolder) {
  SHARED_OR_SKIP(manifest, "images_jpeg_manifest.csv");
  SHARED_OR_SKIP(folder, "images_jpeg");
  auto plan = testing::plan_or_die(Format::kJpeg, {manifest}, 64);
  ASSERT_EQ(plan.total_records, 268u);
  // Expected sizes from the manifest's width and height columns.
  std::ifstream in(manifest);
  std::string line;
  std::getline(in, line);
  std::vector<std::pair<int64_t, int64_t>> expected;  // (h, w)
  while (std::getline(in, line)) {
    // ...,bytes,width,height,bits,encoding,sha256: the last 6 fields are plain.
    std::vector<std::string> tail;
    size_t end = line.size();
    if (!line.empty() && line.back() == '\r') --end;
    for (int k = 0; k < 6; ++k) {
      size_t comma = line.rfind(',', end - 1);
      tail.push_back(line.substr(comma + 1, end - comma - 1));
      end = comma;
    }
    expected.emplace_back(std::stoll(tail[3]), std::stoll(tail[4]));
  }
  ASSERT_EQ(expected.size(), 268u);
  size_t checked = 0;
  for (const Batch& b : read_everything(plan, 16)) {
    auto shapes = testing::values<int64_t>(b.tensors[1]);
    int64_t total = 0;
    for (size_t i = 0; i < b.records.size(); ++i) {
      EXPECT_EQ(shapes[3 * i], expected[b.records[i]].first) << b.records[i];
      EXPECT_EQ(shapes[3 * i + 1], expected[b.records[i]].second) << b.records[i];
      EXPECT_EQ(shapes[3 * i + 2], 3);
      total += shapes[3 * i] * shapes[3 * i + 1] * 3;
      ++checked;
    }
    EXPECT_EQ(static_cast<int64_t>(b.tensors[0].data.size()), total);
  }
  EXPECT_EQ(checked, 268u);
  auto by_folder = testing::plan_or_die(Format::kJpeg, {folder}, 100);
  EXPECT_EQ(by_folder.total_records, 268u);
}

TEST(SharedDataTest, TextJargonAndFortunes) {
  SHARED_OR_SKIP(dir, "text");
  std::vector<std::string> files = {dir + "/jargon.dict", dir + "/fortunes/cookie", dir + "/fortunes/linux"};
  auto plan = testing::plan_or_die(Format::kText, files, 4096);
  for (size_t i = 0; i < files.size(); ++i) {
    std::ifstream in(files[i], std::ios::binary);
    uint64_t lines = 0;
    std::string line;
    while (std::getline(in, line)) ++lines;
    EXPECT_EQ(plan.records_per_file[i], lines) << files[i];
  }
  uint64_t bytes = 0;
  for (const Batch& b : read_everything(plan, 512)) bytes += b.tensors[0].data.size();
  EXPECT_GT(bytes, 1000000u);
}

}  // namespace
}  // namespace goldminer::readers
