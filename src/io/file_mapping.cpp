// FileMapping: the one mmap of a file for loads that view it (include/sluice/file_mapping.hpp).
#include "sluice/file_mapping.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>

#include <fmt/format.h>

#include "sluice/error.hpp"
#include "sluice/units.hpp"

namespace sluice {

FileMapping::FileMapping(int fd, std::uint64_t offset, std::uint64_t size, const char* path) {
  if (size == 0) return;
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  const std::uint64_t start = offset / page * page;
  lead_ = static_cast<std::size_t>(offset - start);
  span_ = static_cast<std::size_t>(round_up(lead_ + size, page));
  // MAP_PRIVATE with PROT_WRITE: writable tensors whose writes stay in this process. Never
  // MAP_POPULATE: on a private writable mapping it write-faults, copying every page.
  void* p =
      ::mmap(nullptr, span_, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, static_cast<off_t>(start));
  if (p == MAP_FAILED) {
    const int e = errno;
    span_ = 0;
    throw_os_error(e,
                   {.op = "mmap", .path = path, .offset = offset, .size = size, .has_range = true},
                   fmt::format("cannot map {} of the file privately", format_size(size)));
  }
  base_ = static_cast<std::byte*>(p);
}

FileMapping& FileMapping::operator=(FileMapping&& o) noexcept {
  if (this != &o) {
    if (base_ != nullptr) ::munmap(base_, span_);
    base_ = std::exchange(o.base_, nullptr);
    span_ = std::exchange(o.span_, 0);
    lead_ = o.lead_;
  }
  return *this;
}

FileMapping::~FileMapping() {
  if (base_ != nullptr) ::munmap(base_, span_);
}

void FileMapping::will_need() const noexcept {
  if (base_ != nullptr) (void)::madvise(base_, span_, MADV_WILLNEED);
}

}  // namespace sluice
