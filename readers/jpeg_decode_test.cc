// The jpeg decode options (ReaderOptions::jpeg_decode): DCT-scaled and
// crop-region decode against a full decode of the same image, by PSNR.
#include <cmath>

#include "readers/format.h"
#include "readers/psnr.h"
#include "readers/test_util.h"

namespace goldminer::readers {
namespace {

using testing::TempDir;

// A smooth w x h RGB image (gradients and a slow wave).
std::string encode_smooth(int w, int h) {
  return testing::encode_jpeg(w, h, false, false, [w, h](int x, int y, unsigned char* px) {
    px[0] = static_cast<unsigned char>(255 * x / w);
    px[1] = static_cast<unsigned char>(255 * y / h);
    px[2] = static_cast<unsigned char>(128 + 100 * std::sin(x / 23.0) * std::cos(y / 31.0));
  });
}

using Image = RgbImage;

// The first image of `folder` decoded with `decode` (split seed `seed`).
Image read_one(const std::string& folder, const std::string& decode, uint64_t seed) {
  InputSpec spec;
  spec.format = Format::kJpeg;
  spec.paths = {folder};
  ReaderOptions options;
  auto parsed = parse_jpeg_decode(decode);
  EXPECT_TRUE(parsed.ok()) << parsed.status().message();
  if (parsed.ok()) options.jpeg_decode = *parsed;
  auto plan = plan_dataset(spec, options, 8);
  EXPECT_TRUE(plan.ok()) << plan.status().message();
  Image im;
  if (!plan.ok()) return im;
  auto batches = testing::read_split(plan->config, plan->splits[0], seed, 1, 0);
  if (batches.empty()) return im;
  auto shape = testing::values<int64_t>(batches[0].tensors[1]);
  im.h = shape[0];
  im.w = shape[1];
  im.px = testing::values<uint8_t>(batches[0].tensors[0]);
  return im;
}

TEST(JpegDecodeTest, ScaledDecodeKeepsTheShorterSideAtLeastTheTarget) {
  TempDir dir;
  dir.write("a.jpg", encode_smooth(400, 300));
  const Image full = read_one(dir.path(), "full", 1);
  ASSERT_EQ(full.w, 400);
  ASSERT_EQ(full.h, 300);
  struct Case {
    const char* decode;
    int d;
  };
  for (const Case& c : {Case{"scale:100", 2}, Case{"scale:70", 4}, Case{"scale:37", 8}, Case{"scale:160", 1}}) {
    const Image im = read_one(dir.path(), c.decode, 1);
    EXPECT_EQ(im.w, (400 + c.d - 1) / c.d) << c.decode;
    EXPECT_EQ(im.h, (300 + c.d - 1) / c.d) << c.decode;
    const double psnr = psnr_against(full, 0, 0, c.d, im);
    EXPECT_GT(psnr, c.d == 1 ? 60 : 30) << c.decode << ": PSNR " << psnr << " dB";
  }
}

TEST(JpegDecodeTest, CropDecodeIsTheFullDecodesBoxDrawnFromTheSeed) {
  TempDir dir;
  dir.write("a.jpg", encode_smooth(640, 480));
  const Image full = read_one(dir.path(), "full", 1);
  for (uint64_t seed : {1u, 2u, 3u, 4u}) {
    const internal::JpegBox box = internal::jpeg_crop_box(640, 480, seed, 0);
    ASSERT_GT(box.w, 0u);
    ASSERT_LE(box.x + box.w, 640u);
    ASSERT_LE(box.y + box.h, 480u);
    // crop:1000: no box is that large, so no DCT scaling: exactly the box.
    const Image im = read_one(dir.path(), "crop:1000", seed);
    EXPECT_EQ(im.w, box.w) << seed;
    EXPECT_EQ(im.h, box.h) << seed;
    EXPECT_GT(psnr_against(full, box.x, box.y, 1, im), 45) << "seed " << seed;
    // Small targets: the box at 1/d scale.
    const unsigned d = internal::jpeg_scale_denominator(box.w, box.h, 40);
    const Image scaled = read_one(dir.path(), "crop:40", seed);
    EXPECT_GE(std::min(scaled.w, scaled.h), 40) << seed;
    EXPECT_NEAR(scaled.w, static_cast<double>(box.w) / d, 2.0) << seed;
    const double psnr = psnr_against(full, box.x / d * d, box.y / d * d, static_cast<int>(d), scaled);
    EXPECT_GT(psnr, 28) << "seed " << seed << ", 1/" << d << ": PSNR " << psnr << " dB";
    // The same seed crops alike.
    EXPECT_EQ(read_one(dir.path(), "crop:40", seed).px, scaled.px);
  }
  const internal::JpegBox a = internal::jpeg_crop_box(640, 480, 1, 0), b = internal::jpeg_crop_box(640, 480, 2, 0);
  EXPECT_FALSE(a.x == b.x && a.y == b.y && a.w == b.w) << "two seeds drew the same box";
}

}  // namespace
}  // namespace goldminer::readers
