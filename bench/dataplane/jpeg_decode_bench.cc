// Benchmark (issue 22, part 3): the jpeg reader's decode options against a
// full decode, on a folder of real JPEGs (default ../shared/data/datasets/
// images_jpeg, 268 images; skipped, with the reason, if absent).
//
// For each mode (full, scale:S, crop:S; S = --size, default 224), on one
// core: images decoded per CPU-second (CLOCK_PROCESS_CPUTIME_ID over
// --rounds passes of the folder, after one warm-up pass that also fills the
// page cache) and the ratio to full decode; and the PSNR of each image
// against the full decode of the same region averaged over the same d x d
// blocks (d = the DCT scale denominator), apart for the images decoded at
// full scale and those DCT-scaled: what the option costs in pixels before
// any resize (99 dB: identical). The crop boxes are those the reader draws from the
// split's seed (--seed), so crop:S decodes a different region per image.
//
// usage: jpeg_decode_bench [--folder DIR] [--size S] [--rounds R] [--seed N]
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/stat.h>
#include <vector>

#include "readers/format.h"
#include "readers/psnr.h"
#include "readers/reader.h"

using namespace goldminer::readers;

namespace {

double cpu_now() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + t.tv_nsec * 1e-9;
}

// Every image of the plan's splits, decoded with the plan's options.
std::vector<RgbImage> decode_all(const DatasetPlan& plan, uint64_t seed, bool keep) {
  std::vector<RgbImage> out;
  for (const SplitRange& split : plan.splits) {
    auto stream = SplitStream::open(plan.config, split, seed, 1, 0);
    if (!stream.ok()) {
      std::fprintf(stderr, "jpeg_decode_bench: %s\n", stream.status().message().c_str());
      std::exit(1);
    }
    for (;;) {
      auto b = (*stream)->next();
      if (!b.ok()) {
        std::fprintf(stderr, "jpeg_decode_bench: %s\n", b.status().message().c_str());
        std::exit(1);
      }
      if (!b->has_value()) break;
      if (!keep) continue;
      const auto& t = (*b)->tensors;
      RgbImage im;
      int64_t shape[3];
      std::memcpy(shape, t[1].data.data(), sizeof shape);
      im.h = shape[0];
      im.w = shape[1];
      im.px.assign(t[0].data.begin(), t[0].data.end());
      out.push_back(std::move(im));
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string folder = "../shared/data/datasets/images_jpeg";
  uint32_t size = 224;
  int rounds = 3;
  uint64_t seed = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--folder") folder = argv[i + 1];
    else if (a == "--size") size = static_cast<uint32_t>(std::atoi(argv[i + 1]));
    else if (a == "--rounds") rounds = std::max(1, std::atoi(argv[i + 1]));
    else if (a == "--seed") seed = std::strtoull(argv[i + 1], nullptr, 10);
    else {
      std::fprintf(stderr, "usage: jpeg_decode_bench [--folder DIR] [--size S] [--rounds R] [--seed N]\n");
      return 2;
    }
  }
  struct stat st;
  if (::stat(folder.c_str(), &st) != 0) {
    std::printf("jpeg_decode_bench: SKIPPED: %s is absent (the shared data set is not on this machine)\n",
                folder.c_str());
    return 0;
  }
  const std::vector<std::string> modes = {"full", "scale:" + std::to_string(size), "crop:" + std::to_string(size)};
  std::vector<DatasetPlan> plans;
  for (const std::string& m : modes) {
    InputSpec spec;
    spec.format = Format::kJpeg;
    spec.paths = {folder};
    ReaderOptions options;
    options.jpeg_decode = *parse_jpeg_decode(m);
    auto plan = plan_dataset(spec, options, 64);
    if (!plan.ok()) {
      std::fprintf(stderr, "jpeg_decode_bench: %s\n", plan.status().message().c_str());
      return 1;
    }
    plans.push_back(std::move(*plan));
  }
  const std::vector<RgbImage> full = decode_all(plans[0], seed, true);
  std::printf("jpeg_decode_bench: %zu images of %s, target %u, %d rounds, one core\n", full.size(), folder.c_str(),
              size, rounds);
  double full_rate = 0;
  for (size_t m = 0; m < modes.size(); ++m) {
    const std::vector<RgbImage> images = decode_all(plans[m], seed, true);  // warm-up, and the pixels
    const double t0 = cpu_now();
    for (int r = 0; r < rounds; ++r) decode_all(plans[m], seed, false);
    const double rate = static_cast<double>(images.size()) * rounds / (cpu_now() - t0);
    if (m == 0) full_rate = rate;
    // PSNR against the full decode of the same region, apart for the
    // images decoded at full scale (exact but for the crop's edges) and
    // those DCT-scaled.
    double sum[2] = {0, 0}, worst[2] = {99, 99};
    size_t count[2] = {0, 0};
    uint64_t pixels = 0;
    for (size_t i = 0; i < images.size(); ++i) {
      const RgbImage& f = full[i];
      internal::JpegBox box{0, 0, static_cast<uint32_t>(f.w), static_cast<uint32_t>(f.h)};
      if (plans[m].config.options.jpeg_decode.mode == JpegDecode::kCrop)
        box = internal::jpeg_crop_box(box.w, box.h, seed, i);
      const unsigned d = plans[m].config.options.jpeg_decode.mode == JpegDecode::kFull
                             ? 1
                             : internal::jpeg_scale_denominator(box.w, box.h, size);
      const double p = psnr_against(f, box.x / d * d, box.y / d * d, static_cast<int>(d), images[i]);
      const int k = d > 1 ? 1 : 0;
      sum[k] += p;
      worst[k] = std::min(worst[k], p);
      ++count[k];
      pixels += static_cast<uint64_t>(images[i].w * images[i].h);
    }
    auto psnr = [&](int k) {
      if (count[k] == 0) return std::string("none");
      char text[96];
      std::snprintf(text, sizeof text, "%zu, PSNR mean %.1f dB, worst %.1f dB", count[k], sum[k] / count[k],
                    worst[k]);
      return std::string(text);
    };
    std::printf("%-10s %7.1f images per CPU-s  x%.3f of full  %5.0f kpixel out per image;  full scale: %s;  "
                "DCT-scaled: %s\n",
                modes[m].c_str(), rate, rate / full_rate, pixels / 1000.0 / images.size(), psnr(0).c_str(),
                psnr(1).c_str());
  }
  return 0;
}
