// Built when configure found no libtorch (--without-torch): workers send
// decoded batches only, and say why a program cannot run.
#include "dw_daemon/program.h"

namespace goldminer::dw {

Expected<std::unique_ptr<WorkerProgram>> load_torchscript(const std::string&, int) {
  return Status::error("program: this goldminer-dw was built without libtorch (configure --with-torch)");
}

}  // namespace goldminer::dw
