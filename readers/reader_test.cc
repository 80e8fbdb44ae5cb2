// Format-independent behaviour: input specs, the config text, splits,
// shuffling and batching (exercised through the text format).
#include <algorithm>
#include <set>

#include "readers/test_util.h"

namespace goldminer::readers {
namespace {

using testing::TempDir;

TEST(InputSpecTest, ParsesFormatAndPaths) {
  auto spec = parse_input_spec("criteo-tsv:/data/day_0,/data/day_1");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(spec->format, Format::kCriteoTsv);
  EXPECT_EQ(spec->paths, (std::vector<std::string>{"/data/day_0", "/data/day_1"}));
  for (Format f : {Format::kCriteoTsv, Format::kCsv, Format::kTfRecord, Format::kJpeg, Format::kText, Format::kIndex}) {
    auto back = parse_format(format_name(f));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, f);
  }
}

TEST(IndexFormatTest, RecordsAreTheIntegersOfTheCountInSplitsAndBatches) {
  auto plan = testing::plan_or_die(Format::kIndex, {"10"}, 4);
  EXPECT_EQ(plan.config.files, std::vector<std::string>{"10"});
  EXPECT_EQ(plan.total_records, 10u);
  ASSERT_EQ(plan.splits.size(), 3u);
  EXPECT_EQ(plan.splits[2].first_record, 8u);
  EXPECT_EQ(plan.splits[2].records, 2u);
  auto batches = testing::read_split(plan.config, plan.splits[1], 1, 3, 0);
  ASSERT_EQ(batches.size(), 2u);
  ASSERT_EQ(batches[0].tensors.size(), 1u);
  EXPECT_EQ(batches[0].tensors[0].dtype, wire::DType::kInt64);
  EXPECT_EQ(testing::values<int64_t>(batches[0].tensors[0]), (std::vector<int64_t>{4, 5, 6}));
  EXPECT_EQ(testing::values<int64_t>(batches[1].tensors[0]), (std::vector<int64_t>{7}));
  EXPECT_EQ(batches[1].records, (std::vector<uint64_t>{7}));
  SplitRange part = plan.splits[0];
  part.skip = 3;  // another rank's
  auto rest = testing::read_split(plan.config, part, 1, 3, 0);
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0].records, (std::vector<uint64_t>{3}));
  auto round = DatasetConfig::decode(plan.config.encode());
  ASSERT_TRUE(round.ok()) << round.status().message();
  EXPECT_EQ(round->format, Format::kIndex);
}

TEST(IndexFormatTest, RejectsACountThatIsNotOne) {
  for (const char* bad : {"0", "-3", "ten", "12345678901234567890123"}) {
    InputSpec spec;
    spec.format = Format::kIndex;
    spec.paths = {bad};
    auto plan = plan_dataset(spec, ReaderOptions(), 4);
    ASSERT_FALSE(plan.ok()) << bad;
    EXPECT_NE(plan.status().message().find(std::string("index: '") + bad + "' is not a record count"),
              std::string::npos)
        << plan.status().message();
  }
}

TEST(InputSpecTest, RejectsBadPartsByName) {
  auto unknown = parse_input_spec("parquet:/x");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("unknown format 'parquet'"), std::string::npos);
  EXPECT_NE(unknown.status().message().find("criteo-tsv, csv, tfrecord, jpeg, text, index"), std::string::npos);
  auto empty = parse_input_spec("csv:");
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("empty path list"), std::string::npos);
  auto hole = parse_input_spec("csv:a,,b");
  ASSERT_FALSE(hole.ok());
  EXPECT_NE(hole.status().message().find("path 2 is empty"), std::string::npos);
  auto no_colon = parse_input_spec("/data/x");
  ASSERT_FALSE(no_colon.ok());
  EXPECT_NE(no_colon.status().message().find("FORMAT:PATH"), std::string::npos);
}

TEST(DatasetConfigTest, RoundTripsExactly) {
  DatasetConfig config;
  config.format = Format::kTfRecord;
  config.files = {"/a/b c", "/weird\nname:with,commas", ""};
  config.schema = std::string("binary\0schema\nwith lines", 24);
  config.options.max_bad_records = 17;
  config.options.jpeg_decode = {JpegDecode::kCrop, 224};
  auto back = DatasetConfig::decode(config.encode());
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->format, config.format);
  EXPECT_EQ(back->files, config.files);
  EXPECT_EQ(back->schema, config.schema);
  EXPECT_EQ(back->options.max_bad_records, 17u);
  EXPECT_EQ(jpeg_decode_name(back->options.jpeg_decode), "crop:224");
  EXPECT_EQ(back->encode(), config.encode());
}

