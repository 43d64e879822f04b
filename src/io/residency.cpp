// Page-cache residency of file ranges. cachestat(2) is not in the C library's headers on the
// distributions we build on, so its number and structures are spelled out here (they are the
// same on every architecture: the syscall came after the tables were unified).
//
// Both calls hide residency from a process that may neither write nor own the file (cachestat
// refuses with EPERM, mincore reports only pages mapped by the caller): the range then reads as
// not cached, which sends reads down the O_DIRECT path they took before residency was asked.
#include "sluice/residency.hpp"

#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstddef>

namespace sluice {
namespace {

constexpr long sys_cachestat = 451;

struct CachestatRange {
  std::uint64_t off;
  std::uint64_t len;  // 0: to the end of the file
};

struct Cachestat {
  std::uint64_t nr_cache;
  std::uint64_t nr_dirty;
  std::uint64_t nr_writeback;
  std::uint64_t nr_evicted;
  std::uint64_t nr_recently_evicted;
};

std::uint64_t page_size() noexcept {
  static const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  return page;
}

std::uint64_t pages_of(std::uint64_t offset, std::uint64_t size) noexcept {
  if (size == 0) return 0;
  const std::uint64_t p = page_size();
  return (offset + size - 1) / p - offset / p + 1;
}

bool cachestat(int fd, std::uint64_t offset, std::uint64_t size, Residency* out) noexcept {
  CachestatRange range{offset, size};
  Cachestat cs{};
  if (::syscall(sys_cachestat, fd, &range, &cs, 0U) != 0) return false;
  out->cached = std::min(cs.nr_cache, out->pages);
  out->dirty = std::min(cs.nr_dirty + cs.nr_writeback, out->cached);
  out->method = ResidencyMethod::cachestat;
  return true;
}

}  // namespace

std::string_view to_string(ResidencyMethod m) noexcept {
  switch (m) {
    case ResidencyMethod::cachestat:
      return "cachestat";
    case ResidencyMethod::mincore:
      return "mincore";
    case ResidencyMethod::none:
      return "none";
  }
  return "?";
}

bool have_cachestat() noexcept {
  // A kernel with the call checks the descriptor first (EBADF); one without says ENOSYS, and a
  // seccomp filter that does not know it usually says ENOSYS or EPERM.
  static const bool have = [] {
    CachestatRange range{0, 0};
    Cachestat cs{};
    return ::syscall(sys_cachestat, -1, &range, &cs, 0U) != 0 && errno == EBADF;
  }();
  return have;
}

ResidencyProbe::ResidencyProbe(int fd, std::uint64_t offset, std::uint64_t size,
                               ResidencyMethod prefer)
    : fd_(fd) {
  if (size == 0) return;
  Residency first{.pages = 1};
  if (prefer == ResidencyMethod::cachestat && have_cachestat() &&
      cachestat(fd, offset, 1, &first)) {
    method_ = ResidencyMethod::cachestat;
    return;
  }
  // mincore: map the whole range once; nothing is read or faulted in by mapping it.
  const std::uint64_t p = page_size();
  map_offset_ = offset / p * p;
  const std::uint64_t len = (offset + size + p - 1) / p * p - map_offset_;
  if (len > static_cast<std::uint64_t>(PTRDIFF_MAX)) return;
  void* m = ::mmap(nullptr, static_cast<std::size_t>(len), PROT_READ, MAP_SHARED, fd,
                   static_cast<off_t>(map_offset_));
  if (m == MAP_FAILED) return;
  map_ = m;
  map_size_ = static_cast<std::size_t>(len);
  method_ = ResidencyMethod::mincore;
}

ResidencyProbe::~ResidencyProbe() {
  if (map_ != nullptr) ::munmap(map_, map_size_);
}

Residency ResidencyProbe::probe(std::uint64_t offset, std::uint64_t size) const noexcept {
  Residency r{.pages = pages_of(offset, size)};
  if (r.pages == 0) return r;
  if (method_ == ResidencyMethod::cachestat) {
    if (!cachestat(fd_, offset, size, &r)) r.method = ResidencyMethod::none;
    return r;
  }
  if (method_ != ResidencyMethod::mincore || offset < map_offset_) return r;
  const std::uint64_t p = page_size();
  const std::uint64_t first = offset / p - map_offset_ / p;
  if ((first + r.pages) * p > map_size_) return r;
  std::array<unsigned char, 4096> vec{};
  auto* base = static_cast<std::byte*>(map_);
  for (std::uint64_t done = 0; done < r.pages;) {
    const std::uint64_t n = std::min<std::uint64_t>(vec.size(), r.pages - done);
    if (::mincore(base + (first + done) * p, static_cast<std::size_t>(n * p), vec.data()) != 0) {
      return Residency{.pages = r.pages};  // method none: counts as not cached
    }
    r.cached += static_cast<std::uint64_t>(
        std::count_if(vec.begin(), vec.begin() + static_cast<std::ptrdiff_t>(n),
                      [](unsigned char c) { return (c & 1U) != 0; }));
    done += n;
  }
  r.method = ResidencyMethod::mincore;
  return r;
}

Residency ResidencyProbe::probe_edges(std::uint64_t offset, std::uint64_t size) const noexcept {
  if (size <= 4 * edge_bytes) return probe(offset, size);
  const Residency head = probe(offset, edge_bytes);
  const Residency tail = probe(offset + size - edge_bytes, edge_bytes);
  const bool head_in = 2 * head.cached >= head.pages;
  const bool tail_in = 2 * tail.cached >= tail.pages;
  if (head_in != tail_in || head.method != tail.method) return probe(offset, size);
  Residency r{.pages = pages_of(offset, size), .method = head.method};
  const std::uint64_t seen = head.pages + tail.pages;
  r.cached = (head.cached + tail.cached) * r.pages / seen;
  r.dirty = (head.dirty + tail.dirty) * r.pages / seen;
  return r;
}

Residency page_cache_residency(int fd, std::uint64_t offset, std::uint64_t size) {
  if (size == 0) {
    struct stat st {};
    if (::fstat(fd, &st) != 0 || static_cast<std::uint64_t>(st.st_size) <= offset) return {};
    size = static_cast<std::uint64_t>(st.st_size) - offset;
  }
  Residency r{.pages = pages_of(offset, size)};
  if (have_cachestat() && cachestat(fd, offset, size, &r)) return r;
  const ResidencyProbe probe(fd, offset, size);
  return probe.probe(offset, size);
}

}  // namespace sluice
