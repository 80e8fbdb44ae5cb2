// Plan and read throughput of one input, printed (STYLE.md §10: a program
// that prints figures, not a timed test).
//   readers/readers_bench FORMAT:PATH [REPEAT] [BATCH] [SHUFFLE]
// For line formats, REPEAT > 1 first writes the file REPEAT times into a
// temporary file (removed at exit) so that a small sample measures like a
// big one.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include "readers/reader.h"

using namespace goldminer::readers;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FORMAT:PATH [REPEAT] [BATCH] [SHUFFLE]\n", argv[0]);
    return 2;
  }
  auto spec = parse_input_spec(argv[1]);
  if (!spec.ok()) {
    std::fprintf(stderr, "readers_bench: %s\n", spec.status().message().c_str());
    return 2;
  }
  int repeat = argc > 2 ? std::atoi(argv[2]) : 1;
  uint32_t batch = argc > 3 ? static_cast<uint32_t>(std::atoi(argv[3])) : 4096;
  uint32_t shuffle = argc > 4 ? static_cast<uint32_t>(std::atoi(argv[4])) : 0;
  std::string temp;
  if (repeat > 1 && spec->format != Format::kJpeg) {
    std::ifstream in(spec->paths[0], std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!bytes.empty() && bytes.back() != '\n' && spec->format != Format::kTfRecord) bytes += '\n';
    char name[] = "/tmp/readers_bench.XXXXXX";
    int fd = ::mkstemp(name);
    if (fd < 0) return 1;
    ::close(fd);
    temp = name;
    std::ofstream out(temp, std::ios::binary);
    std::string header;
    if (spec->format == Format::kCsv) {
      header = bytes.substr(0, bytes.find('\n') + 1);
      out << header;
      bytes.erase(0, header.size());
    }
    for (int i = 0; i < repeat; ++i) out << bytes;
    spec->paths = {temp};
  }
  // Input bytes (line formats and tfrecord; 0 for jpeg folders/manifests).
  double mb = 0;
  if (spec->format != Format::kJpeg) {
    std::ifstream probe(spec->paths[0], std::ios::binary | std::ios::ate);
    mb = static_cast<double>(probe.tellg()) / 1e6;
  }

  auto t0 = std::chrono::steady_clock::now();
  auto plan = plan_dataset(*spec, ReaderOptions(), 100000);
  double plan_s = seconds_since(t0);
  if (!plan.ok()) {
    std::fprintf(stderr, "readers_bench: %s\n", plan.status().message().c_str());
    return 1;
  }
  t0 = std::chrono::steady_clock::now();
  uint64_t samples = 0;
  for (const SplitRange& split : plan->splits) {
    auto stream = SplitStream::open(plan->config, split, 1, batch, shuffle);
    if (!stream.ok()) {
      std::fprintf(stderr, "readers_bench: %s\n", stream.status().message().c_str());
      return 1;
    }
    for (;;) {
      auto b = (*stream)->next();
      if (!b.ok()) {
        std::fprintf(stderr, "readers_bench: %s\n", b.status().message().c_str());
        return 1;
      }
      if (!b->has_value()) break;
      samples += (*b)->records.size();
    }
  }
  double read_s = seconds_since(t0);
  if (!temp.empty()) ::unlink(temp.c_str());
  std::printf("input      %s (x%d, %.1f MB, %llu records, %zu splits)\n", argv[1], repeat, mb,
              static_cast<unsigned long long>(plan->total_records), plan->splits.size());
  std::printf("plan       %.3f s  %.0f MB/s\n", plan_s, mb / plan_s);
  std::printf("read       %.3f s  %.0f MB/s  %.0f records/s  (batch %u, shuffle %u, 1 thread)\n", read_s,
              mb / read_s, static_cast<double>(samples) / read_s, batch, shuffle);
  return 0;
}