TEST(DatasetConfigTest, JpegDecodeOptionsParseOrSayWhatIsWrong) {
  for (const char* good : {"full", "scale:256", "crop:224", "crop:1", "scale:65535", "resized-crop:224",
                           "resized-crop:8192"}) {
    auto o = parse_jpeg_decode(good);
    ASSERT_TRUE(o.ok()) << good << ": " << o.status().message();
    EXPECT_EQ(jpeg_decode_name(*o), good);
  }
  for (const char* bad : {"", "fast", "crop", "crop:", "crop:0", "scale:65536", "scale:2x", "full:3", "resized-crop:", "resized:224",
                          "resized-crop:8193"}) {
    auto o = parse_jpeg_decode(bad);
    ASSERT_FALSE(o.ok()) << bad;
    EXPECT_EQ(o.status().message().rfind(std::string("jpeg decode '") + bad + "'", 0), 0u) << o.status().message();
  }
}

TEST(DatasetConfigTest, DecodeRejectsGarbage) {
  for (const std::string& bad : {std::string(""), std::string("hello"), std::string("goldminer-dataset 2\n"),
                                 std::string("goldminer-dataset 1\nformat 3:foo\n")}) {
    auto r = DatasetConfig::decode(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().message().rfind("dataset config: byte ", 0), 0u) << r.status().message();
  }
  DatasetConfig config;
  config.files = {"/x"};
  std::string text = config.encode();
  // Truncated anywhere: rejected, never out of bounds.
  for (size_t n = 0; n < text.size(); ++n) EXPECT_FALSE(DatasetConfig::decode(text.substr(0, n)).ok()) << n;
  EXPECT_FALSE(DatasetConfig::decode(text + "x").ok());
  std::string huge = "goldminer-dataset 2\nformat 4:text\nmax_bad_records 0\njpeg_decode 4:full\nfiles 2\nfile 999:x\n";
  auto r = DatasetConfig::decode(huge);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("runs past the end"), std::string::npos) << r.status().message();
}

TEST(PlanTest, MissingFileNamesFileAndCause) {
  InputSpec spec;
  spec.format = Format::kText;
  spec.paths = {"/nonexistent/readers/file.txt"};
  auto plan = plan_dataset(spec, ReaderOptions(), 10);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().message(), "text: /nonexistent/readers/file.txt: No such file or directory");
  spec.paths = {};
  EXPECT_FALSE(plan_dataset(spec, ReaderOptions(), 10).ok());
}

std::string numbered_lines(int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += "line" + std::to_string(i) + "\n";
  return s;
}

// Every record of every split, as (file, record) -> text.
std::vector<std::pair<uint64_t, std::string>> read_all(const DatasetPlan& plan, uint64_t seed,
                                                       uint32_t batch, uint32_t shuffle) {
  std::vector<std::pair<uint64_t, std::string>> out;
  for (const SplitRange& split : plan.splits) {
    for (const Batch& b : testing::read_split(plan.config, split, seed + split.first_record, batch, shuffle)) {
      auto lengths = testing::values<int64_t>(b.tensors[1]);
      std::string data = testing::bytes_of(b.tensors[0]);
      EXPECT_EQ(lengths.size(), b.records.size());
      size_t at = 0;
      for (size_t i = 0; i < b.records.size(); ++i) {
        out.emplace_back(split.file_index * 1000000 + b.records[i],
                         data.substr(at, static_cast<size_t>(lengths[i])));
        at += static_cast<size_t>(lengths[i]);
      }
    }
  }
  return out;
}

TEST(SplitTest, EverySplitSizeYieldsEveryRecordOnce) {
  TempDir dir;
  std::string a = dir.write("a.txt", numbered_lines(23));
  std::string b = dir.write("b.txt", numbered_lines(7));
  for (uint64_t per_split : {1, 2, 3, 5, 7, 8, 22, 23, 24, 100}) {
    auto plan = testing::plan_or_die(Format::kText, {a, b}, per_split);
    EXPECT_EQ(plan.total_records, 30u);
    EXPECT_EQ(plan.records_per_file, (std::vector<uint64_t>{23, 7}));
    for (const SplitRange& s : plan.splits) {
      EXPECT_LE(s.records, per_split);
      EXPECT_EQ(s.byte_offset, s.first_record <= 10 ? 6 * s.first_record : 60 + 7 * (s.first_record - 10));
    }
    for (uint32_t shuffle : {0u, 4u}) {
      auto got = read_all(plan, 9, 4, shuffle);
      ASSERT_EQ(got.size(), 30u) << per_split;
      std::sort(got.begin(), got.end());
      for (size_t i = 0; i < got.size(); ++i) {
        uint64_t file = got[i].first / 1000000, record = got[i].first % 1000000;
        EXPECT_EQ(file, i < 23 ? 0u : 1u);
        EXPECT_EQ(record, i < 23 ? i : i - 23);
        EXPECT_EQ(got[i].second, "line" + std::to_string(record));
      }
    }
  }
}

