#include "sluice/page_cache.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>

namespace sluice {
namespace {

// Calls fn(fd) on a read-only descriptor of each file that opens.
template <typename Fn>
void for_each_open(const std::vector<std::string>& files, Fn fn) {
  for (const auto& path : files) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    fn(fd);
    ::close(fd);
  }
}

bool drop_whole_cache() {
  if (::geteuid() != 0) return false;
  std::ofstream f("/proc/sys/vm/drop_caches");
  return static_cast<bool>(f << "3" << std::flush);
}

}  // namespace

int sync_fd(int fd, bool with_metadata) noexcept {
  int rc = 0;
  do {
    rc = with_metadata ? ::fsync(fd) : ::fdatasync(fd);
  } while (rc != 0 && errno == EINTR);
  return rc == 0 ? 0 : errno;
}

void sync_files(const std::vector<std::string>& files) noexcept {
  for_each_open(files, [](int fd) { (void)sync_fd(fd, false); });
}

std::string drop_page_cache(const std::vector<std::string>& files, DropScope scope) {
  if (scope == DropScope::files) {
    for_each_open(files, [](int fd) {
      (void)sync_fd(fd, false);
      (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    });
    return "fdatasync, then posix_fadvise(DONTNEED) on each file";
  }
  ::sync();
  if (drop_whole_cache()) return "drop_caches (echo 3 > /proc/sys/vm/drop_caches)";
  for_each_open(files, [](int fd) { (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED); });
  return "posix_fadvise(DONTNEED) on each file (not root)";
}

int evict_range(int fd, std::uint64_t offset, std::uint64_t size) noexcept {
  if (const int e = sync_fd(fd, false); e != 0) return e;
  return ::posix_fadvise(fd, static_cast<off_t>(offset), static_cast<off_t>(size),
                         POSIX_FADV_DONTNEED);
}

int read_into_cache(int fd, std::uint64_t offset, std::uint64_t size) noexcept {
  constexpr std::size_t chunk = std::size_t{1} << 20;
  void* buf = std::malloc(chunk);  // not a vector: this function promises not to throw
  if (buf == nullptr) return ENOMEM;
  int err = 0;
  for (std::uint64_t done = 0; done < size && err == 0;) {
    const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(chunk, size - done));
    const ssize_t r = ::pread(fd, buf, n, static_cast<off_t>(offset + done));
    if (r > 0) {
      done += static_cast<std::uint64_t>(r);
    } else if (r == 0) {
      err = ENODATA;
    } else if (errno != EINTR) {
      err = errno;
    }
  }
  std::free(buf);
  return err;
}

}  // namespace sluice
