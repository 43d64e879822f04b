#include "sluice/host_memory.hpp"

#include <sys/mman.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include <fmt/format.h>

#include "sluice/error.hpp"
#include "sluice/units.hpp"

namespace sluice {
namespace {

constexpr std::size_t huge = 2 * MiB;

std::size_t mapped_size(std::size_t bytes) {
  return static_cast<std::size_t>(round_up(std::max<std::size_t>(bytes, 1), 4096));
}

}  // namespace

void* map_host_memory(std::size_t bytes, bool huge_pages, bool populate) {
  const std::size_t size = mapped_size(bytes);
  // Over-map by one huge page and trim, so the region starts on a 2 MiB boundary.
  const std::size_t span = huge_pages && size >= huge ? size + huge : size;
  void* raw = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) {
    throw_os_error(errno, {.op = "mmap"}, fmt::format("cannot map {} of host memory", format_size(bytes)));
  }
  auto* p = static_cast<std::byte*>(raw);
  if (span != size) {
    const auto addr = reinterpret_cast<std::uintptr_t>(p);
    const std::size_t lead = static_cast<std::size_t>(round_up(addr, huge) - addr);
    if (lead > 0) ::munmap(p, lead);
    const std::size_t tail = span - lead - size;
    if (tail > 0) ::munmap(p + lead + size, tail);
    p += lead;
    (void)::madvise(p, size, MADV_HUGEPAGE);  // advice only: fine if THP is off
  } else if (!huge_pages) {
    (void)::madvise(p, size, MADV_NOHUGEPAGE);  // even where THP is "always"
  }
  // Populate now (cheaper in one call than fault by fault, and outside any timed I/O); kernels
  // before 5.14 lack MADV_POPULATE_WRITE, so touch the pages instead.
  if (populate && ::madvise(p, size, MADV_POPULATE_WRITE) != 0) std::memset(p, 0, size);
  return p;
}

void unmap_host_memory(void* p, std::size_t bytes) noexcept {
  if (p != nullptr) ::munmap(p, mapped_size(bytes));
}

}  // namespace sluice
