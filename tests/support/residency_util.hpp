// Putting a file's pages in and out of the page cache, one file at a time (never the whole
// system's cache, which other programs on the machine rely on).
#pragma once

#include <cstdint>
#include <string>

namespace sluice::test {

/// Writes back and drops every page of `path` from the page cache (fdatasync, then fadvise
/// DONTNEED). False when pages stay cached (tmpfs, or pages another process maps).
[[nodiscard]] bool drop_cache(const std::string& path);

/// Reads [offset, offset + size) of `path` with readahead off, so exactly those pages (page
/// aligned outwards) enter the cache.
void make_resident(const std::string& path, std::uint64_t offset, std::uint64_t size);

/// Pages of `path` in the page cache over [offset, offset + size).
[[nodiscard]] std::uint64_t cached_pages(const std::string& path, std::uint64_t offset,
                                         std::uint64_t size);

}  // namespace sluice::test
