#include "support/residency_util.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

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

PinnedRange& PinnedRange::operator=(PinnedRange&& o) noexcept {
  if (this != &o) {
    if (addr_ != nullptr) ::munmap(addr_, len_);
    addr_ = std::exchange(o.addr_, nullptr);
    len_ = std::exchange(o.len_, 0);
  }
  return *this;
}

PinnedRange::~PinnedRange() {
  if (addr_ != nullptr) ::munmap(addr_, len_);  // unlocks too
}

PinnedRange pin_resident(const std::string& path, std::uint64_t offset, std::uint64_t size) {
  make_resident(path, offset, size);
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  EXPECT_EQ(offset % page, 0U) << "pin_resident: offset " << offset << " not page aligned";
  const ScopedFd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  void* p = size == 0 || f.fd < 0 ? MAP_FAILED
                                  : ::mmap(nullptr, size, PROT_READ, MAP_SHARED, f.fd,
                                           static_cast<off_t>(offset));
  if (p == MAP_FAILED) {
    ADD_FAILURE() << "pin_resident: cannot map " << path << ": " << std::strerror(errno);
    return {};
  }
  PinnedRange pin(p, static_cast<std::size_t>(size));
  // No read-around: a page evicted since make_resident is read back alone by the lock, never its
  // neighbours outside the range (which would then look cached).
  (void)::madvise(p, static_cast<std::size_t>(size), MADV_RANDOM);
  if (::mlock(p, static_cast<std::size_t>(size)) != 0) {
    ADD_FAILURE() << "pin_resident: mlock of " << size << " bytes of " << path << ": "
                  << std::strerror(errno) << " (RLIMIT_MEMLOCK?)";
  }
  return pin;
}

std::uint64_t cached_pages(const std::string& path, std::uint64_t offset, std::uint64_t size) {
  const ScopedFd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC)};
  return f.fd < 0 ? 0 : page_cache_residency(f.fd, offset, size).cached;
}

}  // namespace sluice::test
