#include "mpi_transport/buffer_pool.h"

#include <cstdlib>
#include <iterator>
#include <utility>
#include <vector>

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

std::shared_ptr<BufferPool> BufferPool::create(size_t max_cached_bytes, std::shared_ptr<HostMemory> memory,
                                               uint64_t budget) {
  return std::shared_ptr<BufferPool>(
      new BufferPool(max_cached_bytes, memory != nullptr ? std::move(memory) : pageable_memory(), budget));
}

BufferPool::~BufferPool() {
  for (auto& [capacity, data] : free_) memory_->release(data, capacity);
}

bool BufferPool::beyond_budget(size_t size) const { return size_class(size) > budget_; }

std::unique_ptr<PooledFrame> BufferPool::take(size_t size, bool within_budget, bool* over_budget) {
  const size_t capacity = size_class(size);
  uint8_t* data = nullptr;
  bool fresh = false;
  std::vector<std::pair<size_t, uint8_t*>> evicted;  // released outside the lock
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.find(capacity);
    if (it != free_.end()) {
      data = it->second;
      free_.erase(it);
      cached_ -= capacity;
      ++stats_.reuses;
    } else {
      // Room for a fresh buffer: cached ones of other sizes go first,
      // the largest first.
      while (within_budget && held_ + capacity > budget_ && !free_.empty()) {
        auto last = std::prev(free_.end());
        evicted.emplace_back(last->first, last->second);
        cached_ -= last->first;
        held_ -= last->first;
        free_.erase(last);
      }
      if (within_budget && held_ + capacity > budget_) {
        ++stats_.over_budget;
        if (over_budget != nullptr) *over_budget = true;
      } else {
        held_ += capacity;  // given back below if the allocation fails
        ++stats_.allocations;
        fresh = true;
      }
    }
  }
  for (auto& [c, d] : evicted) memory_->release(d, c);
  if (fresh && (data = memory_->allocate(capacity)) == nullptr) {
    std::lock_guard<std::mutex> lock(mu_);
    held_ -= capacity;
  }
  if (data == nullptr) return nullptr;
  return std::make_unique<PooledFrame>(shared_from_this(), data, capacity, size);
}

void BufferPool::give_back(uint8_t* data, size_t capacity) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Over the budget (frames taken not within it): release, not cache.
    if (cached_ + capacity <= max_cached_ && held_ <= budget_) {
      free_.emplace(capacity, data);
      cached_ += capacity;
      return;
    }
    held_ -= capacity;
  }
  memory_->release(data, capacity);
}

BufferPool::Stats BufferPool::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  Stats s = stats_;
  s.held_bytes = held_;
  return s;
}

}  // namespace goldminer::transport
