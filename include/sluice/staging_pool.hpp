// A fixed set of equally sized, aligned staging buffers, allocated once as one region (so an
// io_uring can register the whole pool as a single fixed buffer). Memory does not grow with
// file size or request count (DESIGN.md principle 4). The allocator is pluggable so the GPU
// layer can back the same pool with pinned host memory.
#pragma once

#include <sys/uio.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <vector>

#include "sluice/export.hpp"

namespace sluice {

struct PoolMemory {
  std::function<void*(std::size_t bytes)> allocate;   ///< must return 4096-aligned memory
  std::function<void(void* p, std::size_t bytes)> release;
};

/// Page-aligned anonymous memory (mmap), the default for host staging.
[[nodiscard]] SLUICE_API PoolMemory host_pool_memory();

class SLUICE_API StagingPool {
 public:
  struct Lease {
    std::byte* data = nullptr;
    unsigned index = 0;
  };

  StagingPool(unsigned count, std::size_t buffer_size, PoolMemory memory = host_pool_memory());
  ~StagingPool();
  StagingPool(const StagingPool&) = delete;
  StagingPool& operator=(const StagingPool&) = delete;

  /// A free buffer, or nullopt when all are in use.
  [[nodiscard]] std::optional<Lease> try_acquire();
  /// A free buffer, waiting for one to be released.
  [[nodiscard]] Lease acquire();
  void release(const Lease& lease);

  [[nodiscard]] std::size_t buffer_size() const noexcept { return buffer_size_; }
  [[nodiscard]] unsigned count() const noexcept { return count_; }
  [[nodiscard]] unsigned in_use() const;
  /// Most buffers ever in use at once.
  [[nodiscard]] unsigned high_water() const;
  /// Threads blocked in acquire() now, waiting for a release.
  [[nodiscard]] unsigned waiters() const;
  /// Bytes the pool holds (count * buffer_size), fixed for its lifetime.
  [[nodiscard]] std::size_t bytes() const noexcept { return count_ * buffer_size_; }
  /// The whole region as one iovec, for io_uring buffer registration (fixed-buffer index 0).
  [[nodiscard]] const iovec& region() const noexcept { return region_; }
  /// Unique per pool instance, so engines know which pool they registered.
  [[nodiscard]] std::uint64_t id() const noexcept { return id_; }

 private:
  Lease take_locked();

  unsigned count_;
  std::size_t buffer_size_;
  PoolMemory memory_;
  std::byte* base_ = nullptr;
  iovec region_{};
  std::uint64_t id_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<unsigned> free_;
  unsigned high_water_ = 0;
  unsigned waiters_ = 0;
};

/// The process-wide host staging pool: `staging_buffers` buffers of `io_size`, from the
/// configuration at first use. Made (and its memory mapped and faulted in: 64 MiB by default)
/// only when a transfer needs staging, never just to learn its buffer size.
SLUICE_API StagingPool& host_staging_pool();
/// The host staging pool's buffer size: the pool's once it exists, else the `io_size` it would
/// be made with now.
SLUICE_API std::size_t host_staging_buffer_size();

}  // namespace sluice
