// libFuzzer target: every reader (criteo-tsv, csv, tfrecord, jpeg, text)
// must turn any file into batches or a clear error, and never read or write
// outside what it sized (run under ASan/UBSan). The first byte picks the
// format; the rest is the file, planned and read as a trainer and its
// workers would (plan_dataset, then every split through SplitStream); for
// jpeg the first byte also picks the decode option.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "readers/reader.h"

namespace {

// A jpeg input is a folder or a manifest of image paths: the fuzzed bytes
// become one image in a folder of its own.
const char* const kFormats[] = {"criteo-tsv", "csv", "tfrecord", "jpeg", "text"};

// This process's scratch folder, removed when the fuzzer exits.
std::string scratch() {
  static const std::string dir = [] {
    std::string d = "/tmp/gm-readers-fuzz." + std::to_string(getpid());
    (void)!std::system(("mkdir -p " + d + "/images").c_str());
    std::atexit([] { (void)!std::system(("rm -rf /tmp/gm-readers-fuzz." + std::to_string(getpid())).c_str()); });
    return d;
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace goldminer::readers;
  if (size == 0) return 0;
  const std::string format = kFormats[data[0] % 5];
  const std::string dir = scratch();
  const std::string file = format == "jpeg" ? dir + "/images/a.jpg" : dir + "/input";
  FILE* f = std::fopen(file.c_str(), "wb");
  if (f == nullptr) return 0;
  std::fwrite(data + 1, 1, size - 1, f);
  std::fclose(f);
  auto spec = parse_input_spec(format + ":" + (format == "jpeg" ? dir + "/images" : file));
  if (!spec.ok()) return 0;
  ReaderOptions options;
  options.max_bad_records = 3;  // both paths: skip some, then fail
  // jpeg: each decode option (full, DCT-scaled, a crop box only, a crop
  // box resized) by turns.
  const char* const decodes[] = {"full", "scale:4", "crop:8", "resized-crop:8"};
  options.jpeg_decode = *parse_jpeg_decode(decodes[(data[0] / 5) % 4]);
  auto plan = plan_dataset(*spec, options, 4);
  if (!plan.ok()) return 0;
  for (SplitRange split : plan->splits) {
    // Every other split as a data-parallel rank's part: its first records
    // skipped (good or corrupt), the rest cut into one batch a record.
    uint64_t batches = 0;
    if (split.first_record % 8 == 4 && split.records > 1) {
      split.skip = 1;
      batches = split.records - 1;
    }
    auto stream = SplitStream::open(plan->config, split, 7, 3, 2, batches);
    if (!stream.ok()) continue;
    for (int batches = 0; batches < 64; ++batches) {
      auto b = (*stream)->next();
      if (!b.ok() || !b->has_value()) break;
      volatile uint8_t sink = 0;  // touch every byte the batch claims
      for (const HostTensor& t : (*b)->tensors)
        for (uint8_t byte : t.data) sink = sink ^ byte;
    }
  }
  return 0;
}
