// Automatic stateless-subgraph split of TorchScript training programs
// (GoldMiner's first idea).
//
// Given a scripted model, one of its methods (`forward` by default), an
// optional scripted per-batch data transform that runs before it, and example
// inputs, the split classifies every node of the method's graph as stateful
// (reads parameters, buffers or module state, depends on such a value,
// conflicts in memory with such a node, is nondeterministic, has side
// effects, or is a call that cannot be inlined) or stateless, chooses a cut
// inside the stateless region, and extracts two programs:
//
//   worker:  forward(*inputs) -> tuple of cut values   (runs on data workers)
//   trainer: forward(*cut)    -> the model's outputs   (holds all parameters)
//
// Contract: trainer(*worker(*x)) equals model(*transform(*x)) bit for bit in
// eval mode; in train mode with the same seed, outputs and all parameter
// gradients are equal. Nondeterministic model ops stay on the trainer so they
// keep the trainer's RNG stream; random augmentation in the transform runs on
// the worker, whose runtime seeds it per (seed, epoch, split) (see
// gmcore/lease_table.h, split_seed) so a re-run split is reproducible.
//
// This header does not include torch headers (each translation unit that
// does costs ~8 s and ~0.7 GB to compile): the module-level API takes
// forward-declared torch types. Every function catches torch's exceptions
// and returns them as a Status; none throws.
#ifndef GOLDMINER_SPLIT_H_
#define GOLDMINER_SPLIT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gmcore/status.h"

namespace torch::jit {
struct Module;
}  // namespace torch::jit
namespace c10 {
struct IValue;
}  // namespace c10

