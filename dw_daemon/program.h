// The worker program a data worker runs on every batch, behind an interface
// so that the daemon's loop needs no torch header: the TorchScript runner
// (torch_program.cc) is the one implementation that includes libtorch.
#ifndef GOLDMINER_DW_DAEMON_PROGRAM_H_
#define GOLDMINER_DW_DAEMON_PROGRAM_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gmcore/status.h"
#include "gmcore/tensor.h"
#include "goldminer/program_loader.h"
#include "readers/reader.h"

namespace goldminer::dw {

// The tensors a program returned; their bytes are valid while the object
// lives.
class ProgramOutput {
 public:
  virtual ~ProgramOutput() = default;
  virtual const std::vector<wire::TensorView>& tensors() const = 0;
};

// One batch a program made itself, and the identity of its samples.
struct GeneratedBatch {
  std::unique_ptr<ProgramOutput> output;
  std::vector<uint64_t> records;  // per sample, its place in the split's stream
};

// A split's batches as a program makes them (BatchGenerator: one split,
// one thread).
class BatchGenerator {
 public:
  virtual ~BatchGenerator() = default;
  // Batch `index` of the split (asked 0, 1, ... in order; asking further
  // ahead skips the batches between, made and dropped), or nothing past
  // its end. The output stays valid until the next call.
  virtual Expected<std::optional<GeneratedBatch>> next(uint64_t index) = 0;
};

// Thread-safe: worker threads call run() concurrently.
class WorkerProgram {
 public:
  virtual ~WorkerProgram() = default;
  // Runs the program on the reader's batch (its tensors in order, viewed
  // without a copy). `seed` seeds the program's random ops for this batch,
  // so a re-run split yields identical batches; `epoch` is the lease's
  // (a Python dataset's sampler order depends on it).
  virtual Expected<std::unique_ptr<ProgramOutput>> run(const readers::Batch& batch, uint64_t seed,
                                                       uint32_t epoch) = 0;
  // Whether calls run one at a time: a program that may draw random
  // numbers does, because torch's generator is process-wide and each
  // batch must see its own seed; any other runs on all the worker's
  // threads at once.
  virtual bool serializes_calls() const { return false; }
  // Makes the program ready to serve `calls` calls at once, before the
  // worker asks for its first split (a Python program starts its
  // processes, seconds each, side by side): the trainer then sees a worker
  // that asks for work as one whose producers have all started, and
  // measures it from its first batch at its whole rate. What fails here is
  // left for run() to meet.
  virtual void warm_up(int calls) { (void)calls; }
  // Whether the program makes each split's batches itself instead of
  // transforming the reader's (a Python IterableDataset: the split's first
  // record is its shard); then the worker calls generate(), not run().
  virtual bool generates_batches() const { return false; }
  virtual Expected<std::unique_ptr<BatchGenerator>> generate(const readers::SplitRange& split, uint64_t seed,
                                                             uint32_t epoch) {
    (void)split, (void)seed, (void)epoch;
    return Status::error("this program does not make batches itself");
  }
};

// ProgramLoader, how a program is loaded from its bytes, is public (a
// Session's local workers take one): include/goldminer/program_loader.h.

// The TorchScript loader; `threads` = intra-op threads per call. An error
// when the daemon was built without libtorch.
Expected<std::unique_ptr<WorkerProgram>> load_torchscript(const std::string& bytes, int threads);

}  // namespace goldminer::dw

#endif  // GOLDMINER_DW_DAEMON_PROGRAM_H_
