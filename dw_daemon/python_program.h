// A worker program run by the job's own Python: a user's Python Dataset
// (goldminer.DataLoader, python/goldminer/dataloader.py), or a TorchScript
// program wrapped by goldminer.Session so that it runs with the trainer's
// torch rather than the libtorch goldminer-dw links. Torch-free on this
// side: the program runs in Python processes that goldminer-dw starts, one
// per producer thread that calls run() at once, fed over its stdin.
//
// The program bytes (made by the trainer):
//   "GOLDMINER-PYTHON 1\n"
//   "python=PATH\n"     the interpreter (load_python_program's `python` overrides it)
//   "path=DIR\n"...     the trainer's sys.path, put before the child's
//   "mode=M\n"          optional: map (the default), iterable (an
//                       IterableDataset, whose shards (the split's record)
//                       make their own batches) or torchscript
//   "torch=VERSION\n"   mode torchscript: the trainer's torch.__version__
//   "main=FILE\n"       optional: the training script, loaded as __mp_main__
//                       so that classes it defines unpickle (as torch's
//                       DataLoader does with the "spawn" start method)
//   "runtime=R\n"       optional, with image=: enroot (the default) or ch-run
//   "image=IMAGE\n"     optional: the trainer's container image, which
//                       goldminer-dw enters to start each child there
//                       (python_child_command.h): its python, torch and
//                       modules run the program
//   "mount=SRC:DST\n"...  optional: the trainer's mounts, mounted again
//   "\n" + payload      the pickle {dataset, collate_fn, sampler, shuffle,
//                       seed, ...}, or (torchscript) the TorchScript zip
// The child is `python -m goldminer._dw_child` (python/goldminer/_dw_pipe.py
// documents the protocol): requests down a Unix socket on its stdin,
// replies up a pipe on its stdout, the batches' bytes in a memfd both map,
// which the socket carries first (SCM_RIGHTS) with a TorchScript child's
// input memfd. The child needs no descriptor above 2, so `python` may be a
// container runtime's wrapper that closes them. A child serves one batch
// at a time: its output's tensors stay valid (in its memory) until the
// worker drops the output, which hands the child back.
//
// A dataset: each batch of the "index" reader is a list of positions in the
// epoch's sampler order; the child returns the collated batch as tensors,
// the first one its structure as JSON (goldminer/_tree.py to_wire: the
// trainer never unpickles what a worker sends).
//
// A TorchScript program (python/goldminer/_dw_script.py): the reader's
// tensors go to the child through a second memfd; the child runs
// torch.jit.load(payload).forward(*tensors) as torch_program.cc runs it in
// process (torch.manual_seed(seed) first, the same outputs and dtype rules,
// intra-op threads as given), and returns its output tensors. Calls do not
// serialize: each child has its own torch generator, seeded per batch, so a
// re-run split gives identical batches while the children run side by side.
// A program the child's torch cannot load fails at load, naming both torch
// versions.
//
// Errors: the program's own (an exception the dataset or forward raises)
// are the input's; a child that died (killed by the OOM killer, say) or an
// error of the machine the program raised (MemoryError, an OSError such as
// EIO, torch's allocator out of memory) are environment errors
// (Status::environment_error): the worker gives the split back to be re-run
// and goes on, a new child replacing a dead one.
#ifndef GOLDMINER_DW_DAEMON_PYTHON_PROGRAM_H_
#define GOLDMINER_DW_DAEMON_PYTHON_PROGRAM_H_

#include <memory>
#include <string>

#include "dw_daemon/program.h"

namespace goldminer::dw {

extern const char* const kPythonProgramMagic;  // "GOLDMINER-PYTHON 1\n"

bool is_python_program(const std::string& bytes);

// Checks the header and starts one child (so that a bad interpreter, an
// unpicklable dataset or a TorchScript program the job's torch cannot load
// fails here, with the child's error). `threads`: intra-op threads of each
// TorchScript child (torch.set_num_threads), as load_torchscript's.
// `python`: the interpreter to run instead of the header's (goldminer-dw's
// GOLDMINER_PYTHON); "" = the header's. `enter_container`: the header's
// container image (runtime=, image=, mount=) is entered to start each
// child (goldminer-dw on the host: python_child_command.h); false where
// this process runs inside that image already (the trainer's own workers),
// which then runs the header's interpreter as it is.
Expected<std::unique_ptr<WorkerProgram>> load_python_program(const std::string& bytes, int threads = 1,
                                                             const std::string& python = "",
                                                             bool enter_container = false);

}  // namespace goldminer::dw

#endif  // GOLDMINER_DW_DAEMON_PYTHON_PROGRAM_H_
