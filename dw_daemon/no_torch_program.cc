// The TorchScript loader of what links no libtorch: goldminer-dw built
// --without-torch (its workers send decoded batches only) and the Python
// extension goldminer._session, whose local threads run TorchScript only as
// goldminer/session.py wraps it for a Python child. Says why a program
// cannot run here.
#include "dw_daemon/program.h"

namespace goldminer::dw {

Expected<std::unique_ptr<WorkerProgram>> load_torchscript(const std::string&, int) {
  return Status::error("program: a raw TorchScript program cannot run here: this was built without libtorch (goldminer-dw: configure --with-torch; goldminer._session: goldminer.Session hands TorchScript to a Python child)");
}

}  // namespace goldminer::dw
