#include "mpi_transport/buffer_pool.h"

#include <cstdlib>

namespace goldminer::transport {
namespace {

constexpr size_t kAlignment = 64;
constexpr size_t kMinClass = 4096;

size_t size_class(size_t size) {
  size_t c = kMinClass;
  while (c < size) c <<= 1;
  return c;
}

}  // namespace

PooledFrame::~PooledFrame() { pool_->give_back(data_, capacity_); }

std::shared_ptr<BufferPool> BufferPool::create(size_t max_cached_bytes) {
  return std::shared_ptr<BufferPool>(new BufferPool(max_cached_bytes));
}

BufferPool::~BufferPool() {
  for (auto& [capacity, data] : free_) std::free(data);
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
  if (data == nullptr) {
    void* p = nullptr;
    if (posix_memalign(&p, kAlignment, capacity) != 0) return nullptr;
    data = static_cast<uint8_t*>(p);
  }
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
  std::free(data);
}

BufferPool::Stats BufferPool::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace goldminer::transport
