// Reusable 64-byte aligned receive buffers. A received frame of N bytes
// takes a buffer of the next power-of-two size class from the pool and
// gives it back when its last holder drops it, so a steady stream of like
// batches allocates (and page-faults, or registers with CUDA) only while
// the pool warms up. Buffers come from a HostMemory (host_memory.h). The
// pool may have a byte budget: what it holds (buffers in frames not yet
// dropped, plus cached free ones) stays within it for takes that ask so.
// Thread-safe.
#ifndef GOLDMINER_MPI_TRANSPORT_BUFFER_POOL_H_
#define GOLDMINER_MPI_TRANSPORT_BUFFER_POOL_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "mpi_transport/host_memory.h"
#include "mpi_transport/transport.h"

namespace goldminer::transport {

class BufferPool;

// A frame whose bytes live in a pooled buffer; writable until shared.
class PooledFrame final : public Frame {
 public:
  PooledFrame(std::shared_ptr<BufferPool> pool, uint8_t* data, size_t capacity, size_t size)
      : pool_(std::move(pool)), data_(data), capacity_(capacity), size_(size) {}
  ~PooledFrame() override;
  PooledFrame(const PooledFrame&) = delete;
  PooledFrame& operator=(const PooledFrame&) = delete;

  const uint8_t* data() const override { return data_; }
  size_t size() const override { return size_; }
  uint8_t* mutable_data() { return data_; }

 private:
  std::shared_ptr<BufferPool> pool_;
  uint8_t* data_;
  size_t capacity_;
  size_t size_;
};

class BufferPool : public std::enable_shared_from_this<BufferPool> {
 public:
  // Keeps at most `max_cached_bytes` of free buffers; takes them from
  // `memory` (null: pageable_memory()); holds at most `budget` bytes for
  // takes within_budget (none: no limit).
  static std::shared_ptr<BufferPool> create(size_t max_cached_bytes = size_t{1} << 30,
                                            std::shared_ptr<HostMemory> memory = nullptr,
                                            uint64_t budget = UINT64_MAX);
  ~BufferPool();

  // A frame of `size` bytes (contents undefined); nullptr if out of memory
  // or, `within_budget`, if it would take the pool over its budget (cached
  // buffers of other sizes are given back first to make room; then
  // `*over_budget` is set, when given). A take not within_budget is
  // counted but never refused for the budget.
  std::unique_ptr<PooledFrame> take(size_t size, bool within_budget = false, bool* over_budget = nullptr);

  // Whether a frame of `size` bytes could never be taken within_budget
  // (its buffer alone exceeds the budget).
  bool beyond_budget(size_t size) const;

  struct Stats {
    uint64_t allocations = 0;  // fresh buffers (misses)
    uint64_t reuses = 0;       // hits
    uint64_t held_bytes = 0;   // now: in frames and cached
    uint64_t over_budget = 0;  // takes within_budget refused for the budget
  };
  Stats stats() const;

 private:
  friend class PooledFrame;
  BufferPool(size_t max_cached_bytes, std::shared_ptr<HostMemory> memory, uint64_t budget)
      : max_cached_(max_cached_bytes), memory_(std::move(memory)), budget_(budget) {}
  void give_back(uint8_t* data, size_t capacity);

  mutable std::mutex mu_;
  std::multimap<size_t, uint8_t*> free_;  // capacity -> buffer
  size_t cached_ = 0;
  size_t max_cached_;
  std::shared_ptr<HostMemory> memory_;
  uint64_t budget_;
  uint64_t held_ = 0;  // allocated from memory_ and not released to it
  Stats stats_;
};

}  // namespace goldminer::transport

#endif  // GOLDMINER_MPI_TRANSPORT_BUFFER_POOL_H_
