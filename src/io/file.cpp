// Direct I/O detection. statx(STATX_DIOALIGN) (Linux 6.1+) is the authority: a filesystem that
// reports alignments does real direct I/O, and one that does not report them (tmpfs accepts
// O_DIRECT since 6.6 but serves it from the page cache) gets buffered I/O and a reason. On older
// kernels we probe: open O_DIRECT and read one 4 KiB block at 4 KiB alignment.
#include "sluice/file.hpp"

#include <fcntl.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <utility>

#include <fmt/format.h>

#include "sluice/error.hpp"

namespace sluice {
namespace {

int open_flags(OpenMode mode, const OpenOptions& o) {
  int flags = O_CLOEXEC;
  switch (mode) {
    case OpenMode::read: flags |= O_RDONLY; break;
    case OpenMode::write: flags |= O_WRONLY; break;
    case OpenMode::read_write: flags |= O_RDWR; break;
  }
  if (mode != OpenMode::read) {
    if (o.create) flags |= O_CREAT;
    if (o.truncate) flags |= O_TRUNC;
  }
  return flags;
}

// Filesystems that accept O_DIRECT but serve it from memory: no point, say so.
bool memory_filesystem(long magic) {
  return magic == TMPFS_MAGIC || magic == RAMFS_MAGIC;
}

bool probe_direct_read(int direct_fd) {
  constexpr std::size_t block = 4096;
  void* raw = nullptr;
  if (posix_memalign(&raw, block, block) != 0) return false;
  std::unique_ptr<void, decltype(&std::free)> buf(raw, &std::free);
  return ::pread(direct_fd, buf.get(), block, 0) >= 0;
}

}  // namespace

namespace detail {

// The descriptors of one open file and what was learned about them. Owned jointly by the File
// handles on it and the transfers in flight, so the descriptors close (and their numbers can be
// reused) only once nothing can still use them.
struct FileState {
  int fd = -1;
  int direct_fd = -1;
  int cache_fd = -1;
  std::uint32_t mem_align = 1;
  std::uint32_t offset_align = 1;
  bool block_device = false;
  std::string fs_type;
  std::string direct_reason;
  std::atomic<std::uint64_t> size_seen{0};  // what open or the last size() found
  std::atomic<bool> small_read_cached{false};  // note_small_read_cached
  std::mutex attachment_mutex;
  std::shared_ptr<void> attachment;  // only under attachment_mutex

