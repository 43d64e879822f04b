// A private (copy-on-write) mapping of a range of a file: what safetensors' loader hands out for
// CPU tensors. Where the page cache already holds the file, viewing it costs no copy and no fresh
// memory; a write to the mapping copies that one page for this process and never reaches the
// file. MAP_PRIVATE does not protect against the file itself being changed in place by another
// writer: pages not yet written by this process may show such changes (docs/paths.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "sluice/export.hpp"

namespace sluice {

class SLUICE_API FileMapping {
 public:
  FileMapping() = default;
  /// Maps [offset, offset + size) of the open file `fd` (readable) privately, readable and
  /// writable; the mapping stays valid after `fd` is closed. `path` names the file in errors.
  /// Throws an Error on failure. size 0 maps nothing.
  FileMapping(int fd, std::uint64_t offset, std::uint64_t size, const char* path);
  FileMapping(const FileMapping&) = delete;
  FileMapping& operator=(const FileMapping&) = delete;
  FileMapping(FileMapping&& o) noexcept
      : base_(std::exchange(o.base_, nullptr)), span_(std::exchange(o.span_, 0)), lead_(o.lead_) {}
  FileMapping& operator=(FileMapping&& o) noexcept;
  ~FileMapping();

  /// The byte at file offset `offset` of the constructor (lead_ bytes into the page-aligned map).
  [[nodiscard]] std::byte* data() const noexcept {
    return base_ == nullptr ? nullptr : base_ + lead_;
  }
  /// Bytes mapped, whole pages.
  [[nodiscard]] std::size_t mapped_bytes() const noexcept { return span_; }
  /// Starts readahead of the pages the page cache lacks (MADV_WILLNEED). Advice only.
  void will_need() const noexcept;

 private:
  std::byte* base_ = nullptr;
  std::size_t span_ = 0;
  std::size_t lead_ = 0;
};

}  // namespace sluice
