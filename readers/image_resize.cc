#include "readers/image_resize.h"

#include <algorithm>

namespace goldminer::readers {
namespace {

constexpr int kBits = 11;
constexpr int32_t kOne = 1 << kBits;

// Where output index d samples an axis of `in` pixels resized to `out`:
// the lower neighbour, whether there is an upper one, and the upper's
// weight in 1/kOne.
struct Tap {
  uint32_t lo;
  uint32_t step;  // 0 at the last pixel, else 1
  int32_t weight;
};

std::vector<Tap> taps(uint32_t in, uint32_t out) {
  std::vector<Tap> t(out);
  const double scale = static_cast<double>(in) / out;
  for (uint32_t d = 0; d < out; ++d) {
    const double s = std::max(0.0, (d + 0.5) * scale - 0.5);
    const auto lo = std::min(static_cast<uint32_t>(s), in - 1);
    t[d].lo = lo;
    t[d].step = lo + 1 < in ? 1 : 0;
    t[d].weight = static_cast<int32_t>((s - lo) * kOne + 0.5);
  }
  return t;
}

}  // namespace

void resize_bilinear_rgb(const uint8_t* src, uint32_t h, uint32_t w, size_t src_stride, uint8_t* dst,
                         uint32_t out_h, uint32_t out_w, std::vector<int32_t>* rows) {
  if (h == 0 || w == 0 || out_h == 0 || out_w == 0) return;
  const std::vector<Tap> across = taps(w, out_w), down = taps(h, out_h);
  // Down the columns first (two source rows blended into `rows`, w * 3
  // values * kOne: contiguous, vectorized), then across (out_w * 3
  // gathers): of the two orders the one with fewer gathers when
  // shrinking, and no worse when growing.
  const size_t in_values = static_cast<size_t>(w) * 3;
  rows->resize(in_values);
  int32_t* blend = rows->data();
  constexpr int32_t kRound = 1 << (2 * kBits - 1);
  for (uint32_t y = 0; y < out_h; ++y) {
    const uint8_t* a = src + static_cast<size_t>(down[y].lo) * src_stride;
    const uint8_t* b = a + down[y].step * src_stride;
    const int32_t wb = down[y].weight, wa = kOne - wb;
    for (size_t i = 0; i < in_values; ++i) blend[i] = a[i] * wa + b[i] * wb;
    uint8_t* o = dst + static_cast<size_t>(y) * out_w * 3;
    for (uint32_t x = 0; x < out_w; ++x, o += 3) {
      const int32_t* p = blend + static_cast<size_t>(across[x].lo) * 3;
      const int32_t* q = p + across[x].step * 3;
      const int32_t xb = across[x].weight, xa = kOne - xb;
      // 255 * kOne * kOne + kRound < 2^31: no overflow.
      o[0] = static_cast<uint8_t>((p[0] * xa + q[0] * xb + kRound) >> (2 * kBits));
      o[1] = static_cast<uint8_t>((p[1] * xa + q[1] * xb + kRound) >> (2 * kBits));
      o[2] = static_cast<uint8_t>((p[2] * xa + q[2] * xb + kRound) >> (2 * kBits));
    }
  }
}

}  // namespace goldminer::readers
