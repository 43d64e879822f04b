// Writing files back and dropping their page cache, or filling it. With the I/O engines and File,
// the only code that calls fsync, fdatasync, sync and posix_fadvise(DONTNEED): transfers
// (SyncMode), `sluice bench`'s cold and warm runs and --drop-caches, and `sluice doctor`'s
// cold-cache probes all come here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sluice/export.hpp"

namespace sluice {

/// fsync (`with_metadata`) or fdatasync of `fd`, resumed after EINTR: 0, or the errno.
[[nodiscard]] SLUICE_API int sync_fd(int fd, bool with_metadata) noexcept;

/// fdatasync of each of `files` that opens for reading (the others are skipped), so that the
/// writeback of a fresh layout does not slow what runs next.
SLUICE_API void sync_files(const std::vector<std::string>& files) noexcept;

/// How much a drop may touch. Two callers, two needs: a benchmark wants the cold start its peers
/// measure (fio and IOR users drop the whole cache, metadata included), a diagnosis on a user's
/// machine must change nothing but the clean cache of the files it names.
enum class DropScope : std::uint8_t {
  /// Only `files`: each is fdatasync'ed (dirty pages cannot be dropped), then
  /// posix_fadvise(DONTNEED). Never anything else (sluice doctor).
  files,
  /// sync() of every filesystem, then as root the whole page cache, dentries and inodes
  /// (vm.drop_caches = 3); without root (or where the write is refused) posix_fadvise(DONTNEED) on
  /// each of `files` (sluice bench --drop-caches).
  system,
};

/// Drops the clean page cache as `scope` says; files that do not open are skipped. Returns how,
/// for the record: "drop_caches (echo 3 > /proc/sys/vm/drop_caches)", "posix_fadvise(DONTNEED)
/// on each file (not root)" or "fdatasync, then posix_fadvise(DONTNEED) on each file".
SLUICE_API std::string drop_page_cache(const std::vector<std::string>& files, DropScope scope);

/// fdatasync of `fd` (dirty pages cannot be dropped), then posix_fadvise(DONTNEED) of
/// [offset, offset + size): what fio's invalidate=1 does before a job. 0, or the errno of the
/// first call that failed. Pages that another process maps or locks, and tmpfs pages, stay: ask
/// page_cache_residency (sluice/residency.hpp) what is left.
[[nodiscard]] SLUICE_API int evict_range(int fd, std::uint64_t offset, std::uint64_t size) noexcept;

/// Reads [offset, offset + size) of `fd`, a buffered descriptor, through the page cache (1 MiB
/// preads into a scratch buffer), so that the range is resident as after a first read by any
/// program. 0, or the errno of the read that failed (ENODATA where the file ends early).
[[nodiscard]] SLUICE_API int read_into_cache(int fd, std::uint64_t offset, std::uint64_t size) noexcept;

}  // namespace sluice
