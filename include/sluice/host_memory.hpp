// Page-aligned host memory for staging and simulated device memory: 2 MiB aligned, backed by
// transparent huge pages where the kernel allows (madvise), and populated up front. Fewer,
// larger physical segments per I/O matter: a 1 MiB O_DIRECT read into 4 KiB pages carries 256
// scatter-gather entries, more than many devices take in one request (virtio-blk: 254), and
// was measured at half the throughput of the same read into huge pages (bench/host-vs-fio.sh).
#pragma once

#include <cstddef>
#include <utility>

#include "sluice/export.hpp"

namespace sluice {

/// Maps `bytes` (rounded up to 4 KiB) of zeroed, populated memory. Throws an Error on failure.
/// A fresh mapping each time, never recycled heap memory: pages already faulted in as 4 KiB
/// pages stay 4 KiB pages whatever madvise says later, so a buffer taken from a heap that an
/// earlier run had touched read 64 KiB O_DIRECT blocks at a quarter of the speed.
/// `huge_pages` false: 4 KiB pages (MADV_NOHUGEPAGE), as malloc'd buffers usually have.
/// `populate` false: the pages are faulted in by whoever first writes them (a load's parallel
/// reads) instead of here, on one thread: on a VM whose host takes freed guest memory back (free
/// page reporting), first touch is the cost of fresh memory, and spread over the readers it
/// halved a warm 0.8 GB load here (docs/paths.md, "Loads into host memory").
[[nodiscard]] SLUICE_API void* map_host_memory(std::size_t bytes, bool huge_pages = true,
                                               bool populate = true);
/// Unmaps memory from map_host_memory; `bytes` as given there.
SLUICE_API void unmap_host_memory(void* p, std::size_t bytes) noexcept;

/// Owns one map_host_memory mapping; unmaps it when destroyed. Move-only (a moved-from one owns
/// nothing).
class HostMapping {
 public:
  explicit HostMapping(std::size_t bytes, bool huge_pages = true, bool populate = true)
      : bytes_(bytes), p_(static_cast<std::byte*>(map_host_memory(bytes, huge_pages, populate))) {}
  HostMapping(const HostMapping&) = delete;
  HostMapping& operator=(const HostMapping&) = delete;
  HostMapping(HostMapping&& o) noexcept
      : bytes_(std::exchange(o.bytes_, 0)), p_(std::exchange(o.p_, nullptr)) {}
  HostMapping& operator=(HostMapping&& o) noexcept {
    if (this != &o) {
      unmap_host_memory(p_, bytes_);
      bytes_ = std::exchange(o.bytes_, 0);
      p_ = std::exchange(o.p_, nullptr);
    }
    return *this;
  }
  ~HostMapping() { unmap_host_memory(p_, bytes_); }
  [[nodiscard]] std::byte* get() const noexcept { return p_; }
  [[nodiscard]] std::size_t size() const noexcept { return bytes_; }

 private:
  std::size_t bytes_;
  std::byte* p_;
};

}  // namespace sluice
