// PSNR of a decoded image against a reference decode, and the reference
// bilinear resize, for the jpeg decode options (readers/jpeg_decode_test.cc,
// bench/jpeg_decode_bench).
#ifndef GOLDMINER_READERS_PSNR_H_
#define GOLDMINER_READERS_PSNR_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace goldminer::readers {

struct RgbImage {
  int64_t h = 0, w = 0;
  std::vector<uint8_t> px;  // h * w * 3, row-major
};

// `ref`'s region from (x, y), averaged over d x d blocks (clipped at its
// edges), against `im` (one block per pixel): PSNR in dB (99 when equal).
inline double psnr_against(const RgbImage& ref, int64_t x, int64_t y, int d, const RgbImage& im) {
  double se = 0;
  uint64_t n = 0;
  for (int64_t r = 0; r < im.h; ++r)
    for (int64_t c = 0; c < im.w; ++c)
      for (int ch = 0; ch < 3; ++ch) {
        double sum = 0;
        int count = 0;
        for (int dy = 0; dy < d; ++dy)
          for (int dx = 0; dx < d; ++dx) {
            const int64_t fy = y + r * d + dy, fx = x + c * d + dx;
            if (fy >= ref.h || fx >= ref.w) continue;
            sum += ref.px[static_cast<size_t>((fy * ref.w + fx) * 3 + ch)];
            ++count;
          }
        const double diff = sum / std::max(count, 1) - im.px[static_cast<size_t>((r * im.w + c) * 3 + ch)];
        se += diff * diff;
        ++n;
      }
  const double mse = se / static_cast<double>(std::max<uint64_t>(n, 1));
  return mse == 0 ? 99.0 : 10 * std::log10(255.0 * 255.0 / mse);
}

// The w x h region of `im` from (x, y).
inline RgbImage region_of(const RgbImage& im, int64_t x, int64_t y, int64_t w, int64_t h) {
  RgbImage r;
  r.h = h;
  r.w = w;
  r.px.reserve(static_cast<size_t>(w * h * 3));
  for (int64_t row = y; row < y + h; ++row) {
    const auto first = im.px.begin() + (row * im.w + x) * 3;
    r.px.insert(r.px.end(), first, first + w * 3);
  }
  return r;
}

// torch.nn.functional.interpolate(mode="bilinear", align_corners=False,
// antialias=False) of an RGB image, in double, HWC: what a DataLoader's
// resize computes before any rounding.
inline std::vector<double> interpolate_bilinear(const RgbImage& in, int64_t out_h, int64_t out_w) {
  auto tap = [](int64_t d, int64_t n_in, int64_t n_out, int64_t* lo, int64_t* hi, double* weight) {
    const double s = std::max(0.0, (static_cast<double>(d) + 0.5) * static_cast<double>(n_in) / n_out - 0.5);
    *lo = std::min<int64_t>(static_cast<int64_t>(s), n_in - 1);
    *hi = std::min<int64_t>(*lo + 1, n_in - 1);
    *weight = s - static_cast<double>(*lo);
  };
  std::vector<double> out(static_cast<size_t>(out_h * out_w * 3));
  for (int64_t y = 0; y < out_h; ++y) {
    int64_t y0, y1;
    double wy;
    tap(y, in.h, out_h, &y0, &y1, &wy);
    for (int64_t x = 0; x < out_w; ++x) {
      int64_t x0, x1;
      double wx;
      tap(x, in.w, out_w, &x0, &x1, &wx);
      for (int c = 0; c < 3; ++c) {
        auto px = [&](int64_t r, int64_t q) { return static_cast<double>(in.px[static_cast<size_t>((r * in.w + q) * 3 + c)]); };
        const double top = px(y0, x0) * (1 - wx) + px(y0, x1) * wx;
        const double bottom = px(y1, x0) * (1 - wx) + px(y1, x1) * wx;
        out[static_cast<size_t>((y * out_w + x) * 3 + c)] = top * (1 - wy) + bottom * wy;
      }
    }
  }
  return out;
}

// PSNR of `px` against `ref` (same length) in dB (99 when equal).
inline double psnr_of(const std::vector<uint8_t>& px, const std::vector<double>& ref) {
  double se = 0;
  for (size_t i = 0; i < ref.size(); ++i) se += (px[i] - ref[i]) * (px[i] - ref[i]);
  const double mse = se / static_cast<double>(std::max<size_t>(ref.size(), 1));
  return mse == 0 ? 99.0 : 10 * std::log10(255.0 * 255.0 / mse);
}

}  // namespace goldminer::readers

#endif  // GOLDMINER_READERS_PSNR_H_
