#include <map>

#include "readers/crc32c.h"
#include "readers/test_util.h"

namespace goldminer::readers {
namespace {

using testing::TempDir;

// A tiny tf.Example / TFRecord encoder, independent of the reader's code
// (bitwise CRC-32C).
uint32_t slow_crc32c(const std::string& s) {
  uint32_t crc = 0xffffffffu;
  for (unsigned char c : s) {
    crc ^= c;
    for (int k = 0; k < 8; ++k) crc = (crc & 1) ? (crc >> 1) ^ 0x82f63b78u : crc >> 1;
  }
  return ~crc;
}
uint32_t masked(const std::string& s) {
  uint32_t crc = slow_crc32c(s);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}
std::string varint(uint64_t v) {
  std::string s;
  while (v >= 0x80) {
    s += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  return s + static_cast<char>(v);
}
std::string field(int number, const std::string& payload) {  // length-delimited
  return varint(static_cast<uint64_t>(number) << 3 | 2) + varint(payload.size()) + payload;
}
template <typename T>
std::string raw(T v) {
  return std::string(reinterpret_cast<const char*>(&v), sizeof v);
}
std::string int64_list(const std::vector<int64_t>& v, bool packed = true) {
  std::string body;
  if (packed) {
    std::string p;
    for (int64_t x : v) p += varint(static_cast<uint64_t>(x));
    body = field(1, p);
  } else {
    for (int64_t x : v) body += varint(1 << 3 | 0) + varint(static_cast<uint64_t>(x));
  }
  return field(3, body);
}
std::string float_list(const std::vector<float>& v, bool packed = true) {
  std::string body;
  if (packed) {
    std::string p;
    for (float x : v) p += raw(x);
    body = field(1, p);
  } else {
    for (float x : v) body += varint(1 << 3 | 5) + raw(x);
  }
  return field(2, body);
}
std::string bytes_list(const std::vector<std::string>& v) {
  std::string body;
  for (const std::string& x : v) body += field(1, x);
  return field(1, body);
}
std::string example(const std::map<std::string, std::string>& features) {
  std::string fs;
  for (const auto& [name, feature] : features) fs += field(1, field(1, name) + field(2, feature));
  return field(1, fs);
}
std::string frame(const std::string& data) {
  std::string len = raw<uint64_t>(data.size());
  return len + raw(masked(len)) + data + raw(masked(data));
}

std::string record(int i) {
  std::vector<int64_t> tags(static_cast<size_t>(i % 3), i);
  std::vector<float> emb(static_cast<size_t>(i % 2 + 1), 0.5f * static_cast<float>(i));
  return example({{"score", float_list({static_cast<float>(i), -1.0f}, i % 2 == 0)},
                  {"age", int64_list({i * 100 - 5}, i % 2 == 1)},
                  {"tags", int64_list(tags)},
                  {"name", bytes_list({"n" + std::to_string(i)})},
                  {"emb", float_list(emb, false)}});
}

TEST(Crc32cTest, KnownValues) {
  EXPECT_EQ(internal::crc32c("123456789", 9), 0xe3069283u);
  EXPECT_EQ(internal::crc32c("", 0), 0u);
  std::string long_text(1000, 'q');
  for (size_t i = 0; i < long_text.size(); ++i) long_text[i] = static_cast<char>(i * 7);
  for (size_t n : {1, 7, 8, 9, 63, 1000}) {
    EXPECT_EQ(internal::crc32c(long_text.data(), n), slow_crc32c(long_text.substr(0, n))) << n;
  }
}

TEST(TfRecordTest, RoundTripsExamples) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 6; ++i) text += frame(record(i));
  std::string path = dir.write("a.tfrecord", text);
  auto plan = testing::plan_or_die(Format::kTfRecord, {path}, 4);
  ASSERT_EQ(plan.total_records, 6u);
  ASSERT_EQ(plan.splits.size(), 2u);
  EXPECT_EQ(plan.splits[1].byte_offset, frame(record(0)).size() + frame(record(1)).size() +
                                            frame(record(2)).size() + frame(record(3)).size());
  auto batches = testing::read_split(plan.config, plan.splits[0], 0, 4, 0);
  ASSERT_EQ(batches.size(), 1u);
  const auto& t = batches[0].tensors;
  // age [B,1]; emb values + lengths; name bytes + lengths; score [B,2]; tags values + lengths.
  ASSERT_EQ(t.size(), 8u);
  EXPECT_EQ(t[0].dtype, wire::DType::kInt64);
  EXPECT_EQ(t[0].shape, (std::vector<int64_t>{4, 1}));
  EXPECT_EQ(testing::values<int64_t>(t[0]), (std::vector<int64_t>{-5, 95, 195, 295}));
  EXPECT_EQ(t[1].dtype, wire::DType::kFloat32);
  EXPECT_EQ(testing::values<float>(t[1]), (std::vector<float>{0, 0.5f, 0.5f, 1, 1.5f, 1.5f}));
  EXPECT_EQ(testing::values<int64_t>(t[2]), (std::vector<int64_t>{1, 2, 1, 2}));
  EXPECT_EQ(t[3].dtype, wire::DType::kUInt8);
  EXPECT_EQ(testing::bytes_of(t[3]), "n0n1n2n3");
  EXPECT_EQ(testing::values<int64_t>(t[4]), (std::vector<int64_t>{2, 2, 2, 2}));
  EXPECT_EQ(t[5].shape, (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(testing::values<float>(t[5]), (std::vector<float>{0, -1, 1, -1, 2, -1, 3, -1}));
  EXPECT_EQ(testing::values<int64_t>(t[6]), (std::vector<int64_t>{1, 2, 2}));
  EXPECT_EQ(testing::values<int64_t>(t[7]), (std::vector<int64_t>{0, 1, 2, 0}));
}

TEST(TfRecordTest, CrcMismatchNamesFileOffsetAndRecord) {
  TempDir dir;
  std::string text;
  std::vector<size_t> offsets;
  for (int i = 0; i < 5; ++i) {
    offsets.push_back(text.size());
    text += frame(record(i));
  }
  text[offsets[2] + 12 + 3] ^= 0x40;       // record 2: data
  text[offsets[4] + 12 + 5] ^= 0x01;       // record 4: data
  std::string path = dir.write("bad.tfrecord", text);
  auto plan = testing::plan_or_die(Format::kTfRecord, {path}, 10);
  ASSERT_EQ(plan.total_records, 5u);
  EXPECT_EQ(testing::split_error(plan.config, plan.splits[0]),
            "tfrecord: " + path + ": byte " + std::to_string(offsets[2]) + " (record 2): data CRC mismatch");
  plan = testing::plan_or_die(Format::kTfRecord, {path}, 10, 2);
  auto batches = testing::read_split(plan.config, plan.splits[0], 0, 10, 0);
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_EQ(batches[0].records, (std::vector<uint64_t>{0, 1, 3}));
  EXPECT_EQ(batches[0].bad_records, 2u);
}

TEST(TfRecordTest, LengthCrcTruncationAndMalformedProto) {
  TempDir dir;
  std::string r0 = frame(record(0)), r1 = frame(record(1));
  // Length CRC broken: the rest of the file is one corrupt record.
  std::string bad_len = r0 + r1;
  bad_len[r0.size() + 9] ^= 1;
  std::string path = dir.write("len.tfrecord", bad_len + r0);
  auto plan = testing::plan_or_die(Format::kTfRecord, {path}, 10);
  ASSERT_EQ(plan.total_records, 2u);
  EXPECT_EQ(testing::split_error(plan.config, plan.splits[0]),
            "tfrecord: " + path + ": byte " + std::to_string(r0.size()) + " (record 1): length CRC mismatch");
  // Truncated last record.
  path = dir.write("trunc.tfrecord", r0 + r1.substr(0, r1.size() - 3));
  plan = testing::plan_or_die(Format::kTfRecord, {path}, 10);
  ASSERT_EQ(plan.total_records, 2u);
  std::string err = testing::split_error(plan.config, plan.splits[0]);
  EXPECT_NE(err.find("byte " + std::to_string(r0.size()) + " (record 1): truncated record"), std::string::npos)
      << err;
  // Valid frame, garbage proto.
  path = dir.write("proto.tfrecord", r0 + frame(std::string("\x0a\x7f\x01", 3)));
  plan = testing::plan_or_die(Format::kTfRecord, {path}, 10);
  err = testing::split_error(plan.config, plan.splits[0]);
  EXPECT_NE(err.find("(record 1): malformed tf.Example"), std::string::npos) << err;
  // A fixed-size feature with another count.
  path = dir.write("count.tfrecord",
                   r0 + frame(example({{"age", int64_list({1, 2})}, {"score", float_list({1, 2})},
                                       {"emb", float_list({1})}})));
  plan = testing::plan_or_die(Format::kTfRecord, {path}, 1);
  DatasetConfig config = plan.config;
  auto only_first = testing::plan_or_die(Format::kTfRecord, {dir.write("one.tfrecord", r0)}, 1);
  config.schema = only_first.config.schema;  // inferred from record 0 alone: age is [B,1]
  err = testing::split_error(config, plan.splits[1]);
  EXPECT_NE(err.find("(record 1): feature 'age': 2 values, the schema has 1"), std::string::npos) << err;
}

TEST(TfRecordTest, MultiValuedBytes) {
  TempDir dir;
  std::string path = dir.write("b.tfrecord", frame(example({{"s", bytes_list({"ab", "", "cde"})}})) +
                                                 frame(example({{"s", bytes_list({})}})) +
                                                 frame(example({{"s", bytes_list({"z"})}})));
  auto plan = testing::plan_or_die(Format::kTfRecord, {path}, 10);
  auto batches = testing::read_split(plan.config, plan.splits[0], 0, 10, 0);
  ASSERT_EQ(batches.size(), 1u);
  const auto& t = batches[0].tensors;
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(testing::bytes_of(t[0]), "abcdez");
  EXPECT_EQ(testing::values<int64_t>(t[1]), (std::vector<int64_t>{2, 0, 3, 1}));
  EXPECT_EQ(testing::values<int64_t>(t[2]), (std::vector<int64_t>{3, 0, 1}));
}

TEST(TfRecordTest, SplitsAtArbitraryRecords) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 40; ++i) text += frame(record(i));
  std::string path = dir.write("s.tfrecord", text);
  testing::expect_each_record_once(Format::kTfRecord, path, 40, {1, 3, 39, 40}, 2, 7, 5, [](const Batch& b) {
    auto age = testing::values<int64_t>(b.tensors[0]);
    for (size_t i = 0; i < b.records.size(); ++i) EXPECT_EQ(age[i], static_cast<int64_t>(b.records[i]) * 100 - 5);
  });
}

}  // namespace
}  // namespace goldminer::readers
