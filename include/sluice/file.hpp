// An open file as Sluice sees it: a buffered descriptor, an O_DIRECT descriptor where the
// filesystem really does direct I/O, and the alignment that direct I/O needs there. Readable
// files with O_DIRECT also get a second buffered descriptor with readahead off, for reading what
// the page cache holds (cache_policy auto). A File is a shared handle: asynchronous transfers
// hold the descriptors open until they complete (docs/lifetimes.md).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "sluice/export.hpp"

namespace sluice {

enum class OpenMode : std::uint8_t { read, write, read_write };

struct OpenOptions {
  bool create = true;       ///< create the file when opened for writing
  bool truncate = false;    ///< truncate to 0 when opened for writing
  bool direct = true;       ///< open an O_DIRECT descriptor when the filesystem supports it
  unsigned permissions = 0644;
};

namespace detail {
struct FileState;
struct FileIdentity;
}

/// A handle on an open file. Copies are cheap and share one set of descriptors, which close when
/// the last handle lets go of them, and so does every transfer in flight: read_async,
/// write_async, the stream-ordered forms and submit_batch hold the file until their future is
/// ready, so a caller may drop its File (or close() it) as soon as the call has returned.
/// Synchronous calls use the handle they are given, which must stay valid for the call.
class SLUICE_API File {
 public:
  /// Opens `path`. Throws an Error naming the file on failure, for a directory, or for a file
  /// that is neither a regular file nor a block device.
  static File open(std::string path, OpenMode mode, const OpenOptions& options = {});

  File() = default;
  File(const File&) = default;
  File& operator=(const File&) = default;
  /// A moved-from File is closed, with an empty path.
  File(File&& other) noexcept = default;
  File& operator=(File&& other) noexcept = default;
  ~File() = default;

  /// Lets go of this handle: the descriptors close now unless another handle or a transfer in
  /// flight still holds them (they close when the last one lets go). path() and mode() stay, for
  /// messages; a closed handle refuses I/O with EBADF.
  void close() noexcept;
  [[nodiscard]] bool is_open() const noexcept { return state_ != nullptr; }
  [[nodiscard]] int fd() const noexcept;
  /// The O_DIRECT descriptor, or -1 where direct I/O is not available (see direct_reason()).
  [[nodiscard]] int direct_fd() const noexcept;
  [[nodiscard]] bool has_direct() const noexcept { return direct_fd() >= 0; }
  /// A buffered descriptor with readahead off (POSIX_FADV_RANDOM), for reads of ranges the page
  /// cache holds: pages missing from such a range are read and nothing beyond it, so a read never
  /// pulls the chunks after it into the cache (where they would look cached and be read
  /// buffered in turn). fd() where the file has no O_DIRECT descriptor or is not readable.
  [[nodiscard]] int cache_fd() const noexcept;
  /// Why there is no O_DIRECT descriptor ("filesystem tmpfs has no O_DIRECT"); empty if there is.
  [[nodiscard]] const std::string& direct_reason() const noexcept;
  /// Alignment of buffer addresses for O_DIRECT (statx dio_mem_align), 1 without direct I/O.
  [[nodiscard]] std::uint32_t mem_align() const noexcept;
  /// Alignment of file offsets and lengths for O_DIRECT (statx dio_offset_align).
  [[nodiscard]] std::uint32_t offset_align() const noexcept;
  [[nodiscard]] const std::string& path() const noexcept;
  [[nodiscard]] OpenMode mode() const noexcept;
  [[nodiscard]] bool readable() const noexcept { return mode() != OpenMode::write; }
  [[nodiscard]] bool writable() const noexcept { return mode() != OpenMode::read; }
  [[nodiscard]] bool is_block_device() const noexcept;
  /// Filesystem type name ("ext4", "tmpfs", "xfs", "nfs", ... or "0x<magic>"); empty when closed.
  [[nodiscard]] const std::string& fs_type() const noexcept;
  /// Current size in bytes (asks the kernel each time: the file may change under us).
  [[nodiscard]] std::uint64_t size() const;
  /// The size open() or the last size() call found, shared by every handle (0 when closed):
  /// without a syscall, so a small read that ends within it need not ask the kernel. Only a
  /// hint: the file may have grown since (a read past it calls size()) or shrunk (a read that
  /// comes back short calls size()).
  [[nodiscard]] std::uint64_t size_seen() const noexcept;
  /// Whether the last small read of this file (through any handle) found its range in the page
  /// cache, as note_small_read_cached() recorded it; false at first and when closed. A hint the
  /// host path keeps (docs/paths.md): where it says cached, a small read first tries to take the
  /// bytes from the cache only (one syscall, no residency probe); where not, it probes first,
  /// so that a cold range is read with O_DIRECT and not pulled into the cache by that try.
  [[nodiscard]] bool last_small_read_cached() const noexcept;
  void note_small_read_cached(bool cached) const noexcept;

  /// Opaque state an upper layer caches per open file (the GPU layer keeps its cuFile handle
  /// here), shared by every handle on it: a set-once, thread-safe cache, which is why a const
  /// File may fill it. The first call runs `make` and keeps a non-null result; every later call
  /// (concurrent ones wait) gets that one. A null result is not kept, so the next call tries
  /// again; a closed handle keeps nothing and returns null without calling `make`. Released
  /// before the descriptors close, so a registration never outlives its fd.
  [[nodiscard]] std::shared_ptr<void> attachment(const std::function<std::shared_ptr<void>()>& make) const;
  /// What is attached, or null.
  [[nodiscard]] std::shared_ptr<void> attachment() const;

 private:
  // What the kernel gave for the file (null when closed) and what was opened (kept after close,
  // for messages), each shared by every handle and transfer in flight: a copy allocates nothing.
  std::shared_ptr<detail::FileState> state_;
  std::shared_ptr<const detail::FileIdentity> id_;
};

/// Filesystem type name for a statfs f_type magic.
[[nodiscard]] SLUICE_API std::string fs_type_name(long magic);

}  // namespace sluice
