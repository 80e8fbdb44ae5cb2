// The cost of running a TorchScript worker program in a Python child with
// the job's torch (dw::load_python_program, mode=torchscript) instead of in
// goldminer-dw's process (dw::load_torchscript): the same program on the same
// batches, one calling thread, samples per second of each and their ratio.
// The batches are the criteo-tsv reader's tensors (label float32 [B], dense
// float32 [B,13] with NaN for missing, sparse int64 [B,26] with -1 for
// missing; readers/README.md), made here from a fixed seed, so that only
// the program's runner differs. The runners take turns for --rounds rounds
// (each round: every batch through one, then through the other), and each
// one's best round counts, so that a busy machine's noise falls on both.
//
// Usage: bench/torchscript_child_bench --program criteo.pt [--python PATH]
//          [--batch-size B] [--batches N] [--threads T] [--rounds R]
// (criteo.pt: bench/dataplane/make_programs.py OUTDIR; the child needs
// PYTHONPATH to hold the goldminer package, e.g. BUILD/python.)
// Prints one JSON object per runner (runner, samples per round, best and
// median round's seconds, samples_per_s of the best) and then
// {"child_over_inprocess": ratio of the best rounds' samples/s}.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "dw_daemon/program.h"
#include "dw_daemon/program_test_util.h"
#include "dw_daemon/python_program.h"
#include "readers/reader.h"

using namespace goldminer;
using dw::tensor_of;

namespace {

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "torchscript_child_bench: %s\n", what.c_str());
  std::exit(1);
}

// A criteo-tsv batch of `b` samples: about 1 in 10 values missing.
readers::Batch criteo_batch(std::mt19937_64& rng, int64_t b) {
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::vector<float> label(b), dense(b * 13);
  std::vector<int64_t> sparse(b * 26);
  for (auto& v : label) v = unit(rng) < 0.25f ? 1.0f : 0.0f;
  for (auto& v : dense) v = unit(rng) < 0.1f ? NAN : std::exp(8.0f * unit(rng)) - 1.0f;
  for (auto& v : sparse) v = unit(rng) < 0.1f ? -1 : static_cast<int64_t>(rng() >> 32);
  readers::Batch batch;
  batch.tensors.push_back(tensor_of(wire::DType::kFloat32, {b}, label));
  batch.tensors.push_back(tensor_of(wire::DType::kFloat32, {b, 13}, dense));
  batch.tensors.push_back(tensor_of(wire::DType::kInt64, {b, 26}, sparse));
  for (int64_t i = 0; i < b; ++i) batch.records.push_back(static_cast<uint64_t>(i));
  return batch;
}

// The outputs' bytes, to check both runners agree.
std::string output_bytes(const dw::ProgramOutput& out) {
  std::string s;
  for (const auto& t : out.tensors()) s.append(reinterpret_cast<const char*>(t.data), t.nbytes);
  return s;
}

// Seconds to run every batch through `p`, one call at a time.
double run_all(dw::WorkerProgram* p, const std::vector<readers::Batch>& batches, std::string* first) {
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < batches.size(); ++i) {
    auto out = p->run(batches[i], 1000 + i, 0);
    if (!out.ok()) die(out.status().message());
    if (i == 0) *first = output_bytes(**out);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  std::string program_path, python = "/usr/bin/python3";
  int64_t batch_size = 256, batches = 400;
  int threads = 1, rounds = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) die(a + ": missing value");
      return argv[++i];
    };
    if (a == "--program") program_path = value();
    else if (a == "--python") python = value();
    else if (a == "--batch-size") batch_size = std::stoll(value());
    else if (a == "--batches") batches = std::stoll(value());
    else if (a == "--threads") threads = std::stoi(value());
    else if (a == "--rounds") rounds = std::stoi(value());
    else die("unknown argument '" + a + "' (usage: --program W.pt [--python PATH] [--batch-size B] [--batches N] "
             "[--threads T] [--rounds R])");
  }
  if (program_path.empty()) die("--program is required");
  if (batch_size < 1 || batches < 1 || threads < 1 || rounds < 1)
    die("--batch-size, --batches, --threads and --rounds must be at least 1");
  std::ifstream in(program_path, std::ios::binary);
  if (!in) die(program_path + ": cannot open");
  std::ostringstream bytes;
  bytes << in.rdbuf();

  std::mt19937_64 rng(7);
  std::vector<readers::Batch> data;
  for (int64_t i = 0; i < batches; ++i) data.push_back(criteo_batch(rng, batch_size));

  auto here = dw::load_torchscript(bytes.str(), threads);
  if (!here.ok()) die(here.status().message());
  // The version a trainer would write is the child's own here: the bench
  // measures the runner, not a version skew.
  const std::string wrapped = std::string(dw::kPythonProgramMagic) + "python=" + python +
                              "\nmode=torchscript\ntorch=(bench)\n\n" + bytes.str();
  auto child = dw::load_python_program(wrapped, threads);
  if (!child.ok()) die(child.status().message());

  std::string first_here, first_child;
  // One batch each first: the child's lazy imports and both runners' first
  // call (TorchScript's profiling run) are not what a split costs.
  run_all(here->get(), {data[0]}, &first_here);
  run_all(child->get(), {data[0]}, &first_child);
  if (first_here != first_child) die("the child's outputs differ from the in-process runner's");
  std::vector<double> inprocess, in_child;
  for (int r = 0; r < rounds; ++r) {
    inprocess.push_back(run_all(here->get(), data, &first_here));
    in_child.push_back(run_all(child->get(), data, &first_child));
  }
  std::sort(inprocess.begin(), inprocess.end());
  std::sort(in_child.begin(), in_child.end());
  const double samples = static_cast<double>(batch_size * batches);
  std::printf("{\"runner\": \"inprocess\", \"samples\": %.0f, \"best_s\": %.3f, \"median_s\": %.3f, "
              "\"samples_per_s\": %.0f}\n",
              samples, inprocess[0], inprocess[inprocess.size() / 2], samples / inprocess[0]);
  std::printf("{\"runner\": \"python_child\", \"python\": \"%s\", \"samples\": %.0f, \"best_s\": %.3f, "
              "\"median_s\": %.3f, \"samples_per_s\": %.0f}\n",
              python.c_str(), samples, in_child[0], in_child[in_child.size() / 2], samples / in_child[0]);
  std::printf("{\"child_over_inprocess\": %.3f}\n", inprocess[0] / in_child[0]);
  return 0;
}
