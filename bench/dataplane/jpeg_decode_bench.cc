// JPEG decode benchmark: the jpeg reader's decode options against a
// full decode, on a folder of real JPEGs (default ../shared/data/datasets/
// images_jpeg, 268 images; skipped, with the reason, if absent).
//
// For each mode (full, scale:S, crop:S, resized-crop:S; S = --size,
// default 224), on one core: images decoded per CPU-second
// (CLOCK_PROCESS_CPUTIME_ID over --rounds passes of the folder, after one
// warm-up pass that also fills the page cache) and the ratio to full
// decode; and the PSNR of each image, apart for the images decoded at full
// scale and those DCT-scaled. For full, scale and crop: against the full
// decode of the same region averaged over the same d x d blocks (d = the
// DCT scale denominator), what the option costs in pixels before any
// resize (99 dB: identical). For resized-crop: against the full decode's
// box resized to S x S in double as torch's bilinear interpolate does
// (readers/psnr.h), what a DataLoader running RandomResizedCrop on the full
// image would compute. The crop boxes are those the reader draws from the
// split's seed (--seed), so the crops decode a different region per image.
//
// Last, the floor under every mode: libjpeg's entropy (Huffman) decoding
// alone (jpeg_read_coefficients, no inverse DCT, upsampling or colour
// conversion), which no crop or DCT scale avoids, since the coded data
// has no index into it.
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

// jpeglib.h needs FILE and size_t declared first.
#include <jpeglib.h>

#include "readers/file_io.h"
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

// The contents of the images a jpeg plan of `folder` lists.
std::vector<std::vector<uint8_t>> jpeg_files(const std::string& folder) {
  std::vector<std::string> images;
  goldminer::Status s = internal::jpeg_list_folder(folder, &images);
  std::vector<std::vector<uint8_t>> files(images.size());
  for (size_t i = 0; s.ok() && i < images.size(); ++i) s = internal::read_file("jpeg", folder + "/" + images[i], &files[i]);
  if (!s.ok()) {
    std::fprintf(stderr, "jpeg_decode_bench: %s\n", s.message().c_str());
    std::exit(1);
  }
  return files;
}

// Entropy-decodes `data`: the coefficients only (libjpeg exits on an
// error: the folder's images all decoded above).
void entropy_decode(const std::vector<uint8_t>& data) {
  jpeg_decompress_struct cinfo;
  jpeg_error_mgr err;
  cinfo.err = jpeg_std_error(&err);
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, data.data(), static_cast<unsigned long>(data.size()));
  jpeg_read_header(&cinfo, TRUE);
  jpeg_read_coefficients(&cinfo);
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
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
  const std::string n = std::to_string(size);
  const std::vector<std::string> modes = {"full", "scale:" + n, "crop:" + n, "resized-crop:" + n};
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
    const JpegDecode mode = plans[m].config.options.jpeg_decode.mode;
    for (size_t i = 0; i < images.size(); ++i) {
      const RgbImage& f = full[i];
      internal::JpegBox box{0, 0, static_cast<uint32_t>(f.w), static_cast<uint32_t>(f.h)};
      if (mode == JpegDecode::kCrop || mode == JpegDecode::kResizedCrop)
        box = internal::jpeg_crop_box(box.w, box.h, seed, i);
      const unsigned d = mode == JpegDecode::kFull ? 1 : internal::jpeg_scale_denominator(box.w, box.h, size);
      const double p =
          mode == JpegDecode::kResizedCrop
              ? psnr_of(images[i].px, interpolate_bilinear(region_of(f, box.x, box.y, box.w, box.h), size, size))
              : psnr_against(f, box.x / d * d, box.y / d * d, static_cast<int>(d), images[i]);
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
    std::printf("%-15s %7.1f images per CPU-s  x%.3f of full  %5.0f kpixel out per image;  full scale: %s;  "
                "DCT-scaled: %s\n",
                modes[m].c_str(), rate, rate / full_rate, pixels / 1000.0 / images.size(), psnr(0).c_str(),
                psnr(1).c_str());
  }
  // The floor: the same files, entropy-decoded only.
  const std::vector<std::vector<uint8_t>> files = jpeg_files(folder);
  for (const auto& f : files) entropy_decode(f);  // warm-up
  const double t0 = cpu_now();
  for (int r = 0; r < rounds; ++r)
    for (const auto& f : files) entropy_decode(f);
  const double rate = static_cast<double>(files.size()) * rounds / (cpu_now() - t0);
  std::printf("%-15s %7.1f images per CPU-s  x%.3f of full  (the floor: Huffman decoding alone, %.3f ms per image)\n",
              "entropy-only", rate, rate / full_rate, 1000.0 / rate);
  return 0;
}
