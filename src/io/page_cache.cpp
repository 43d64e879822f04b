#include "sluice/page_cache.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
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

}  // namespace sluice
