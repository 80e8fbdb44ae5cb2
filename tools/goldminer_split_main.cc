// goldminer-split: splits a TorchScript training program into a data-worker
// program and a trainer program (see goldminer-split(1)). A thin CLI over
// the split library; it never includes torch headers.
#include <boost/program_options.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

#include "goldminer/split.h"

namespace po = boost::program_options;
using namespace goldminer;

namespace {

int fail(const std::string& message, int code) {
  std::fprintf(stderr, "goldminer-split: %s\n", message.c_str());
  return code;
}

bool write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
  return static_cast<bool>(out.flush());
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_path, example_path, transform_path, method, mode_text, worker_path, trainer_path, json_path,
      device_text;
  SplitOptions options;
  uint64_t seed = 0;
  int max_workers = 16;
  po::options_description desc(
      "Usage: goldminer-split MODEL.pt --example EXAMPLE.pt --worker W.pt --trainer TR.pt [options]\n"
      "Splits a TorchScript training program at its stateless prefix; see goldminer-split(1).\nOptions");
  desc.add_options()
      ("help,h", "print this help and exit")
      ("model", po::value(&model_path)->required(), "the scripted model (torch.jit.save output); also positional")
      ("example", po::value(&example_path)->required(),
       "example inputs: torch.save(tuple_of_inputs, path) (inputs of the transform when given)")
      ("transform", po::value(&transform_path), "scripted per-batch data transform run before the model")
      ("method", po::value(&method)->default_value("forward"), "the model's method to split")
      ("mode", po::value(&mode_text)->default_value("extended"),
       "extended (transform + cheapest stateless prefix), dataset (transform only) or max (all stateless)")
      ("worker", po::value(&worker_path), "write the worker program here (required unless --advise)")
      ("trainer", po::value(&trainer_path), "write the trainer program here (required unless --advise)")
      ("report-json", po::value(&json_path), "write the report as one JSON object here")
      ("trainer-device", po::value(&device_text)->default_value("cuda"),
       "the trainer the cut is priced for: cuda (GPU trainers) or cpu")
      ("batch-size", po::value(&options.batch_size)->default_value(0),
       "the job's batch size the cut is priced at (0: the example's)")
      ("transfer-gbps", po::value(&options.transfer_gbps)->default_value(0),
       "the trainer's share of its node's network, GB/s (0: the NIC's speed from sysfs over the GPUs per node)")
      ("network-interface", po::value(&options.network_interface),
       "the interface whose speed --transfer-gbps 0 reads (default: the one GOLDMINER_LISTEN is on, else the "
       "fastest)")
      ("gpus-per-node", po::value(&options.gpus_per_node)->default_value(0),
       "trainers sharing that interface (0: this node's GPUs)")
      ("pinned", "price host-to-device copies from pinned memory (default pageable)")
      ("keep-margin", po::value(&options.keep_margin)->default_value(0.05),
       "a cut must measure this fraction faster than dataset mode to be kept (CPU trainers)")
      ("repeat", po::value(&options.repeat)->default_value(5), "timed runs per measured program (median)")
      ("no-measure", "do not time the programs on the example (faster; no measured figures, no --advise)")
      ("allow-non-tensor-cut", "let ints, lists, tuples and dicts cross the cut too (programs that "
       "goldminer-dw cannot run: it sends tensors only)")
      ("verify", "check trainer(*worker(*x)) == model(*x) in eval and train mode on the example")
      ("seed", po::value(&seed)->default_value(0), "RNG seed of --verify")
      ("advise", "print the estimated trainer speedup against the number of data workers")
      ("max-workers", po::value(&max_workers)->default_value(16), "largest worker count --advise considers")
      ("quiet,q", "print nothing but errors");
  po::positional_options_description positional;
  positional.add("model", 1);
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(desc).positional(positional).run(), vm);
    if (vm.count("help")) {
      std::cout << desc << "\n";
      return 0;
    }
    po::notify(vm);
  } catch (const po::error& e) {
    return fail(std::string(e.what()) + " (try --help)", 2);
  }
  auto mode = parse_split_mode(mode_text);
  if (!mode.ok()) return fail(mode.status().message().substr(std::string("goldminer-split: ").size()), 2);
  options.mode = *mode;
  options.method = method;
  options.measure = vm.count("no-measure") == 0;
  options.tensors_only = vm.count("allow-non-tensor-cut") == 0;
  const bool advise_only = vm.count("advise") > 0;
  if (!advise_only && (worker_path.empty() || trainer_path.empty()))
    return fail("--worker and --trainer are required (unless --advise) (try --help)", 2);
  auto device = parse_trainer_device(device_text);
  if (!device.ok()) return fail("--" + device.status().message(), 2);
  options.trainer_device = *device;
  options.pinned = vm.count("pinned") > 0;
  if (options.transfer_gbps < 0) return fail("--transfer-gbps: invalid value: expected > 0 (or 0: detect)", 2);
  if (options.batch_size < 0) return fail("--batch-size: invalid value: expected >= 1 (or 0: the example's)", 2);
  if (options.gpus_per_node < 0) return fail("--gpus-per-node: invalid value: expected >= 1 (or 0: detect)", 2);
  if (!(options.keep_margin >= 0 && options.keep_margin < 1))
    return fail("--keep-margin: invalid value: expected a fraction in [0, 1)", 2);
  if (options.repeat < 1) return fail("--repeat: invalid value: expected >= 1", 2);
  if (max_workers < 1) return fail("--max-workers: invalid value: expected >= 1", 2);
  if (advise_only && !options.measure) return fail("--advise needs measurements: drop --no-measure", 2);

  SplitInputs in;
  auto model = read_file_bytes(model_path);
  if (!model.ok()) return fail(model.status().message(), 1);
  auto example = read_file_bytes(example_path);
  if (!example.ok()) return fail(example.status().message(), 1);
  in.model = *model;
  in.model_name = model_path;
  in.example = *example;
  in.example_name = example_path;
  if (!transform_path.empty()) {
    auto transform = read_file_bytes(transform_path);
    if (!transform.ok()) return fail(transform.status().message(), 1);
    if (transform->empty()) return fail("cannot load " + transform_path + " as TorchScript: empty file", 1);
    in.transform = *transform;
    in.transform_name = transform_path;
  }

  auto split = split_serialized(in, options);
  if (!split.ok()) return fail(split.status().message(), 1);
  const bool quiet = vm.count("quiet") > 0;
  if (!quiet) std::printf("%s", format_report(split->report).c_str());
  if (!worker_path.empty() && !write_file(worker_path, split->worker))
    return fail("cannot write " + worker_path, 1);
  if (!trainer_path.empty() && !write_file(trainer_path, split->trainer))
    return fail("cannot write " + trainer_path, 1);
  if (!json_path.empty() && !write_file(json_path, report_json(split->report) + "\n"))
    return fail("cannot write " + json_path, 1);
  if (advise_only) {
    auto advice = advise(split->report, max_workers);
    if (!advice.ok()) return fail(advice.status().message(), 1);
    std::printf("%s", format_advice(*advice).c_str());
  }
  if (vm.count("verify")) {
    auto eq = verify_split(in, split->worker, split->trainer, method, seed);
    if (!eq.ok()) return fail(eq.status().message(), 1);
    if (!quiet || !eq->ok())
      std::printf("verify: eval outputs %s; train outputs %s, %d parameter gradients %s, buffers %s%s%s\n",
                  eq->eval_equal ? "equal" : "DIFFER", eq->train_outputs_equal ? "equal" : "DIFFER", eq->parameters,
                  eq->train_grads_equal ? "equal" : "DIFFER", eq->train_buffers_equal ? "equal" : "DIFFER",
                  eq->detail.empty() ? "" : ": ", eq->detail.c_str());
    if (!eq->ok()) return 3;
  }
  return 0;
}