// A rank's part of a split of lines: read past the records before it
// (record indexes stay the file's), shuffled within the part, cut into the
// batches asked for.
TEST(SplitTest, APartOfASplitHasItsRecordsOnceInTheBatchesAskedFor) {
  TempDir dir;
  std::string a = dir.write("a.txt", numbered_lines(23));
  auto plan = testing::plan_or_die(Format::kText, {a}, 20);
  SplitRange part = plan.splits[0];
  part.skip = 7;
  auto stream = SplitStream::open(plan.config, part, 5, 4, 8, 5);
  ASSERT_TRUE(stream.ok()) << stream.status().message();
  std::vector<uint64_t> records, sizes;
  for (;;) {
    auto b = (*stream)->next();
    ASSERT_TRUE(b.ok()) << b.status().message();
    if (!b->has_value()) break;
    sizes.push_back((*b)->records.size());
    records.insert(records.end(), (*b)->records.begin(), (*b)->records.end());
  }
  // 13 records in 5 batches of at most 4: 4, 4, then 2, 2, 1.
  EXPECT_EQ(sizes, (std::vector<uint64_t>{4, 4, 2, 2, 1}));
  std::sort(records.begin(), records.end());
  std::vector<uint64_t> want(13);
  for (size_t i = 0; i < want.size(); ++i) want[i] = 7 + i;
  EXPECT_EQ(records, want);
}

TEST(ShuffleTest, SameSeedSameBatchesOtherSeedOtherOrder) {
  TempDir dir;
  std::string a = dir.write("a.txt", numbered_lines(200));
  auto plan = testing::plan_or_die(Format::kText, {a}, 200);
  ASSERT_EQ(plan.splits.size(), 1u);
  auto order = [&](uint64_t seed, uint32_t shuffle) {
    std::vector<uint64_t> records;
    for (const Batch& b : testing::read_split(plan.config, plan.splits[0], seed, 16, shuffle)) {
      EXPECT_LE(b.records.size(), 16u);
      records.insert(records.end(), b.records.begin(), b.records.end());
    }
    return records;
  };
  std::vector<uint64_t> in_order(200);
  for (uint64_t i = 0; i < 200; ++i) in_order[i] = i;
  EXPECT_EQ(order(1, 0), in_order);
  EXPECT_EQ(order(1, 1), in_order);
  auto s1 = order(1, 64), s1b = order(1, 64), s2 = order(2, 64);
  EXPECT_EQ(s1, s1b);
  EXPECT_NE(s1, s2);
  EXPECT_NE(s1, in_order);
  std::sort(s1.begin(), s1.end());
  std::sort(s2.begin(), s2.end());
  EXPECT_EQ(s1, in_order);
  EXPECT_EQ(s2, in_order);
  // A buffer larger than the split works too.
  auto big = order(3, 1000);
  std::sort(big.begin(), big.end());
  EXPECT_EQ(big, in_order);
}

TEST(SplitStreamTest, RejectsBadArguments) {
  DatasetConfig config;
  config.files = {"/x"};
  SplitRange split;
  split.file_index = 3;
  EXPECT_FALSE(SplitStream::open(config, split, 0, 4, 0).ok());
  split.file_index = 0;
  EXPECT_FALSE(SplitStream::open(config, split, 0, 0, 0).ok());
  auto missing = SplitStream::open(config, split, 0, 4, 0);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), "text: /x: No such file or directory");
}

TEST(SplitStreamTest, FileShorterThanPlannedIsAnError) {
  TempDir dir;
  std::string a = dir.write("a.txt", numbered_lines(10));
  auto plan = testing::plan_or_die(Format::kText, {a}, 100);
  dir.write("a.txt", numbered_lines(5));
  std::string err = testing::split_error(plan.config, plan.splits[0]);
  EXPECT_NE(err.find("file ends at record 5"), std::string::npos) << err;
}

}  // namespace
}  // namespace goldminer::readers
