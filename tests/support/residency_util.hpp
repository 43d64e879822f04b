// Putting a file's pages in and out of the page cache, one file at a time (never the whole
// system's cache, which other programs on the machine rely on).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

namespace sluice::test {

/// Writes back and drops every page of `path` from the page cache (fdatasync, then fadvise
/// DONTNEED). False when pages stay cached (tmpfs, or pages another process maps).
[[nodiscard]] bool drop_cache(const std::string& path);

/// Reads [offset, offset + size) of `path` with readahead off, so exactly those pages (page
/// aligned outwards) enter the cache.
void make_resident(const std::string& path, std::uint64_t offset, std::uint64_t size);

/// A range of a file mapped and locked (mlock), which keeps its pages in the page cache until
/// the object goes: under memory pressure the kernel may otherwise evict a page a test has just
/// read in, and a residency it asserts exactly ("held 50%") then fails for nothing (seen once in
/// CI, under TSan: "held 49%").
class PinnedRange {
 public:
  PinnedRange() = default;
  PinnedRange(void* addr, std::size_t len) : addr_(addr), len_(len) {}
  PinnedRange(PinnedRange&& o) noexcept
      : addr_(std::exchange(o.addr_, nullptr)), len_(std::exchange(o.len_, 0)) {}
  PinnedRange& operator=(PinnedRange&& o) noexcept;
  PinnedRange(const PinnedRange&) = delete;
  PinnedRange& operator=(const PinnedRange&) = delete;
  ~PinnedRange();

 private:
  void* addr_ = nullptr;
  std::size_t len_ = 0;
};

/// make_resident, then pins the range (offset page aligned). A failure to map or lock it fails
/// the test.
[[nodiscard]] PinnedRange pin_resident(const std::string& path, std::uint64_t offset,
                                       std::uint64_t size);

/// Pages of `path` in the page cache over [offset, offset + size).
[[nodiscard]] std::uint64_t cached_pages(const std::string& path, std::uint64_t offset,
                                         std::uint64_t size);

}  // namespace sluice::test