  FileState() = default;
  FileState(const FileState&) = delete;
  FileState& operator=(const FileState&) = delete;
  ~FileState() {
    attachment.reset();  // a registration (cuFile's) never outlives its descriptor
    if (direct_fd >= 0) ::close(direct_fd);
    if (cache_fd >= 0) ::close(cache_fd);
    if (fd >= 0) ::close(fd);
  }
};

// What was opened: the path and mode, which a closed handle still reports.
struct FileIdentity {
  std::string path;
  OpenMode mode = OpenMode::read;
};

}  // namespace detail

namespace {

// What a closed handle reports.
const detail::FileState& closed_state() {
  static const detail::FileState closed;
  return closed;
}

// The readahead-off descriptor for reads of what the page cache holds. Without it (an open that
// fails, say at the descriptor limit) those reads use the ordinary buffered descriptor.
void open_cache_fd(detail::FileState& s, const std::string& path, OpenMode mode, int flags) {
  if (mode == OpenMode::write) return;
  s.cache_fd = ::open(path.c_str(), flags & ~(O_CREAT | O_TRUNC));
  if (s.cache_fd >= 0) (void)::posix_fadvise(s.cache_fd, 0, 0, POSIX_FADV_RANDOM);
}

}  // namespace

std::string fs_type_name(long magic) {
  static constexpr std::pair<unsigned long, std::string_view> names[] = {
      {EXT4_SUPER_MAGIC, "ext4"},  // ext2/ext3 share the magic
      {TMPFS_MAGIC, "tmpfs"},       {RAMFS_MAGIC, "ramfs"},        {XFS_SUPER_MAGIC, "xfs"},
      {BTRFS_SUPER_MAGIC, "btrfs"}, {NFS_SUPER_MAGIC, "nfs"},      {OVERLAYFS_SUPER_MAGIC, "overlay"},
      {0x65735546, "fuse"},         {0x0bd00bd0, "lustre"},        {0x47504653, "gpfs"},
      {0x2fc12fc1, "zfs"},          {0xf2f52010, "f2fs"},          {0x01021997, "9p"},
      {0xfe534d42, "smb2"},         {0xff534d42, "cifs"},          {0x7461636f, "ocfs2"},
      {0x00c36400, "ceph"},         {0x2011bab0, "exfat"},         {0x4d44, "vfat"},
      {0x5346544e, "ntfs"},         {0x6a656a63, "fakeowner"},     {0x9fa0, "proc"},
      {0x62656572, "sysfs"},
  };
  const auto key = static_cast<unsigned long>(magic) & 0xffffffffUL;
  for (const auto& [m, name] : names) {
    if (m == key) return std::string(name);
  }
  return fmt::format("0x{:x}", key);
}

namespace {

// Opens the O_DIRECT descriptor (and the cache one beside it) where the filesystem really does
// direct I/O, or records why not in s.direct_reason.
void open_direct(detail::FileState& s, const std::string& path, OpenMode mode, int flags, long magic) {
  if (!s.block_device && memory_filesystem(magic)) {
    s.direct_reason = fmt::format("filesystem {} has no O_DIRECT (page cache only)", s.fs_type);
    return;
  }
  struct statx stx {};
  const bool have_statx =
      ::syscall(SYS_statx, s.fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) == 0;
  if (have_statx && (stx.stx_mask & STATX_DIOALIGN) != 0 && stx.stx_dio_offset_align == 0) {
    s.direct_reason = fmt::format("filesystem {} does not support O_DIRECT", s.fs_type);
    return;
  }
  s.direct_fd = ::open(path.c_str(), (flags & ~(O_CREAT | O_TRUNC)) | O_DIRECT);
  if (s.direct_fd < 0) {
    s.direct_reason = fmt::format("filesystem {} refused O_DIRECT ({})", s.fs_type,
                                  errno == EINVAL ? "EINVAL" : fmt::format("errno {}", errno));
    return;
  }
  open_cache_fd(s, path, mode, flags);
  if (have_statx && (stx.stx_mask & STATX_DIOALIGN) != 0) {
    s.mem_align = stx.stx_dio_mem_align;
    s.offset_align = stx.stx_dio_offset_align;
    return;
  }
  // No statx answer (kernel < 6.1, or a block device): 4 KiB covers every common device.
  s.mem_align = 4096;
  s.offset_align = 4096;
  if (mode != OpenMode::write && !probe_direct_read(s.direct_fd)) {
    ::close(s.direct_fd);
    s.direct_fd = -1;
    if (s.cache_fd >= 0) ::close(s.cache_fd);
    s.cache_fd = -1;
    s.mem_align = s.offset_align = 1;
    s.direct_reason = fmt::format("filesystem {} failed an O_DIRECT probe read", s.fs_type);
  }
}

}  // namespace

File File::open(std::string path, OpenMode mode, const OpenOptions& options) {
  auto state = std::make_shared<detail::FileState>();
  detail::FileState& s = *state;
  const int flags = open_flags(mode, options);
  s.fd = ::open(path.c_str(), flags, options.permissions);
  if (s.fd < 0) {
    const int err = errno;
    throw_os_error(err, {.op = "open", .path = path}, "cannot open");
  }
  struct stat st {};
  if (::fstat(s.fd, &st) != 0) throw_os_error(errno, {.op = "open", .path = path}, "fstat failed");
  if (S_ISDIR(st.st_mode)) throw_os_error(EISDIR, {.op = "open", .path = path}, "is a directory");
  s.block_device = S_ISBLK(st.st_mode);
  if (!s.block_device) s.size_seen.store(static_cast<std::uint64_t>(st.st_size), std::memory_order_relaxed);
  if (!S_ISREG(st.st_mode) && !s.block_device) {
    throw_usage_error({.op = "open", .path = path}, "not a regular file or block device");
  }
  struct statfs sfs {};
  const long magic = ::fstatfs(s.fd, &sfs) == 0 ? static_cast<long>(sfs.f_type) : 0;
  s.fs_type = s.block_device ? "block device" : fs_type_name(magic);
  if (options.direct) {
    open_direct(s, path, mode, flags, magic);
  } else {
    s.direct_reason = "direct I/O disabled by configuration";
  }
  File f;
  f.state_ = std::move(state);
  f.id_ = std::make_shared<const detail::FileIdentity>(detail::FileIdentity{std::move(path), mode});
  return f;
}

void File::close() noexcept { state_.reset(); }

const std::string& File::path() const noexcept {
  static const std::string none;
  return id_ ? id_->path : none;
}
OpenMode File::mode() const noexcept { return id_ ? id_->mode : OpenMode::read; }

int File::fd() const noexcept { return state_ ? state_->fd : -1; }
int File::direct_fd() const noexcept { return state_ ? state_->direct_fd : -1; }
int File::cache_fd() const noexcept {
  if (!state_) return -1;
  return state_->cache_fd >= 0 ? state_->cache_fd : state_->fd;
}
const std::string& File::direct_reason() const noexcept {
  return (state_ ? *state_ : closed_state()).direct_reason;
}
std::uint32_t File::mem_align() const noexcept { return state_ ? state_->mem_align : 1; }
std::uint32_t File::offset_align() const noexcept { return state_ ? state_->offset_align : 1; }
bool File::is_block_device() const noexcept { return state_ && state_->block_device; }
const std::string& File::fs_type() const noexcept { return (state_ ? *state_ : closed_state()).fs_type; }

std::shared_ptr<void> File::attachment(const std::function<std::shared_ptr<void>()>& make) const {
  if (!state_) return nullptr;
  std::lock_guard lock(state_->attachment_mutex);
  if (!state_->attachment) state_->attachment = make();
  return state_->attachment;
}

std::shared_ptr<void> File::attachment() const {
  if (!state_) return nullptr;
  std::lock_guard lock(state_->attachment_mutex);
  return state_->attachment;
}

std::uint64_t File::size() const {
  if (!state_) throw_os_error(EBADF, {.op = "size", .path = path()}, "file is closed");
  if (state_->block_device) {
    std::uint64_t bytes = 0;
    if (::ioctl(state_->fd, BLKGETSIZE64, &bytes) != 0) {
      throw_os_error(errno, {.op = "size", .path = path()}, "BLKGETSIZE64 failed");
    }
    state_->size_seen.store(bytes, std::memory_order_relaxed);
    return bytes;
  }
  struct stat st {};
  if (::fstat(state_->fd, &st) != 0) throw_os_error(errno, {.op = "size", .path = path()}, "fstat failed");
  const auto bytes = static_cast<std::uint64_t>(st.st_size);
  state_->size_seen.store(bytes, std::memory_order_relaxed);
  return bytes;
}

std::uint64_t File::size_seen() const noexcept {
  return state_ ? state_->size_seen.load(std::memory_order_relaxed) : 0;
}

bool File::last_small_read_cached() const noexcept {
  return state_ && state_->small_read_cached.load(std::memory_order_relaxed);
}

void File::note_small_read_cached(bool cached) const noexcept {
  // Stored only on a change: concurrent small reads of one file would otherwise share the line.
  if (state_ && state_->small_read_cached.load(std::memory_order_relaxed) != cached) {
    state_->small_read_cached.store(cached, std::memory_order_relaxed);
  }
}

}  // namespace sluice
