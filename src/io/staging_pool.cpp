#include "sluice/staging_pool.hpp"

#include <atomic>
#include <cerrno>

#include "sluice/config.hpp"
#include "sluice/error.hpp"
#include "sluice/host_memory.hpp"

namespace sluice {

PoolMemory host_pool_memory() {
  return {[](std::size_t bytes) { return map_host_memory(bytes); },
          [](void* p, std::size_t bytes) { unmap_host_memory(p, bytes); }};
}

StagingPool::StagingPool(unsigned count, std::size_t buffer_size, PoolMemory memory)
    : count_(count), buffer_size_(buffer_size), memory_(std::move(memory)) {
  static std::atomic<std::uint64_t> next_id{1};
  id_ = next_id.fetch_add(1);
  if (count_ == 0 || buffer_size_ == 0 || buffer_size_ % 4096 != 0) {
    throw_usage_error({.op = "staging pool"}, "need at least one buffer of a multiple of 4 KiB");
  }
  base_ = static_cast<std::byte*>(memory_.allocate(bytes()));
  region_ = {base_, bytes()};
  free_.reserve(count_);
  for (unsigned i = count_; i > 0; --i) free_.push_back(i - 1);
}

StagingPool::~StagingPool() {
  if (base_ != nullptr) memory_.release(base_, bytes());
}

std::optional<StagingPool::Lease> StagingPool::try_acquire() {
  std::lock_guard lock(mutex_);
  if (free_.empty()) return std::nullopt;
  return take_locked();
}

StagingPool::Lease StagingPool::take_locked() {
  const unsigned i = free_.back();
  free_.pop_back();
  high_water_ = std::max(high_water_, count_ - static_cast<unsigned>(free_.size()));
  return Lease{base_ + i * buffer_size_, i};
}

StagingPool::Lease StagingPool::acquire() {
  std::unique_lock lock(mutex_);
  if (free_.empty()) {
    ++waiters_;
    cv_.wait(lock, [this] { return !free_.empty(); });
    --waiters_;
  }
  return take_locked();
}

void StagingPool::release(const Lease& lease) {
  {
    std::lock_guard lock(mutex_);
    free_.push_back(lease.index);
  }
  cv_.notify_one();
}

unsigned StagingPool::in_use() const {
  std::lock_guard lock(mutex_);
  return count_ - static_cast<unsigned>(free_.size());
}

unsigned StagingPool::high_water() const {
  std::lock_guard lock(mutex_);
  return high_water_;
}

unsigned StagingPool::waiters() const {
  std::lock_guard lock(mutex_);
  return waiters_;
}

namespace {
std::atomic<StagingPool*> host_pool{nullptr};
}  // namespace

StagingPool& host_staging_pool() {
  // Leaked on purpose: pool threads may still use it while static destructors run.
  static StagingPool* const pool = [] {
    auto cfg = config();
    auto* p = new StagingPool(cfg->staging_buffers, cfg->io_size);
    host_pool.store(p, std::memory_order_release);
    return p;
  }();
  return *pool;
}

std::size_t host_staging_buffer_size() {
  const StagingPool* p = host_pool.load(std::memory_order_acquire);
  return p != nullptr ? p->buffer_size() : config()->io_size;
}

}  // namespace sluice
