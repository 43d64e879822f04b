// How much of a file range the page cache holds, asked of the kernel without touching the data:
// cachestat(2) (Linux 6.5+) counts the cached pages of a range in one call; where the kernel
// lacks it (or a seccomp filter refuses it) mincore(2) on a mapping of the range does, the
// mapping costing one mmap and no page fault. Reads use it to send the chunks the cache holds
// through the cache and the rest through O_DIRECT (docs/paths.md, "Page cache"); `sluice doctor`
// and `sluice check` report it.
#pragma once

#include <cstdint>
#include <string_view>

#include "sluice/export.hpp"

namespace sluice {

enum class ResidencyMethod : std::uint8_t {
  cachestat,  ///< cachestat(2): cached, dirty and writeback counts of the range
  mincore,    ///< mincore(2) on a mapping of the range: cached counts only
  none,       ///< neither worked (the range counts as not cached)
};

[[nodiscard]] SLUICE_API std::string_view to_string(ResidencyMethod m) noexcept;

/// The answer for one range, in pages of the system page size (a partly covered first or last
/// page counts whole).
struct Residency {
  std::uint64_t pages = 0;   ///< pages of the range
  std::uint64_t cached = 0;  ///< of them, in the page cache
  std::uint64_t dirty = 0;   ///< of them, dirty or under writeback (cachestat only; 0 with mincore)
  ResidencyMethod method = ResidencyMethod::none;

  /// cached / pages, 0 for an empty range.
  [[nodiscard]] double fraction() const noexcept {
    return pages == 0 ? 0.0 : static_cast<double>(cached) / static_cast<double>(pages);
  }
};

/// Probes sub-ranges of one range of an open file, many times and from many threads: with
/// cachestat each probe is one system call; with mincore the constructor maps the range once
/// (PROT_READ, nothing faulted in) and each probe reads that mapping's residency.
class SLUICE_API ResidencyProbe {
 public:
  /// `fd` must be readable and stay open while the probe lives. A range of size 0 probes nothing.
  /// `prefer`: cachestat (where the kernel answers it, else mincore) or mincore (always; tests
  /// use it to run the fallback on kernels that have cachestat).
  ResidencyProbe(int fd, std::uint64_t offset, std::uint64_t size,
                 ResidencyMethod prefer = ResidencyMethod::cachestat);
  ~ResidencyProbe();
  ResidencyProbe(const ResidencyProbe&) = delete;
  ResidencyProbe& operator=(const ResidencyProbe&) = delete;

  /// [offset, offset + size), which must lie inside the constructor's range. Costs in proportion
  /// to the pages the cache holds (cachestat visits each: ~15 us for a cached MiB, 0.4 us for an
  /// uncached one, on a busy 2-core VM).
  [[nodiscard]] Residency probe(std::uint64_t offset, std::uint64_t size) const noexcept;
  /// The same answer, cheaper for large ranges, which are nearly always wholly cached or wholly
  /// not: the first and last `edge_bytes` are probed, and the whole range only when those two
  /// disagree (one at least half cached, the other not). When they agree, `cached` is their
  /// count scaled to the range: an estimate that misses a hole in the middle.
  [[nodiscard]] Residency probe_edges(std::uint64_t offset, std::uint64_t size) const noexcept;
  static constexpr std::uint64_t edge_bytes = 64 << 10;
  [[nodiscard]] ResidencyMethod method() const noexcept { return method_; }

 private:
  int fd_;
  std::uint64_t map_offset_ = 0;  // file offset of map_ (page aligned)
  std::size_t map_size_ = 0;
  void* map_ = nullptr;
  ResidencyMethod method_ = ResidencyMethod::none;
};

/// One probe of [offset, offset + size) of `fd`; size 0 means to the end of a regular file.
[[nodiscard]] SLUICE_API Residency page_cache_residency(int fd, std::uint64_t offset,
                                                        std::uint64_t size);

/// Whether this kernel answers cachestat(2) (asked once per process).
[[nodiscard]] SLUICE_API bool have_cachestat() noexcept;

}  // namespace sluice
