// Bilinear resize of packed RGB uint8 images, for the jpeg reader's
// resized-crop decode (JpegDecode::kResizedCrop). Slurm-, torch- and
// libjpeg-free.
#ifndef GOLDMINER_READERS_IMAGE_RESIZE_H_
#define GOLDMINER_READERS_IMAGE_RESIZE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace goldminer::readers {

// Resizes the h x w RGB image `src` (row stride src_stride bytes) to
// out_h x out_w into `dst` (packed: out_w * 3 bytes a row), with the
// sampling of torch.nn.functional.interpolate(mode="bilinear",
// align_corners=False, antialias=False): source coordinate
// (d + 0.5) * in / out - 0.5, clamped at 0, the neighbour clamped at the
// edge. Weights are fixed point (1/2048), the result rounded to the
// nearest integer: within 1 of the float computation. `rows` is scratch,
// reused between calls.
void resize_bilinear_rgb(const uint8_t* src, uint32_t h, uint32_t w, size_t src_stride, uint8_t* dst,
                         uint32_t out_h, uint32_t out_w, std::vector<int32_t>* rows);

}  // namespace goldminer::readers

#endif  // GOLDMINER_READERS_IMAGE_RESIZE_H_
