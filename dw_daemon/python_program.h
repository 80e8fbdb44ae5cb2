// A user's Python Dataset as a data worker's program (goldminer.DataLoader,
// python/goldminer/dataloader.py). Torch-free on this side: the dataset
// runs in Python processes that goldminer-dw starts, one per producer
// thread that calls run() at once, fed over a pipe.
//
// The program bytes (made by the trainer):
//   "GOLDMINER-PYTHON 1\n"
//   "python=PATH\n"     the interpreter ($GOLDMINER_PYTHON overrides it here)
//   "path=DIR\n"...     the trainer's sys.path, put before the child's
//   "mode=map|iterable" optional (map): iterable is an IterableDataset, whose
//                       shards (the split's record) make their own batches
//   "main=FILE\n"       optional: the training script, loaded as __mp_main__
//                       so that classes it defines unpickle (as torch's
//                       DataLoader does with the "spawn" start method)
//   "\n" + pickle       {dataset, collate_fn, sampler, shuffle, seed, ...}
// The child is `python -m goldminer._dw_child` (python/goldminer/_dw_child.py
// documents the protocol): requests and replies over a pipe, the batches'
// bytes in a memfd both map. Each batch of the "index" reader is a list of
// positions in the epoch's sampler order; the child returns the collated
// batch as tensors, the first one its structure as JSON (goldminer/_tree.py
// to_wire: the trainer never unpickles what a worker sends). A child serves
// one batch at a time: its output's tensors stay valid (in its memory)
// until the worker drops the output, which hands the child back.
//
// Errors: the dataset's own (an exception it raises) are the input's; a
// child that died (killed by the OOM killer, say) or an error of the
// machine the dataset raised (MemoryError, an OSError such as EIO) are
// environment errors (Status::environment_error): the worker gives the
// split back to be re-run and goes on, a new child replacing a dead one.
#ifndef GOLDMINER_DW_DAEMON_PYTHON_PROGRAM_H_
#define GOLDMINER_DW_DAEMON_PYTHON_PROGRAM_H_

#include <memory>
#include <string>

#include "dw_daemon/program.h"

namespace goldminer::dw {

extern const char* const kPythonProgramMagic;  // "GOLDMINER-PYTHON 1\n"

bool is_python_program(const std::string& bytes);

// Checks the header and starts one child (so that a bad interpreter or an
// unpicklable dataset fails here, with the child's error).
Expected<std::unique_ptr<WorkerProgram>> load_python_program(const std::string& bytes);

}  // namespace goldminer::dw

#endif  // GOLDMINER_DW_DAEMON_PYTHON_PROGRAM_H_
