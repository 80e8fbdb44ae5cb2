#include <sys/stat.h>

#include <cstdlib>

#include "readers/test_util.h"

namespace goldminer::readers {
namespace {

using testing::TempDir;

// A w x h image: pixel (x, y) = (x*8, y*8, 128) in color, x*8 in gray.
std::string encode(int w, int h, bool gray, bool progressive) {
  return testing::encode_jpeg(w, h, gray, progressive, [gray](int x, int y, unsigned char* px) {
    px[0] = static_cast<unsigned char>(x * 8);
    if (gray) return;
    px[1] = static_cast<unsigned char>(y * 8);
    px[2] = 128;
  });
}

TEST(JpegTest, DecodesColorGrayProgressiveFromFolder) {
  TempDir dir;
  ::mkdir(dir.file("sub").c_str(), 0755);
  dir.write("b_color.jpg", encode(24, 16, false, false));
  dir.write("a_gray.JPEG", encode(16, 8, true, false));
  dir.write("sub/c_prog.jpg", encode(20, 12, false, true));
  dir.write("notes.txt", "not an image");
  auto plan = testing::plan_or_die(Format::kJpeg, {dir.path()}, 2);
  ASSERT_EQ(plan.total_records, 3u);
  ASSERT_EQ(plan.splits.size(), 2u);
  EXPECT_EQ(plan.splits[1].byte_offset, 0u);
  std::vector<Batch> batches;
  for (const SplitRange& s : plan.splits) {
    for (Batch& b : testing::read_split(plan.config, s, 0, 4, 0)) batches.push_back(std::move(b));
  }
  ASSERT_EQ(batches.size(), 2u);
  // Sorted listing: a_gray.JPEG, b_color.jpg, sub/c_prog.jpg.
  auto shapes = testing::values<int64_t>(batches[0].tensors[1]);
  EXPECT_EQ(batches[0].tensors[1].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(shapes, (std::vector<int64_t>{8, 16, 3, 16, 24, 3}));
  EXPECT_TRUE(testing::has_layout(batches[0].tensors[0], wire::DType::kUInt8, {8 * 16 * 3 + 16 * 24 * 3}));
  auto px = testing::values<uint8_t>(batches[0].tensors[0]);
  // Gray image: R = G = B = x*8 (approximately).
  for (int x : {0, 5, 15}) {
    size_t at = static_cast<size_t>((4 * 16 + x) * 3);
    EXPECT_NEAR(px[at], x * 8, 6) << x;
    EXPECT_EQ(px[at], px[at + 1]);
    EXPECT_EQ(px[at], px[at + 2]);
  }
  // Color image at (x=10, y=6).
  size_t at = 8 * 16 * 3 + static_cast<size_t>((6 * 24 + 10) * 3);
  EXPECT_NEAR(px[at], 80, 8);
  EXPECT_NEAR(px[at + 1], 48, 8);
  EXPECT_NEAR(px[at + 2], 128, 8);
  EXPECT_EQ(testing::values<int64_t>(batches[1].tensors[1]), (std::vector<int64_t>{12, 20, 3}));
  auto prog = testing::values<uint8_t>(batches[1].tensors[0]);
  at = static_cast<size_t>((3 * 20 + 7) * 3);
  EXPECT_NEAR(prog[at], 56, 8);
  EXPECT_NEAR(prog[at + 1], 24, 8);
}

TEST(JpegTest, ManifestsPlainAndCsv) {
  TempDir dir;
  ::mkdir(dir.file("imgs").c_str(), 0755);
  dir.write("imgs/one.jpg", encode(8, 8, false, false));
  dir.write("imgs/two.jpg", encode(16, 8, true, false));
  std::string plain = dir.write("list.txt", "# images\nimgs/two.jpg\n\nimgs/one.jpg\n");
  auto plan = testing::plan_or_die(Format::kJpeg, {plain}, 10);
  ASSERT_EQ(plan.total_records, 2u);
  auto batches = testing::read_split(plan.config, plan.splits[0], 0, 4, 0);
  EXPECT_EQ(testing::values<int64_t>(batches[0].tensors[1]), (std::vector<int64_t>{8, 16, 3, 8, 8, 3}));
  // NAME_manifest.csv resolves against the folder NAME beside it.
  std::string csv = dir.write("imgs_manifest.csv", "file,license\none.jpg,\"CC, BY\"\r\ntwo.jpg,x\r\n");
  plan = testing::plan_or_die(Format::kJpeg, {csv}, 10);
  ASSERT_EQ(plan.total_records, 2u);
  batches = testing::read_split(plan.config, plan.splits[0], 0, 4, 0);
  EXPECT_EQ(testing::values<int64_t>(batches[0].tensors[1]), (std::vector<int64_t>{8, 8, 3, 8, 16, 3}));
  // An entry found nowhere is a plan error naming the places tried.
  InputSpec spec;
  spec.format = Format::kJpeg;
  spec.paths = {dir.write("bad.txt", "nope.jpg\n")};
  auto bad = plan_dataset(spec, ReaderOptions(), 10);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("first entry 'nope.jpg' is not under"), std::string::npos);
}

TEST(JpegTest, CorruptImageNamesFileAndCanBeSkipped) {
  TempDir dir;
  std::string good = encode(16, 16, false, false);
  dir.write("a.jpg", good);
  std::string bad_path = dir.write("b.jpg", "this is not a jpeg at all");
  std::string big = encode(64, 64, false, false);
  std::string trunc_path = dir.write("c.jpg", big.substr(0, big.size() - 200));
  dir.write("d.jpg", good);
  auto plan = testing::plan_or_die(Format::kJpeg, {dir.path()}, 10);
  ASSERT_EQ(plan.total_records, 4u);
  std::string err = testing::split_error(plan.config, plan.splits[0]);
  EXPECT_EQ(err.rfind("jpeg: " + bad_path + ": record 1 of " + dir.path() + ": ", 0), 0u) << err;
  EXPECT_NE(err.find("Not a JPEG file"), std::string::npos) << err;
  plan = testing::plan_or_die(Format::kJpeg, {dir.path()}, 10, 2);
  auto batches = testing::read_split(plan.config, plan.splits[0], 0, 4, 0);
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_EQ(batches[0].records, (std::vector<uint64_t>{0, 3}));
  EXPECT_EQ(batches[0].bad_records, 2u);
  plan = testing::plan_or_die(Format::kJpeg, {dir.path()}, 10, 1);
  err = testing::split_error(plan.config, plan.splits[0]);
  EXPECT_EQ(err.rfind("jpeg: " + trunc_path + ": record 2 of ", 0), 0u) << err;
  EXPECT_NE(err.find("Premature end of JPEG file"), std::string::npos) << err;
}

// A rank's part of a split (SplitRange::skip): the records before it are
// not read, so a corrupt one there is neither an error nor counted; the
// part is cut into the batches asked for.
TEST(JpegTest, APartOfASplitSkipsWhatIsBeforeIt) {
  TempDir dir;
  std::string good = encode(16, 16, false, false);
  dir.write("a.jpg", good);
  dir.write("b.jpg", "this is not a jpeg at all");
  dir.write("c.jpg", good);
  dir.write("d.jpg", good);
  dir.write("e.jpg", good);
  auto plan = testing::plan_or_die(Format::kJpeg, {dir.path()}, 10);
  SplitRange part = plan.splits[0];
  part.skip = 2;
  auto stream = SplitStream::open(plan.config, part, 0, 4, 0, 2);
  ASSERT_TRUE(stream.ok()) << stream.status().message();
  std::vector<std::vector<uint64_t>> records;
  for (;;) {
    auto b = (*stream)->next();
    ASSERT_TRUE(b.ok()) << b.status().message();
    if (!b->has_value()) break;
    EXPECT_EQ((*b)->bad_records, 0u);
    records.push_back((*b)->records);
  }
  // 3 records in 2 batches of at most 4: 2 and 1.
  EXPECT_EQ(records, (std::vector<std::vector<uint64_t>>{{2, 3}, {4}}));
}

}  // namespace
}  // namespace goldminer::readers
