// goldminer-split: splits a TorchScript training program into a data-worker
// program and a trainer program (see goldminer-split(1)). A thin CLI over
// the split library; it never includes torch headers.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

#include "goldminer/split.h"
#include "launch/job_environment.h"
#include "tools/goldminer_split_options.h"

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
  SplitArgs a;
  CommandLine command_line;
  if (int rc = parse_main_command_line(split_command(&a), argc, argv, &command_line); rc >= 0) return rc;
  const std::string &model_path = a.model_path, &example_path = a.example_path, &transform_path = a.transform_path,
                    &method = a.method, &mode_text = a.mode_text, &worker_path = a.worker_path,
                    &trainer_path = a.trainer_path, &json_path = a.json_path, &device_text = a.device_text;
  SplitOptions& options = a.options;
  const uint64_t seed = a.seed;
  const int max_workers = a.max_workers;
  auto mode = parse_split_mode(mode_text);
  if (!mode.ok()) return fail(mode.status().message().substr(std::string("goldminer-split: ").size()), 2);
  options.mode = *mode;
  options.method = method;
  options.measure = !a.no_measure;
  options.tensors_only = !a.allow_non_tensor_cut;
  const bool advise_only = a.advise;
  if (!advise_only && (worker_path.empty() || trainer_path.empty()))
    return fail("--worker and --trainer are required (unless --advise) (try --help)", 2);
  auto device = parse_trainer_device(device_text);
  if (!device.ok()) return fail("--" + device.status().message(), 2);
  options.trainer_device = *device;
  options.pinned = a.pinned;
  if (options.transfer_gbps < 0) return fail("--transfer-gbps: invalid value: expected > 0 (or 0: detect)", 2);
  if (options.batch_size < 0) return fail("--batch-size: invalid value: expected >= 1 (or 0: the example's)", 2);
  if (options.gpus_per_node < 0) return fail("--gpus-per-node: invalid value: expected >= 1 (or 0: detect)", 2);
  if (!(options.keep_margin >= 0 && options.keep_margin < 1))
    return fail("--keep-margin: invalid value: expected a fraction in [0, 1)", 2);
  if (options.repeat < 1) return fail("--repeat: invalid value: expected >= 1", 2);
  if (max_workers < 1) return fail("--max-workers: invalid value: expected >= 1", 2);
  if (advise_only && !options.measure) return fail("--advise needs measurements: drop --no-measure", 2);
  // In a --goldminer job: the trainer's address, whose interface's speed
  // prices the cut when --network-interface is not given.
  auto job = process_job_environment(kReadBySession);
  if (!job.ok()) return fail(job.status().message(), 2);
  options.listen = job->listen;

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
  const bool quiet = a.quiet;
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
  if (a.verify) {
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
