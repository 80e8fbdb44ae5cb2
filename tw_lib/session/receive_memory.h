// The trainer's receive buffers: pinned for the GPU and placed
// on the NUMA node nearest it. A batch then goes from the network into
// memory that a host-to-device copy can read asynchronously at the link's
// full rate, with no staging copy, and its bytes cross no socket-to-socket
// link on the way to the GPU.
//
//   pin       page-lock each buffer and register it with CUDA
//             (cudaHostRegister, portable: pinned for every context of
//             the process, torch's too). Needs a build --with-cuda and a
//             GPU the CUDA runtime sees; without either a warning says
//             which and the buffers stay pageable.
//   NUMA      kNumaAuto: the node(s) nearest the GPU when one is found
//             (its PCI bus id, from CUDA, located by hwloc), else the
//             kernel's choice; kNumaNone: the kernel's choice (first
//             touch); N >= 0: NUMA node N (its OS index, as numactl names
//             it), an error if there is none.
// Buffers are taken from hwloc_alloc_membind (page-aligned) when bound,
// posix_memalign otherwise; the transport's pool reuses them, so the
// registration (milliseconds per MiB) is paid while it warms up.
#ifndef GOLDMINER_TW_LIB_RECEIVE_MEMORY_H_
#define GOLDMINER_TW_LIB_RECEIVE_MEMORY_H_

#include <memory>
#include <string>
#include <vector>

#include "gmcore/status.h"
#include "mpi_transport/host_memory.h"

namespace goldminer {

struct ReceiveMemoryOptions {
  static constexpr int kNumaAuto = -1;
  static constexpr int kNumaNone = -2;
  bool pin = false;
  int numa_node = kNumaAuto;
  int cuda_device = -1;  // the trainer's GPU; -1: the current one (cudaGetDevice)
};

struct ReceiveMemory {
  std::shared_ptr<transport::HostMemory> memory;
  std::vector<std::string> warnings;  // what was asked for and could not be had, and why
};

// Errors: a NUMA node that does not exist, or a topology hwloc cannot read
// when a node is named.
Expected<ReceiveMemory> make_receive_memory(const ReceiveMemoryOptions& options);

// Whether this build has CUDA (--with-cuda) and the GPUs its runtime sees
// (0 when it has none or the driver is missing; `why` then says which).
int cuda_devices(std::string* why);

}  // namespace goldminer

#endif  // GOLDMINER_TW_LIB_RECEIVE_MEMORY_H_
