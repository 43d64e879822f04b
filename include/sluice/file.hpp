// An open file as Sluice sees it: a buffered descriptor, an O_DIRECT descriptor where the
// filesystem really does direct I/O, and the alignment that direct I/O needs there. Readable
// files with O_DIRECT also get a second buffered descriptor with readahead off, for reading what
// the page cache holds (cache_policy auto).
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

class SLUICE_API File {
 public:
  /// Opens `path`. Throws an Error naming the file on failure, for a directory, or for a file
  /// that is neither a regular file nor a block device.
  static File open(std::string path, OpenMode mode, const OpenOptions& options = {});

  File() = default;
  File(File&& other) noexcept;
  File& operator=(File&& other) noexcept;
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  ~File();

  void close() noexcept;
  [[nodiscard]] bool is_open() const noexcept { return fd_ >= 0; }
  [[nodiscard]] int fd() const noexcept { return fd_; }
  /// The O_DIRECT descriptor, or -1 where direct I/O is not available (see direct_reason()).
  [[nodiscard]] int direct_fd() const noexcept { return direct_fd_; }
  [[nodiscard]] bool has_direct() const noexcept { return direct_fd_ >= 0; }
  /// A buffered descriptor with readahead off (POSIX_FADV_RANDOM), for reads of ranges the page
  /// cache holds: pages missing from such a range are read and nothing beyond it, so a read never
  /// pulls the chunks after it into the cache (where they would look cached and be read
  /// buffered in turn). fd() where the file has no O_DIRECT descriptor or is not readable.
  [[nodiscard]] int cache_fd() const noexcept { return cache_fd_ >= 0 ? cache_fd_ : fd_; }
  /// Why there is no O_DIRECT descriptor ("filesystem tmpfs has no O_DIRECT"); empty if there is.
  [[nodiscard]] const std::string& direct_reason() const noexcept { return direct_reason_; }
  /// Alignment of buffer addresses for O_DIRECT (statx dio_mem_align), 1 without direct I/O.
  [[nodiscard]] std::uint32_t mem_align() const noexcept { return mem_align_; }
  /// Alignment of file offsets and lengths for O_DIRECT (statx dio_offset_align).
  [[nodiscard]] std::uint32_t offset_align() const noexcept { return offset_align_; }
  [[nodiscard]] const std::string& path() const noexcept { return path_; }
  [[nodiscard]] OpenMode mode() const noexcept { return mode_; }
  [[nodiscard]] bool readable() const noexcept { return mode_ != OpenMode::write; }
  [[nodiscard]] bool writable() const noexcept { return mode_ != OpenMode::read; }
  [[nodiscard]] bool is_block_device() const noexcept { return block_device_; }
  /// Filesystem type name ("ext4", "tmpfs", "xfs", "nfs", ... or "0x<magic>").
  [[nodiscard]] const std::string& fs_type() const noexcept { return fs_type_; }
  /// Current size in bytes (asks the kernel each time: the file may change under us).
  [[nodiscard]] std::uint64_t size() const;

  /// Opaque state an upper layer caches per open file (the GPU layer keeps its cuFile handle
  /// here): a set-once, thread-safe cache, which is why a const File may fill it. The first call
  /// runs `make` and keeps a non-null result; every later call (concurrent ones wait) gets that
  /// one. A null result is not kept, so the next call tries again. Released before the
  /// descriptors close, so a registration never outlives its fd.
  [[nodiscard]] std::shared_ptr<void> attachment(const std::function<std::shared_ptr<void>()>& make) const;
  /// What is attached, or null.
  [[nodiscard]] std::shared_ptr<void> attachment() const;

 private:
  static void open_cache_fd(File& f, int flags);

  int fd_ = -1;
  int direct_fd_ = -1;
  int cache_fd_ = -1;
  std::uint32_t mem_align_ = 1;
  std::uint32_t offset_align_ = 1;
  bool block_device_ = false;
  OpenMode mode_ = OpenMode::read;
  std::string path_;
  std::string fs_type_;
  std::string direct_reason_;
  mutable std::shared_ptr<void> attachment_;  // only through attachment(make), under its lock
};

/// Filesystem type name for a statfs f_type magic.
[[nodiscard]] SLUICE_API std::string fs_type_name(long magic);

}  // namespace sluice
