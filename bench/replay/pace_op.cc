// gm_bench::pace(x, seconds): sleeps `seconds`, then returns x (the same
// tensor). The live replay (bench/replay) puts it in the data workers'
// TorchScript program to model a job's pre-processing cost per batch in
// wall time without spending CPU: the devcluster runs a few hundred virtual
// CPUs on a 2-core machine, so real work would measure the machine's
// contention, not the allocation. Loaded into goldminer-dw by LD_PRELOAD
// (bench/replay/dw-paced) and into Python by torch.ops.load_library.
#include <torch/library.h>

#include <chrono>
#include <thread>

namespace {

at::Tensor pace(const at::Tensor& x, double seconds) {
  if (seconds > 0) std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  return x;
}

}  // namespace

TORCH_LIBRARY(gm_bench, m) { m.def("pace(Tensor(a) x, float seconds) -> Tensor(a)", &pace); }
