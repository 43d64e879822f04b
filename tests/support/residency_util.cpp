#include "support/residency_util.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <vector>

#include <gtest/gtest.h>

#include "sluice/residency.hpp"
#include "support/test_util.hpp"

namespace sluice::test {

bool drop_cache(const std::string& path) {
  const ScopedFd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  if (f.fd < 0) return false;
  ::fdatasync(f.fd);
  ::posix_fadvise(f.fd, 0, 0, POSIX_FADV_DONTNEED);
  return page_cache_residency(f.fd, 0, 0).cached == 0;
}

void make_resident(const std::string& path, std::uint64_t offset, std::uint64_t size) {
  const ScopedFd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  ASSERT_GE(f.fd, 0) << path;
  // FADV_RANDOM: the kernel reads exactly the pages asked for, no readahead around them.
  ASSERT_EQ(::posix_fadvise(f.fd, 0, 0, POSIX_FADV_RANDOM), 0);
  std::vector<char> buf(1 << 20);
  for (std::uint64_t done = 0; done < size;) {
    const std::size_t n =
        static_cast<std::size_t>(std::min<std::uint64_t>(buf.size(), size - done));
    const ssize_t r = ::pread(f.fd, buf.data(), n, static_cast<off_t>(offset + done));
    ASSERT_GT(r, 0) << path << " at " << offset + done;
    done += static_cast<std::uint64_t>(r);
  }
}

std::uint64_t cached_pages(const std::string& path, std::uint64_t offset, std::uint64_t size) {
  const ScopedFd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  return f.fd < 0 ? 0 : page_cache_residency(f.fd, offset, size).cached;
}

}  // namespace sluice::test
