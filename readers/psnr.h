// PSNR of a decoded image against a reference decode, for the jpeg decode
// options (readers/jpeg_decode_test.cc, bench/jpeg_decode_bench).
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

}  // namespace goldminer::readers

#endif  // GOLDMINER_READERS_PSNR_H_