namespace goldminer {

// dataset: only the transform moves (what every input pipeline does today).
// extended: the transform plus the stateless prefix of the model that
//   minimises trainer time + transfer cost (the default).
// max: every stateless node that can move, ignoring cost.
enum class SplitMode { kDataset, kExtended, kMax };

Expected<SplitMode> parse_split_mode(const std::string& text);
const char* split_mode_name(SplitMode mode);

// Where the trainer runs the model: the cut is priced for it (a one-hot or
// a cast costs microseconds on a GPU and milliseconds on a CPU).
enum class TrainerDevice { kCuda, kCpu };
Expected<TrainerDevice> parse_trainer_device(const std::string& text);
const char* trainer_device_name(TrainerDevice device);

struct SplitOptions {
  std::string method = "forward";
  SplitMode mode = SplitMode::kExtended;
  // The cut is priced for this trainer (docs/SPLIT-COST.md): its device,
  // the job's batch size (0: the example's), and the trainer's share of
  // its node's network in GB/s (0: detected, see split::detect_link, from
  // `network_interface` (""): the interface holding `listen`'s address,
  // else the fastest one) over `gpus_per_node` (0: this node's GPUs).
  // `listen`: where the job's trainer listens, "host:port" or
  // "ucx://host:port" (GOLDMINER_LISTEN in a --goldminer job: the admin's
  // dw_network); "" for none.
  TrainerDevice trainer_device = TrainerDevice::kCuda;
  int64_t batch_size = 0;
  double transfer_gbps = 0;
  std::string network_interface;
  std::string listen;
  int gpus_per_node = 0;
  bool pinned = false;  // batches arrive in pinned memory (host-to-device at the pinned figure)
  // Never lose: a cut that does not measure faster than dataset mode by
  // this fraction (measured trainer ms + modelled transfer ms, medians of
  // `repeat` interleaved runs) gives way to the next candidate, down to
  // dataset mode. Checked where the measurement is the trainer's own
  // (trainer_device cpu); a GPU trainer's cut stands on the device model.
  double keep_margin = 0.05;
  // Time the original and the split programs on the example (forward, plus
  // backward when an output requires grad). Off: the report's trainer_ms_*
  // fields are 0 and `measured` is false.
  bool measure = true;
  int repeat = 5;  // timed runs per program; the median is reported
  // Only tensors cross the cut: goldminer-dw sends a batch as tensors, so a
  // stateless node whose int, list or other non-tensor output the trainer
  // reads (e.g. the `target.size()` of a loss function's check) stays on
  // the trainer. false: such values may cross too (both programs run in
  // one process, as in verify_split).
  bool tensors_only = true;
};

// One value crossing from worker to trainer, measured on the example.
struct CutValue {
  std::string name;   // the value's name in the graph (argument name for inputs)
  std::string dtype;  // torch dtype ("float32", "int64"), or the TorchScript type
  std::vector<int64_t> shape;  // on the example batch; empty for non-tensors
  double bytes_per_sample = 0;
};

// A trainer-side node at the boundary and why it stayed.
struct KeptNode {
  std::string node;    // e.g. "aten::linear"
  std::string reason;  // e.g. "prim::GetAttr bottom.0.weight: parameter"
  int count = 1;       // boundary nodes with the same node and reason
};

// One cut the choice considered, priced at the job's batch size.
struct CandidateCut {
  std::string name;          // "dataset", "min-cost", "max", "min-cost, transfer x4"...
  int nodes_moved = 0;       // model nodes the worker runs
  double bytes_per_sample = 0;
  double trainer_ms = 0;     // stateless nodes left on the trainer, per batch
  double network_ms = 0;     // per batch over the trainer's link
  double host_to_device_ms = 0;  // per batch over PCIe (GPU trainers)
  double total_ms() const { return trainer_ms + network_ms + host_to_device_ms; }
  // Measured CPU ms per example batch of its trainer program and of dataset
  // mode's, interleaved (-1: not measured), and the verdict.
  double measured_trainer_ms = -1;
  double measured_dataset_ms = -1;
  std::string outcome;       // "chosen", "measured slower: ...", "not tried"
};

// What the split did, with its measurements. Plain value type.
struct SplitReport {
  std::string mode;
  std::string method;
  int nodes_total = 0;      // transform + model nodes (nested blocks counted, constants not)
  int nodes_stateless = 0;  // transform nodes + stateless model nodes
  int nodes_moved = 0;      // nodes the worker runs
  int64_t batch_size = 0;   // leading dimension of the first example tensor
  std::vector<CutValue> inputs;  // model inputs: what crosses in dataset mode
  std::vector<CutValue> cut;     // what crosses with this split
  double bytes_per_sample_before = 0;  // dataset mode
  double bytes_per_sample_after = 0;   // this split
  double predicted_ms_saved_per_batch = 0;  // from per-node times and transfer cost
  // Measured (CPU time per batch, median; 0 unless `measured`):
  bool measured = false;
  double transform_ms = 0;       // the transform alone
  double trainer_ms_local = 0;   // transform + model: no offloading at all
  double trainer_ms_dataset = 0; // model on transformed inputs (dataset mode)
  double trainer_ms = 0;         // trainer program of this split
  double worker_ms = 0;          // worker program of this split (one CPU's work)
  double transfer_ms = 0;        // modelled receive cost of the cut per example batch (network + host-to-device)
  double trainer_ms_saved_per_batch = 0;  // trainer_ms_local - trainer_ms
  double analysis_ms = 0;  // graph preparation + classification
  double split_ms = 0;     // example probe + per-node timing + cut choice + extraction
  std::vector<KeptNode> kept;
  // The pricing: for whom, and what it weighed.
  std::string trainer_device;     // "cuda" or "cpu"
  std::string node_costs;         // how trainer-side nodes were priced
  int64_t priced_batch_size = 0;  // the job's batch size
  double link_gbps = 0;           // the trainer's share of the network, GB/s
  std::string link_source;        // where that figure comes from
  double host_to_device_gbps = 0; // 0 for a CPU trainer
  std::vector<CandidateCut> candidates;  // in order of predicted cost
  std::string chosen_because;
  bool fell_back = false;         // measurement overruled the predicted best
};

struct SplitProgram {
  std::shared_ptr<torch::jit::Module> worker;
  std::shared_ptr<torch::jit::Module> trainer;  // holds `model` as submodule "model"
  SplitReport report;
};

// Splits `model` (not modified; the trainer shares its parameter tensors).
// `example` are the inputs of `transform` (or of the model without one).
Expected<SplitProgram> split_module(const torch::jit::Module& model,
                                    const std::vector<c10::IValue>& example,
                                    const torch::jit::Module* transform, const SplitOptions& options);

// The same over serialized programs: `model` and `transform` as written by
// torch.jit.save, `example` as written by torch.save(tuple_of_inputs).
// `transform` may be null. `source` names the inputs in error messages.
struct SerializedSplit {
  std::string worker;   // torch.jit.save bytes
  std::string trainer;
  SplitReport report;
};
struct SplitInputs {
  std::string model, example, transform;  // bytes; transform empty = none
  std::string model_name = "model", example_name = "example", transform_name = "transform";
};
Expected<SerializedSplit> split_serialized(const SplitInputs& inputs, const SplitOptions& options);

// Reads a whole file; the error names the file and strerror(errno).
Expected<std::string> read_file_bytes(const std::string& path);

// Equivalence of a split, checked on fresh copies of every program.
struct Equivalence {
  bool eval_equal = false;        // outputs in eval mode, bit for bit
  bool train_outputs_equal = false;
  bool train_grads_equal = false;  // every parameter gradient
  bool train_buffers_equal = false;  // buffers after the step (BatchNorm stats)
  int parameters = 0;              // parameters compared
  std::string detail;              // first difference, "" if none
  bool ok() const { return eval_equal && train_outputs_equal && train_grads_equal && train_buffers_equal; }
};
Expected<Equivalence> verify_split(const SplitInputs& inputs, const std::string& worker,
                                   const std::string& trainer, const std::string& method,
                                   uint64_t seed);

// Human report and JSON (keys nodes_total, nodes_stateless, nodes_moved,
// cut, bytes_per_sample_before, bytes_per_sample_after,
// trainer_ms_saved_per_batch, kept, and the other fields above).
std::string format_report(const SplitReport& report);
std::string report_json(const SplitReport& report);

// Offload advisor: trainer speedup against doing everything locally, with
// k data workers each running the worker program on one CPU:
//   step(k) = max(trainer_ms + transfer_ms, worker_ms / k)
//   speedup(k) = trainer_ms_local / step(k)
struct AdvicePoint {
  int workers = 0;
  double step_ms = 0;
  double speedup = 0;
};
struct Advice {
  std::vector<AdvicePoint> points;  // k = 0 (no offloading) .. max_workers
  int workers_to_saturate = 0;      // smallest k reaching the trainer bound
  double max_speedup = 1;
  bool helps = false;
  std::string verdict;  // one sentence, says why offloading will not help
};
Expected<Advice> advise(const SplitReport& report, int max_workers);
std::string format_advice(const Advice& advice);

}  // namespace goldminer

#endif  // GOLDMINER_SPLIT_H_
