#include "mpi_transport/buffer_pool.h"

#include <cstdlib>

namespace goldminer::transport {
namespace {

constexpr size_t kAlignment = 64;

class Pageable final : public HostMemory {
 public:
  uint8_t* allocate(size_t bytes) override {
    void* p = nullptr;
    return posix_memalign(&p, kAlignment, bytes) == 0 ? static_cast<uint8_t*>(p) : nullptr;
  }
  void release(uint8_t* data, size_t) override { std::free(data); }
};

constexpr size_t kMinClass = 4096;

size_t size_class(size_t size) {
  size_t c = kMinClass;
  while (c < size) c <<= 1;
  return c;
}

}  // namespace

PooledFrame::~PooledFrame() { pool_->give_back(data_, capacity_); }

std::shared_ptr<HostMemory> pageable_memory() {
  static const std::shared_ptr<HostMemory> memory = std::make_shared<Pageable>();
  return memory;
}

std::shared_ptr<BufferPool> BufferPool::create(size_t max_cached_bytes, std::shared_ptr<HostMemory> memory) {
  return std::shared_ptr<BufferPool>(
      new BufferPool(max_cached_bytes, memory != nullptr ? std::move(memory) : pageable_memory()));
}

BufferPool::~BufferPool() {
  for (auto& [capacity, data] : free_) memory_->release(data, capacity);
}

std::unique_ptr<PooledFrame> BufferPool::take(size_t size) {
  const size_t capacity = size_class(size);
  uint8_t* data = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.find(capacity);
    if (it != free_.end()) {
      data = it->second;
      free_.erase(it);
      cached_ -= capacity;
      ++stats_.reuses;
    } else {
      ++stats_.allocations;
    }
  }
  if (data == nullptr && (data = memory_->allocate(capacity)) == nullptr) return nullptr;
  return std::make_unique<PooledFrame>(shared_from_this(), data, capacity, size);
}

void BufferPool::give_back(uint8_t* data, size_t capacity) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (cached_ + capacity <= max_cached_) {
      free_.emplace(capacity, data);
      cached_ += capacity;
      return;
    }
  }
  memory_->release(data, capacity);
}

BufferPool::Stats BufferPool::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace goldminer::transport
