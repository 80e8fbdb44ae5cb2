// The jpeg decode options (ReaderOptions::jpeg_decode): DCT-scaled and
// crop-region decode against a full decode of the same image, by PSNR; the
// resized crop's resize against a float computation of torch's bilinear
// interpolate.
#include <algorithm>
#include <cmath>
#include <random>

#include "readers/image_resize.h"

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

Image resized(const Image& in, int64_t out_h, int64_t out_w) {
  Image out;
  out.h = out_h;
  out.w = out_w;
  out.px.resize(static_cast<size_t>(out_h * out_w * 3));
  std::vector<int32_t> rows;
  resize_bilinear_rgb(in.px.data(), static_cast<uint32_t>(in.h), static_cast<uint32_t>(in.w),
                      static_cast<size_t>(in.w) * 3, out.px.data(), static_cast<uint32_t>(out_h),
                      static_cast<uint32_t>(out_w), &rows);
  return out;
}

TEST(ImageResizeTest, BilinearIsTorchsInterpolateRoundedWithinOne) {
  std::mt19937 rng(7);
  struct Size {
    int64_t h, w, out_h, out_w;
  };
  // Down, up, both, the same size, one row or column, to one pixel.
  for (const Size& s : {Size{300, 400, 224, 224}, Size{37, 50, 224, 224}, Size{100, 300, 150, 120},
                        Size{224, 224, 224, 224}, Size{1, 90, 3, 224}, Size{90, 1, 224, 5}, Size{17, 23, 1, 1}}) {
    Image in;
    in.h = s.h;
    in.w = s.w;
    in.px.resize(static_cast<size_t>(s.h * s.w * 3));
    for (uint8_t& v : in.px) v = static_cast<uint8_t>(rng());
    const Image out = resized(in, s.out_h, s.out_w);
    const std::vector<double> ref = interpolate_bilinear(in, s.out_h, s.out_w);
    double worst = 0;
    for (size_t i = 0; i < ref.size(); ++i) worst = std::max(worst, std::fabs(out.px[i] - ref[i]));
    EXPECT_LE(worst, 1.0) << s.h << "x" << s.w << " -> " << s.out_h << "x" << s.out_w;
    if (s.h == s.out_h && s.w == s.out_w) {
      EXPECT_EQ(out.px, in.px) << "the same size is a copy";
    }
  }
}

TEST(ImageResizeTest, ReadsRowsWithAStride) {
  // A 4 x 3 image inside rows of 5 pixels: the padding never shows.
  Image padded;
  padded.h = 4;
  padded.w = 5;
  padded.px.assign(4 * 5 * 3, 255);
  Image inner;
  inner.h = 4;
  inner.w = 3;
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 3 * 3; ++x) {
      padded.px[static_cast<size_t>(y * 15 + x)] = static_cast<uint8_t>(y * 10 + x);
      inner.px.push_back(static_cast<uint8_t>(y * 10 + x));
    }
  std::vector<uint8_t> out(6 * 7 * 3);
  std::vector<int32_t> rows;
  resize_bilinear_rgb(padded.px.data(), 4, 3, 15, out.data(), 6, 7, &rows);
  EXPECT_EQ(out, resized(inner, 6, 7).px);
}

TEST(JpegDecodeTest, ResizedCropIsTheCropResizedToTheTarget) {
  TempDir dir;
  dir.write("a.jpg", encode_smooth(640, 480));
  const Image full = read_one(dir.path(), "full", 1);
  for (uint64_t seed : {1u, 2u, 3u}) {
    for (int size : {224, 64}) {
      const std::string n = std::to_string(size);
      const Image crop = read_one(dir.path(), "crop:" + n, seed);
      const Image im = read_one(dir.path(), "resized-crop:" + n, seed);
      ASSERT_EQ(im.h, size) << seed;
      ASSERT_EQ(im.w, size) << seed;
      // The same box, the same DCT scale, then the resize.
      EXPECT_EQ(im.px, resized(crop, size, size).px) << "seed " << seed << ", " << size;
      // Against the full decode's box resized in float, as a DataLoader
      // running RandomResizedCrop on the full image computes it.
      const internal::JpegBox box = internal::jpeg_crop_box(640, 480, seed, 0);
      const std::vector<double> ref = interpolate_bilinear(region_of(full, box.x, box.y, box.w, box.h), size, size);
      const double psnr = psnr_of(im.px, ref);
      EXPECT_GT(psnr, 30) << "seed " << seed << ", " << size << ": PSNR " << psnr << " dB";
    }
  }
}

}  // namespace
}  // namespace goldminer::readers
