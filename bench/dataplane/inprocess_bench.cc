// Benchmark (b)'s baseline: the same reader and worker program as
// goldminer-consume + goldminer-dw, run in this one process on one thread,
// with no transport, no session and no second process. Reads every split of
// the input (readers::plan_dataset + SplitStream, splits in file order, no
// shuffle buffer) and runs the TorchScript program on each batch
// (dw::load_torchscript, 1 intra-op thread, as goldminer-dw by default).
//
// Usage: bench/inprocess_bench --input FORMAT:PATH[,PATH...] [--program W.pt]
//          [--batch-size B] [--epochs E] [--records-per-split N]
// Prints one JSON object per epoch: epoch, samples, batches, seconds,
// samples_per_s, cpu_seconds (user + system of this process in the epoch).
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "dw_daemon/program.h"
#include "readers/reader.h"

using namespace goldminer;

namespace {

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "inprocess_bench: %s\n", what.c_str());
  std::exit(1);
}

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  std::string input, program_path;
  uint32_t batch_size = 256, epochs = 1;
  uint64_t records_per_split = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) die(a + ": missing value");
      return argv[++i];
    };
    if (a == "--input") input = value();
    else if (a == "--program") program_path = value();
    else if (a == "--batch-size") batch_size = static_cast<uint32_t>(std::stoul(value()));
    else if (a == "--epochs") epochs = static_cast<uint32_t>(std::stoul(value()));
    else if (a == "--records-per-split") records_per_split = std::stoull(value());
    else die("unknown argument '" + a + "' (usage: --input FORMAT:PATH [--program W.pt] [--batch-size B] "
             "[--epochs E] [--records-per-split N])");
  }
  if (input.empty()) die("--input is required");
  if (batch_size == 0) die("--batch-size: must be at least 1");
  // The session's default: 16 batches per split.
  if (records_per_split == 0) records_per_split = uint64_t{16} * batch_size;

  auto spec = readers::parse_input_spec(input);
  if (!spec.ok()) die(spec.status().message());
  auto plan = readers::plan_dataset(*spec, readers::ReaderOptions{}, records_per_split);
  if (!plan.ok()) die(plan.status().message());
  std::unique_ptr<dw::WorkerProgram> program;
  if (!program_path.empty()) {
    std::ifstream in(program_path, std::ios::binary);
    if (!in) die(program_path + ": cannot open");
    std::ostringstream bytes;
    bytes << in.rdbuf();
    auto p = dw::load_torchscript(bytes.str(), 1);
    if (!p.ok()) die(p.status().message());
    program = std::move(p).value();
  }

  for (uint32_t e = 0; e < epochs; ++e) {
    uint64_t samples = 0, batches = 0, out_bytes = 0;
    const double c0 = cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    for (size_t s = 0; s < plan->splits.size(); ++s) {
      const uint64_t seed = (uint64_t{e} << 32) ^ s;
      auto stream = readers::SplitStream::open(plan->config, plan->splits[s], seed, batch_size, 0);
      if (!stream.ok()) die(stream.status().message());
      for (;;) {
        auto b = (*stream)->next();
        if (!b.ok()) die(b.status().message());
        if (!b->has_value()) break;
        const readers::Batch& batch = **b;
        samples += batch.records.size();
        ++batches;
        if (program) {
          auto out = program->run(batch, seed + batches, 0);
          if (!out.ok()) die(out.status().message());
          for (const auto& t : (*out)->tensors()) out_bytes += t.nbytes;
        } else {
          for (const auto& t : batch.tensors) out_bytes += t.data.size();
        }
      }
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("{\"epoch\": %u, \"samples\": %llu, \"batches\": %llu, \"seconds\": %.6f, \"samples_per_s\": %.1f, "
                "\"bytes_per_s\": %.1f, \"cpu_seconds\": %.3f}\n",
                e, static_cast<unsigned long long>(samples), static_cast<unsigned long long>(batches), seconds,
                samples / std::max(seconds, 1e-9), out_bytes / std::max(seconds, 1e-9), cpu_seconds() - c0);
    std::fflush(stdout);
  }
  return 0;
}
