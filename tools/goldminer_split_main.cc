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

// The named choices into a.options, and what the rows cannot check: the
// options that relate to each other.
Status complete_options(SplitArgs& a) {
  SplitOptions& options = a.options;
  auto mode = parse_split_mode(a.mode_text);
  if (!mode.ok()) return Status::error(mode.status().message().substr(std::string("goldminer-split: ").size()));
  options.mode = *mode;
  options.method = a.method;
  options.measure = !a.no_measure;
  options.tensors_only = !a.allow_non_tensor_cut;
  if (!a.advise && (a.worker_path.empty() || a.trainer_path.empty()))
    return Status::error("--worker and --trainer are required (unless --advise) (try --help)");
  auto device = parse_trainer_device(a.device_text);
  if (!device.ok()) return Status::error("--" + device.status().message());
  options.trainer_device = *device;
  options.pinned = a.pinned;
  if (a.advise && !options.measure) return Status::error("--advise needs measurements: drop --no-measure");
  return Status();
}

// The model, the example and the transform (if any), read.
Expected<SplitInputs> read_inputs(const SplitArgs& a) {
  SplitInputs in;
  auto model = read_file_bytes(a.model_path);
  if (!model.ok()) return model.status();
  auto example = read_file_bytes(a.example_path);
  if (!example.ok()) return example.status();
  in.model = *model;
  in.model_name = a.model_path;
  in.example = *example;
  in.example_name = a.example_path;
  if (!a.transform_path.empty()) {
    auto transform = read_file_bytes(a.transform_path);
    if (!transform.ok()) return transform.status();
    if (transform->empty()) return Status::error("cannot load " + a.transform_path + " as TorchScript: empty file");
    in.transform = *transform;
    in.transform_name = a.transform_path;
  }
  return in;
}

// The programs and the report, each where the options say.
Status write_outputs(const SplitArgs& a, const SerializedSplit& split) {
  if (!a.worker_path.empty() && !write_file(a.worker_path, split.worker))
    return Status::error("cannot write " + a.worker_path);
  if (!a.trainer_path.empty() && !write_file(a.trainer_path, split.trainer))
    return Status::error("cannot write " + a.trainer_path);
  if (!a.json_path.empty() && !write_file(a.json_path, report_json(split.report) + "\n"))
    return Status::error("cannot write " + a.json_path);
  return Status();
}

// --verify: the split programs against the model; 3 when they differ.
int verify(const SplitArgs& a, const SplitInputs& in, const SerializedSplit& split) {
  auto eq = verify_split(in, split.worker, split.trainer, a.method, a.seed);
  if (!eq.ok()) return fail(eq.status().message(), 1);
  if (!a.quiet || !eq->ok())
    std::printf("verify: eval outputs %s; train outputs %s, %d parameter gradients %s, buffers %s%s%s\n",
                eq->eval_equal ? "equal" : "DIFFER", eq->train_outputs_equal ? "equal" : "DIFFER", eq->parameters,
                eq->train_grads_equal ? "equal" : "DIFFER", eq->train_buffers_equal ? "equal" : "DIFFER",
                eq->detail.empty() ? "" : ": ", eq->detail.c_str());
  return eq->ok() ? 0 : 3;
}

}  // namespace

int main(int argc, char** argv) {
  SplitArgs a;
  CommandLine command_line;
  if (int rc = parse_main_command_line(split_command(&a), argc, argv, &command_line); rc >= 0) return rc;
  if (Status st = complete_options(a); !st.ok()) return fail(st.message(), 2);
  // In a --goldminer job: the trainer's address, whose interface's speed
  // prices the cut when --network-interface is not given.
  auto job = process_job_environment(kReadBySession);
  if (!job.ok()) return fail(job.status().message(), 2);
  a.options.listen = job->listen;
  auto in = read_inputs(a);
  if (!in.ok()) return fail(in.status().message(), 1);
  auto split = split_serialized(*in, a.options);
  if (!split.ok()) return fail(split.status().message(), 1);
  if (!a.quiet) std::printf("%s", format_report(split->report).c_str());
  if (Status st = write_outputs(a, *split); !st.ok()) return fail(st.message(), 1);
  if (a.advise) {
    auto advice = advise(split->report, a.max_workers);
    if (!advice.ok()) return fail(advice.status().message(), 1);
    std::printf("%s", format_advice(*advice).c_str());
  }
  return a.verify ? verify(a, *in, *split) : 0;
}
