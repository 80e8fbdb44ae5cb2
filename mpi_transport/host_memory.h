// Where a transport's receive buffers come from. The default is pageable
// memory (posix_memalign); the trainer session may hand its endpoint
// another source: pinned (page-locked and registered with CUDA, so that a
// host-to-device copy from a received batch runs asynchronously and at the
// link's full rate) and/or bound to a NUMA node (the one nearest the
// trainer's GPU). The pool (buffer_pool.h) keeps buffers and reuses them,
// so whatever a source costs per allocation (registration is slow) is paid
// while the pool warms up, not per batch.
#ifndef GOLDMINER_MPI_TRANSPORT_HOST_MEMORY_H_
#define GOLDMINER_MPI_TRANSPORT_HOST_MEMORY_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace goldminer::transport {

class HostMemory {
 public:
  virtual ~HostMemory() = default;
  // `bytes` of memory aligned to 64 bytes (contents undefined), or nullptr
  // if none can be had. Thread-safe.
  virtual uint8_t* allocate(size_t bytes) = 0;
  // Gives back what allocate(bytes) returned. Thread-safe.
  virtual void release(uint8_t* data, size_t bytes) = 0;
  // Whether allocate() returns page-locked memory a GPU may copy from
  // asynchronously. A transport that would otherwise hand over frames in
  // memory it did not take from here (the ucx trainer's shared-memory
  // arenas) does not when this is true.
  virtual bool pinned() const { return false; }
  // One line for logs and metrics: "pageable", "pinned, NUMA node 1", ...
  virtual std::string describe() const { return "pageable"; }
};

// posix_memalign / free.
std::shared_ptr<HostMemory> pageable_memory();

}  // namespace goldminer::transport

#endif  // GOLDMINER_MPI_TRANSPORT_HOST_MEMORY_H_
