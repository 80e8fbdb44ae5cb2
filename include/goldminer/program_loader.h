// How a Session's local data workers (SessionOptions::local_workers) load
// the worker program it ships: a function from the program's bytes to a
// dw::WorkerProgram. The interface itself is internal to the data worker
// (dw_daemon/program.h); the callers that set a loader (the Python
// extension, goldminer-consume) include it and pass one of its loaders.
#ifndef GOLDMINER_INCLUDE_PROGRAM_LOADER_H_
#define GOLDMINER_INCLUDE_PROGRAM_LOADER_H_

#include <functional>
#include <memory>
#include <string>

#include "gmcore/status.h"

namespace goldminer::dw {

class WorkerProgram;  // dw_daemon/program.h

// Loads a program from its serialized bytes (a TorchScript zip, or a
// Python dataset: dw_daemon/python_program.h).
using ProgramLoader = std::function<Expected<std::unique_ptr<WorkerProgram>>(const std::string& bytes)>;

}  // namespace goldminer::dw

#endif  // GOLDMINER_INCLUDE_PROGRAM_LOADER_H_
