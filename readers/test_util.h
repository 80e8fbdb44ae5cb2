// Helpers shared by the readers' tests: temp folders, tensor access,
// reading a whole planned dataset, and JPEG files to read.
#ifndef GOLDMINER_READERS_TEST_UTIL_H_
#define GOLDMINER_READERS_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>  // jpeglib.h needs FILE first
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include <jpeglib.h>

#include "gmcore/splitmix.h"
#include "readers/reader.h"

namespace goldminer::readers::testing {

// A fresh folder under $TMPDIR, removed with its files at destruction.
class TempDir {
 public:
  TempDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp != nullptr ? tmp : "/tmp") + "/readers_test.XXXXXX";
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    path_ = ::mkdtemp(buf.data()) != nullptr ? buf.data() : "";
  }
  ~TempDir() {
    if (!path_.empty()) std::system(("rm -rf '" + path_ + "'").c_str());
  }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  std::string write(const std::string& name, const std::string& bytes) const {
    std::string p = file(name);
    std::ofstream out(p, std::ios::binary);
    out << bytes;
    return p;
  }

 private:
  std::string path_;
};

// A w x h JPEG at quality 95: pixel(x, y, px) writes the pixel's RGB
// bytes (or, gray, its one value) at px.
template <class Pixel>
std::string encode_jpeg(int w, int h, bool gray, bool progressive, Pixel pixel) {
  jpeg_compress_struct c;
  jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* out = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &out, &size);
  c.image_width = static_cast<JDIMENSION>(w);
  c.image_height = static_cast<JDIMENSION>(h);
  c.input_components = gray ? 1 : 3;
  c.in_color_space = gray ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, 95, TRUE);
  if (progressive) jpeg_simple_progression(&c);
  jpeg_start_compress(&c, TRUE);
  std::vector<unsigned char> row(static_cast<size_t>(w) * (gray ? 1 : 3));
  while (c.next_scanline < c.image_height) {
    const int y = static_cast<int>(c.next_scanline);
    for (int x = 0; x < w; ++x) pixel(x, y, &row[static_cast<size_t>(x) * (gray ? 1 : 3)]);
    JSAMPROW r = row.data();
    jpeg_write_scanlines(&c, &r, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  std::string s(reinterpret_cast<char*>(out), size);
  std::free(out);
  return s;
}

template <typename T>
std::vector<T> values(const HostTensor& t) {
  std::vector<T> out(t.data.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), t.data.data(), t.data.size());
  return out;
}

// EXPECT_TRUE(has_layout(t, dtype, shape)): `t` holds `dtype` values in
// `shape`; a failure says what it holds instead.
inline ::testing::AssertionResult has_layout(const HostTensor& t, wire::DType dtype,
                                             const std::vector<int64_t>& shape) {
  if (t.dtype == dtype && t.shape == shape) return ::testing::AssertionSuccess();
  auto dims = [](const std::vector<int64_t>& s) {
    std::string text = "[";
    for (size_t i = 0; i < s.size(); ++i) text += (i ? ", " : "") + std::to_string(s[i]);
    return text + "]";
  };
  return ::testing::AssertionFailure() << "dtype " << static_cast<int>(t.dtype) << " shape " << dims(t.shape)
                                       << ", expected dtype " << static_cast<int>(dtype) << " shape " << dims(shape);
}

inline std::string bytes_of(const HostTensor& t) {
  return std::string(t.data.begin(), t.data.end());
}

// Opens and drains one split; fails the test on an error.
inline std::vector<Batch> read_split(const DatasetConfig& config, const SplitRange& split,
                                     uint64_t seed, uint32_t batch, uint32_t shuffle) {
  std::vector<Batch> out;
  auto stream = SplitStream::open(config, split, seed, batch, shuffle);
  EXPECT_TRUE(stream.ok()) << stream.status().message();
  if (!stream.ok()) return out;
  for (;;) {
    auto b = (*stream)->next();
    EXPECT_TRUE(b.ok()) << b.status().message();
    if (!b.ok() || !b->has_value()) break;
    out.push_back(std::move(**b));
  }
  return out;
}

// The first error a split's stream reports ("" if none).
inline std::string split_error(const DatasetConfig& config, const SplitRange& split) {
  auto stream = SplitStream::open(config, split, 1, 4, 0);
  if (!stream.ok()) return stream.status().message();
  for (;;) {
    auto b = (*stream)->next();
    if (!b.ok()) return b.status().message();
    if (!b->has_value()) return "";
  }
}

inline DatasetPlan plan_or_die(Format format, const std::vector<std::string>& paths,
                               uint64_t per_split, uint64_t max_bad = 0) {
  InputSpec spec;
  spec.format = format;
  spec.paths = paths;
  ReaderOptions options;
  options.max_bad_records = max_bad;
  auto plan = plan_dataset(spec, options, per_split);
  EXPECT_TRUE(plan.ok()) << plan.status().message();
  return plan.ok() ? *plan : DatasetPlan();
}

// Plans `path` in splits of each size in `per_split` records and reads
// every split (seed, batch, shuffle as read_split): each time, the plan
// counts `records` and every one of them arrives exactly once; `check`
// looks at each batch's values.
inline void expect_each_record_once(Format format, const std::string& path, uint64_t records,
                                    std::initializer_list<uint64_t> per_split, uint64_t seed, uint32_t batch,
                                    uint32_t shuffle, const std::function<void(const Batch&)>& check) {
  for (uint64_t n : per_split) {
    const DatasetPlan plan = plan_or_die(format, {path}, n);
    ASSERT_EQ(plan.total_records, records) << n << " records a split";
    std::vector<int> seen(records, 0);
    for (const SplitRange& s : plan.splits) {
      for (const Batch& b : read_split(plan.config, s, seed, batch, shuffle)) {
        for (uint64_t r : b.records) ++seen[r];
        check(b);
      }
    }
    for (uint64_t i = 0; i < records; ++i) EXPECT_EQ(seen[i], 1) << "record " << i << ", " << n << " a split";
  }
}

// $GOLDMINER_SHARED_DATA/datasets/<rel>, or "" (and the reason) when absent.
inline std::string shared_dataset(const std::string& rel, std::string* why) {
  const char* root = std::getenv("GOLDMINER_SHARED_DATA");
  if (root == nullptr || *root == '\0') {
    *why = "GOLDMINER_SHARED_DATA is unset (make check sets it to ../shared/data)";
    return "";
  }
  std::string path = std::string(root) + "/datasets/" + rel;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    *why = "shared data " + path + " is absent";
    return "";
  }
  return path;
}

// Tiny deterministic generator for test data.
class TestRng {
 public:
  explicit TestRng(uint64_t seed) : rng_(seed) {}
  uint64_t next() { return rng_.next(); }
  uint64_t below(uint64_t n) { return next() % n; }

 private:
  goldminer::SplitMix64 rng_;
};

}  // namespace goldminer::readers::testing

#endif  // GOLDMINER_READERS_TEST_UTIL_H_
