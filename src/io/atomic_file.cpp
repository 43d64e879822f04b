// Write-then-rename. The temporary is created O_EXCL and locked (flock) at once; the lock is what
// tells a live writer's temporary from a dead one's, on any filesystem where flock works across
// the processes that share it (local ones, and NFS, which maps it to POSIX locks). The process id
// in the name is a second guard, for the instant between creating the temporary and locking it.
#include "sluice/atomic_file.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <random>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "sluice/error.hpp"
#include "sluice/page_cache.hpp"

namespace sluice {
namespace {

// The folder and the last component of a path ("." for a bare name).
std::pair<std::string, std::string> split_path(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return {".", path};
  return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

std::string temp_prefix(const std::string& name) { return "." + name + atomic_temporary_marker; }

std::uint64_t random_tag() {
  static thread_local std::mt19937_64 gen{std::random_device{}() ^
                                          (static_cast<std::uint64_t>(::getpid()) << 32)};
  return gen();
}

// fsync of a folder, so that a rename or unlink in it survives a power cut. Filesystems that
// cannot sync a folder (EINVAL, ENOTSUP from some FUSE and network filesystems) have nothing to
// make durable this way: not an error.
void sync_folder(const std::string& dir, std::string_view op) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw_os_error(errno, {.op = op, .path = dir}, "cannot open the folder to sync it");
  const int err = sync_fd(fd, true);
  ::close(fd);
  if (err != 0 && err != EINVAL && err != ENOTSUP) {
    throw_os_error(err, {.op = op, .path = dir}, "fsync of the folder failed");
  }
}

bool process_alive(long pid) {
  if (pid <= 0) return false;
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

// The pid of a temporary's name suffix "<pid>-<16 hex>", or -1 when the suffix is not one.
long temp_pid(std::string_view suffix) {
  const auto dash = suffix.find('-');
  if (dash == 0 || dash == std::string_view::npos || dash > 10 || suffix.size() - dash - 1 != 16) return -1;
  long pid = 0;
  for (char c : suffix.substr(0, dash)) {
    if (c < '0' || c > '9') return -1;
    pid = pid * 10 + (c - '0');
  }
  for (char c : suffix.substr(dash + 1)) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return -1;
  }
  return pid;
}

}  // namespace

std::size_t remove_stale_temporaries(const std::string& final_path) {
  const auto [dir, name] = split_path(final_path);
  const std::string prefix = temp_prefix(name);
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return 0;  // no folder: nothing stale; creating the temporary will say why
  const int dfd = ::dirfd(d);
  std::size_t removed = 0;
  while (const dirent* e = ::readdir(d)) {
    const std::string_view entry(e->d_name);
    if (!entry.starts_with(prefix)) continue;
    const long pid = temp_pid(entry.substr(prefix.size()));
    if (pid < 0 || pid == ::getpid() || process_alive(pid)) continue;
    const int fd = ::openat(dfd, e->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) continue;
    // A live writer holds the lock: leave its temporary alone.
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0 && ::unlinkat(dfd, e->d_name, 0) == 0) ++removed;
    ::close(fd);
  }
  ::closedir(d);
  return removed;
}

bool remove_durably(const std::string& path) {
  if (::unlink(path.c_str()) != 0) {
    if (errno == ENOENT) return false;
    throw_os_error(errno, {.op = "remove", .path = path}, "cannot remove the file");
  }
  sync_folder(split_path(path).first, "remove");
  return true;
}

AtomicFile AtomicFile::create(std::string final_path, const OpenOptions& options) {
  if (final_path.empty() || final_path.back() == '/') {
    throw_usage_error({.op = "create", .path = final_path}, "the final name is not a file name");
  }
  (void)remove_stale_temporaries(final_path);
  const auto [dir, name] = split_path(final_path);
  AtomicFile a;
  a.final_path_ = std::move(final_path);
  struct stat old {};
  const bool replacing = ::stat(a.final_path_.c_str(), &old) == 0 && S_ISREG(old.st_mode);
  for (int attempt = 0; a.lock_fd_ < 0; ++attempt) {
    a.temp_path_ = fmt::format("{}/{}{}-{:016x}", dir, temp_prefix(name), ::getpid(), random_tag());
    a.lock_fd_ = ::open(a.temp_path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, options.permissions);
    if (a.lock_fd_ < 0 && (errno != EEXIST || attempt >= 8)) {
      const int err = errno;
      a.temp_path_.clear();
      throw_os_error(err, {.op = "create", .path = a.final_path_}, "cannot create the temporary file beside it");
    }
  }
  (void)::flock(a.lock_fd_, LOCK_EX);  // where flock is missing, the pid in the name still guards
  if (replacing && ::fchmod(a.lock_fd_, old.st_mode & 07777) != 0) {
    const int err = errno;
    throw_os_error(err, {.op = "create", .path = a.temp_path_}, "cannot give the temporary the old file's mode");
  }
  OpenOptions o = options;
  o.create = false;
  o.truncate = false;
  a.file_ = File::open(a.temp_path_, OpenMode::write, o);
  return a;  // on a throw above, ~AtomicFile removes the temporary
}

AtomicFile::AtomicFile(AtomicFile&& other) noexcept
    : final_path_(std::move(other.final_path_)),
      temp_path_(std::exchange(other.temp_path_, {})),
      file_(std::move(other.file_)),
      lock_fd_(std::exchange(other.lock_fd_, -1)) {}

AtomicFile& AtomicFile::operator=(AtomicFile&& other) noexcept {
  if (this != &other) {
    discard();
    final_path_ = std::move(other.final_path_);
    temp_path_ = std::exchange(other.temp_path_, {});
    file_ = std::move(other.file_);
    lock_fd_ = std::exchange(other.lock_fd_, -1);
  }
  return *this;
}

AtomicFile::~AtomicFile() { discard(); }

void AtomicFile::discard() noexcept {
  file_.close();
  if (!temp_path_.empty()) (void)::unlink(temp_path_.c_str());
  temp_path_.clear();
  if (lock_fd_ >= 0) ::close(lock_fd_);
  lock_fd_ = -1;
}

void AtomicFile::reserve(std::uint64_t bytes) {
  if (temp_path_.empty()) throw_usage_error({.op = "reserve", .path = final_path_}, "the file is already committed or discarded");
  if (bytes == 0) return;
  // fallocate(2), not posix_fallocate: glibc's emulation would write every byte as zeros first.
  if (::fallocate(lock_fd_, 0, 0, static_cast<off_t>(bytes)) == 0) return;
  const int err = errno;
  if (err == EOPNOTSUPP || err == ENOSYS || err == EINVAL) return;
  throw_os_error(err, {.op = "write", .path = temp_path_, .offset = 0, .size = bytes, .has_range = true},
                 "cannot reserve space for the file");
}

void AtomicFile::commit(bool durable) {
  if (temp_path_.empty()) throw_usage_error({.op = "commit", .path = final_path_}, "the file is already committed or discarded");
  try {
    if (durable) {
      if (const int err = sync_fd(file_.fd(), false); err != 0) {
        throw_os_error(err, {.op = "write", .path = temp_path_}, "fdatasync failed");
      }
    }
    if (::rename(temp_path_.c_str(), final_path_.c_str()) != 0) {
      throw_os_error(errno, {.op = "rename", .path = final_path_},
                     fmt::format("cannot move '{}' over it", temp_path_));
    }
  } catch (...) {
    discard();
    throw;
  }
  temp_path_.clear();  // it is the final file now: discard() must not remove it
  discard();
  if (durable) sync_folder(split_path(final_path_).first, "rename");
}

}  // namespace sluice
