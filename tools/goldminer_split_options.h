// goldminer-split's options: one table for its parse, --help and the
// OPTIONS of goldminer-split(1) (gmcore/command_line.h; man/gen_man.cc).
#ifndef GOLDMINER_TOOLS_GOLDMINER_SPLIT_OPTIONS_H_
#define GOLDMINER_TOOLS_GOLDMINER_SPLIT_OPTIONS_H_

#include <cstdint>
#include <string>

#include "gmcore/command_line.h"
#include "goldminer/split.h"

namespace goldminer {

struct SplitArgs {
  std::string model_path, example_path, transform_path, method, mode_text, worker_path, trainer_path, json_path,
      device_text;
  SplitOptions options;
  uint64_t seed = 0;
  int max_workers = 16;
  bool pinned = false, no_measure = false, allow_non_tensor_cut = false, verify = false, advise = false,
       quiet = false;
};

inline CommandOptions split_command(SplitArgs* a) {
  SplitOptions& o = a->options;
  return {"goldminer-split",
          "goldminer-split MODEL.pt --example EXAMPLE.pt --worker W.pt --trainer TR.pt [options]",
          "Splits a TorchScript training program at its stateless prefix; see goldminer-split(1).",
          {
              help_flag(),
              required_option("model", "MODEL.pt", "the scripted model (torch.jit.save output); also positional",
                              &a->model_path, "The scripted model; also the first word that is not an option."),
              required_option("example", "EXAMPLE.pt",
                              "example inputs: torch.save(tuple_of_inputs, path) (inputs of the transform when given)",
                              &a->example_path,
                              R"(Example inputs, saved from Python with \fBtorch.save(tuple_of_inputs, path)\fR:
the inputs of the transform when one is given, else of the
method. Dicts and lists are given the container types the method declares.
Their leading dimension is the batch size used for bytes per sample.)"),
              option("transform", "T.pt", "", "scripted per-batch data transform run before the model",
                     &a->transform_path, R"(A scripted per\-batch data transform run before the model (for example
torchvision transforms in an \fBnn.Sequential\fR). Its \fBforward\fR output is
the method's argument, or, as a tuple, its arguments. It always runs on the
worker.)"),
              option("method", "NAME", "forward", "the model's method to split", &a->method,
                     "The model's method to split."),
              option("mode", "extended|dataset|max", "extended",
                     "extended (transform + cheapest stateless prefix), dataset (transform only) or max (all "
                     "stateless)",
                     &a->mode_text, R"(\fBdataset\fR: only the transform moves (what input pipelines do today).
\fBextended\fR: the transform and the cheapest stateless prefix of
the model. \fBmax\fR: every stateless node whose results can be shipped,
ignoring cost.)"),
              option("worker", "W.pt", "", "write the worker program here (required unless --advise)",
                     &a->worker_path, R"(Where to write the worker program (required unless \fB\-\-advise\fR).)"),
              option("trainer", "TR.pt", "", "write the trainer program here (required unless --advise)",
                     &a->trainer_path, R"(Where to write the trainer program (required unless \fB\-\-advise\fR).)"),
              option("report-json", "R.json", "", "write the report as one JSON object here", &a->json_path,
                     "Also write the report as one JSON object (see REPORT)."),
              option("trainer-device", "cuda|cpu", "cuda", "the trainer the cut is priced for: cuda (GPU trainers) or cpu",
                     &a->device_text, R"(The trainer the cut is priced for (\fBcuda\fR: GoldMiner's
trainers are GPU jobs).)"),
              checked(option("batch-size", "B", "0", "the job's batch size the cut is priced at (0: the example's)",
                     &o.batch_size, "The job's batch size the cut is priced at (0: the example's)."),
                      integer_at_least(0)),
              checked(option("transfer-gbps", "G", "0",
                     "the trainer's share of its node's network, GB/s (0: the NIC's speed from sysfs over the GPUs "
                     "per node)",
                     &o.transfer_gbps, R"(The trainer's share of its node's network in GB/s (bytes). 0:
detected, as the speed of the interface \fBGOLDMINER_LISTEN\fR is on (or
\fB\-\-network\-interface\fR, else the fastest up interface reporting a
speed in \fI/sys/class/net\fR) divided by \fB\-\-gpus\-per\-node\fR;
10 Gb/s Ethernet is assumed, and said, when no speed can be read. A
figure measured over the real link (for example by
\fBgoldminer\-consume\fR(1)) can be given here. The report names the
figure and where it came from.)"),
                      number_at_least(0)),
              option("network-interface", "IFACE", "",
                     "the interface whose speed --transfer-gbps 0 reads (default: the one GOLDMINER_LISTEN is on, "
                     "else the fastest)",
                     &o.network_interface, R"(The interface whose speed the detected link is (the admin's
\fBdw_network\fR).)"),
              checked(option("gpus-per-node", "N", "0", "trainers sharing that interface (0: this node's GPUs)",
                     &o.gpus_per_node, R"(Trainers sharing that interface (0: the GPUs in
\fI/proc/driver/nvidia/gpus\fR, else \fBSLURM_GPUS_ON_NODE\fR, else 1).)"),
                      integer_at_least(0)),
              flag("pinned", "price host-to-device copies from pinned memory (default pageable)", &a->pinned,
                   R"(Price the host\-to\-device copy from pinned memory (default pageable).)"),
              checked(option("keep-margin", "F", "0.05",
                     "a cut must measure this fraction faster than dataset mode to be kept (CPU trainers)",
                     &o.keep_margin, R"(A cut must measure this fraction faster than dataset mode to be kept
(CPU trainers, see DESCRIPTION).)"),
                      number_at_least_below(0, 1)),
              checked(option("repeat", "N", "5", "timed runs per measured program (median)", &o.repeat,
                     "Timed runs per measured program; the median is reported."),
                      integer_at_least(1)),
              flag("no-measure", "do not time the programs on the example (faster; no measured figures, no --advise)",
                   &a->no_measure, R"(Do not time the original and split programs (faster). The measured figures
are then 0 and \fB\-\-advise\fR is refused. Per\-node times for the cut are
still measured.)"),
              flag("allow-non-tensor-cut",
                   "let ints, lists, tuples and dicts cross the cut too (programs that goldminer-dw cannot run: it "
                   "sends tensors only)",
                   &a->allow_non_tensor_cut, R"(By default only tensors cross the cut, because \fBgoldminer\-dw\fR(1) sends
a batch as tensors: a stateless node whose int, list or other non\-tensor
output the trainer reads (for example the \fBtarget.size()\fR that a loss
function checks) stays on the trainer. With this option such values may
cross too; the worker program can then only be run in the trainer's
process, not by \fBgoldminer\-dw\fR.)"),
              flag("verify", "check trainer(*worker(*x)) == model(*x) in eval and train mode on the example",
                   &a->verify, R"(Run the model and the split programs on fresh copies, in eval mode and in
train mode (forward and backward of the sum of the outputs) with seed
\fB\-\-seed\fR, and compare outputs, every parameter gradient and the
buffers after the step, bit for bit.)"),
              option("seed", "S", "0", "RNG seed of --verify", &a->seed, R"(RNG seed of \fB\-\-verify\fR.)"),
              flag("advise", "print the estimated trainer speedup against the number of data workers", &a->advise,
                   R"(Print the estimated trainer speedup against the number of data workers
(see ADVICE). \fB\-\-worker\fR and \fB\-\-trainer\fR are then optional.)"),
              checked(option("max-workers", "K", "16", "largest worker count --advise considers", &a->max_workers,
                     R"(Largest number of data workers \fB\-\-advise\fR considers.)"),
                      integer_at_least(1)),
              flag("quiet,q", "print nothing but errors", &a->quiet,
                   "Print only errors (and the advice when asked for)."),
          },
          {{"model", 1}}};
}

}  // namespace goldminer

#endif  // GOLDMINER_TOOLS_GOLDMINER_SPLIT_OPTIONS_H_
