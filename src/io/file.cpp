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

// The readahead-off descriptor for reads of what the page cache holds. Without it (an open that
// fails, say at the descriptor limit) those reads use the ordinary buffered descriptor.
void File::open_cache_fd(File& f, int flags) {
  if (f.mode_ == OpenMode::write) return;
  f.cache_fd_ = ::open(f.path_.c_str(), flags & ~(O_CREAT | O_TRUNC));
  if (f.cache_fd_ >= 0) (void)::posix_fadvise(f.cache_fd_, 0, 0, POSIX_FADV_RANDOM);
}

File File::open(std::string path, OpenMode mode, const OpenOptions& options) {
  File f;
  f.path_ = std::move(path);
  f.mode_ = mode;
  const int flags = open_flags(mode, options);
  f.fd_ = ::open(f.path_.c_str(), flags, options.permissions);
  if (f.fd_ < 0) {
    const int err = errno;
    throw_os_error(err, {.op = "open", .path = f.path_},
                   "cannot open");
  }
  struct stat st {};
  if (::fstat(f.fd_, &st) != 0) throw_os_error(errno, {.op = "open", .path = f.path_}, "fstat failed");
  if (S_ISDIR(st.st_mode)) throw_os_error(EISDIR, {.op = "open", .path = f.path_}, "is a directory");
  f.block_device_ = S_ISBLK(st.st_mode);
  if (!S_ISREG(st.st_mode) && !f.block_device_) {
    throw_usage_error({.op = "open", .path = f.path_}, "not a regular file or block device");
  }

  struct statfs sfs {};
  const long magic = ::fstatfs(f.fd_, &sfs) == 0 ? static_cast<long>(sfs.f_type) : 0;
  f.fs_type_ = f.block_device_ ? "block device" : fs_type_name(magic);

  if (!options.direct) {
    f.direct_reason_ = "direct I/O disabled by configuration";
    return f;
  }
  if (!f.block_device_ && memory_filesystem(magic)) {
    f.direct_reason_ = fmt::format("filesystem {} has no O_DIRECT (page cache only)", f.fs_type_);
    return f;
  }

  struct statx stx {};
  const bool have_statx =
      ::syscall(SYS_statx, f.fd_, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) == 0;
  if (have_statx && (stx.stx_mask & STATX_DIOALIGN) != 0 && stx.stx_dio_offset_align == 0) {
    f.direct_reason_ = fmt::format("filesystem {} does not support O_DIRECT", f.fs_type_);
    return f;
  }
  f.direct_fd_ = ::open(f.path_.c_str(), (flags & ~(O_CREAT | O_TRUNC)) | O_DIRECT);
  if (f.direct_fd_ < 0) {
    f.direct_reason_ = fmt::format("filesystem {} refused O_DIRECT ({})", f.fs_type_,
                                   errno == EINVAL ? "EINVAL" : fmt::format("errno {}", errno));
    return f;
  }
  open_cache_fd(f, flags);
  if (have_statx && (stx.stx_mask & STATX_DIOALIGN) != 0) {
    f.mem_align_ = stx.stx_dio_mem_align;
    f.offset_align_ = stx.stx_dio_offset_align;
  } else {
    // No statx answer (kernel < 6.1, or a block device): 4 KiB covers every common device.
    f.mem_align_ = 4096;
    f.offset_align_ = 4096;
    if (mode != OpenMode::write && !probe_direct_read(f.direct_fd_)) {
      ::close(f.direct_fd_);
      f.direct_fd_ = -1;
      if (f.cache_fd_ >= 0) ::close(f.cache_fd_);
      f.cache_fd_ = -1;
      f.mem_align_ = f.offset_align_ = 1;
      f.direct_reason_ = fmt::format("filesystem {} failed an O_DIRECT probe read", f.fs_type_);
    }
  }
  return f;
}

File::File(File&& other) noexcept { *this = std::move(other); }

File& File::operator=(File&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = std::exchange(other.fd_, -1);
    direct_fd_ = std::exchange(other.direct_fd_, -1);
    cache_fd_ = std::exchange(other.cache_fd_, -1);
    mem_align_ = other.mem_align_;
    offset_align_ = other.offset_align_;
    block_device_ = other.block_device_;
    mode_ = other.mode_;
    path_ = std::move(other.path_);
    fs_type_ = std::move(other.fs_type_);
    direct_reason_ = std::move(other.direct_reason_);
    attachment_ = std::move(other.attachment_);
  }
  return *this;
}

File::~File() { close(); }

namespace {
// One lock for every File's attachment: attaching is rare (once per file and upper layer), and
// a per-File mutex would make File immovable.
std::mutex& attachment_mutex() {
  static std::mutex m;
  return m;
}
}  // namespace

std::shared_ptr<void> File::attachment(const std::function<std::shared_ptr<void>()>& make) const {
  std::lock_guard lock(attachment_mutex());
  if (!attachment_) attachment_ = make();
  return attachment_;
}

std::shared_ptr<void> File::attachment() const {
  std::lock_guard lock(attachment_mutex());
  return attachment_;
}

void File::close() noexcept {
  {
    std::lock_guard lock(attachment_mutex());
    attachment_.reset();
  }
  if (direct_fd_ >= 0) ::close(direct_fd_);
  if (cache_fd_ >= 0) ::close(cache_fd_);
  if (fd_ >= 0) ::close(fd_);
  fd_ = direct_fd_ = cache_fd_ = -1;
}

std::uint64_t File::size() const {
  if (fd_ < 0) throw_os_error(EBADF, {.op = "size", .path = path_}, "file is closed");
  if (block_device_) {
    std::uint64_t bytes = 0;
    if (::ioctl(fd_, BLKGETSIZE64, &bytes) != 0) {
      throw_os_error(errno, {.op = "size", .path = path_}, "BLKGETSIZE64 failed");
    }
    return bytes;
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0) throw_os_error(errno, {.op = "size", .path = path_}, "fstat failed");
  return static_cast<std::uint64_t>(st.st_size);
}

}  // namespace sluice
