// How one request [start, end) is cut into I/Os. With O_DIRECT the range is widened to the
// alignment A (at least a page, so buffered head/tail writes never share a page with direct
// writes of the middle) and cut into:
//   head   [lo, a)   one block holding the unaligned start      (read: staged; write: buffered)
//   middle [a, b)    io_size pieces                             (direct; staged if the caller's
//                                                                buffer is not aligned)
//   tail   [b, hi)   one block holding the unaligned end        (read: staged; write: buffered)
// A range inside a single block is one staged read (or one buffered write). Without O_DIRECT
// the range is cut into io_size buffered pieces straight from/to the caller's memory.
// When the caller's memory is on a GPU (`staged_user`), nothing can touch it but the device's
// copies, so every chunk goes through a staging buffer: head/tail writes become buffered writes
// from staging. Chunks are computed on demand, so a 1 TB request costs no memory.
#pragma once

#include <cstdint>

#include "sluice/io_engine.hpp"

namespace sluice::detail {

enum class ChunkMode : std::uint8_t {
  direct_user,    ///< O_DIRECT straight into/out of the caller's buffer
  direct_staged,  ///< O_DIRECT through a staging buffer, copied to/from the caller's buffer
  buffered_user,  ///< buffered descriptor, straight into/out of the caller's buffer
  buffered_staged,  ///< buffered descriptor through a staging buffer (device memory)
};

[[nodiscard]] constexpr bool is_staged(ChunkMode m) noexcept {
  return m == ChunkMode::direct_staged || m == ChunkMode::buffered_staged;
}

[[nodiscard]] constexpr bool is_direct(ChunkMode m) noexcept {
  return m == ChunkMode::direct_user || m == ChunkMode::direct_staged;
}

struct Chunk {
  std::uint64_t offset = 0;      ///< file offset of the I/O
  std::uint32_t len = 0;         ///< bytes of the I/O
  std::uint64_t user_begin = 0;  ///< caller's bytes covered: file range [user_begin, user_end)
  std::uint64_t user_end = 0;
  ChunkMode mode = ChunkMode::buffered_user;
  bool cached = false;           ///< buffered because the page cache holds it (File::cache_fd)
};

class ChunkLayout {
 public:
  /// `direct`: use O_DIRECT with offset alignment `offset_align` and memory alignment
  /// `mem_align`; `user` is the caller's buffer (its address decides staging) unless
  /// `staged_user`, where every chunk is staged.
  ChunkLayout(IoOp op, std::uint64_t start, std::uint64_t size, std::uintptr_t user, bool direct,
              std::uint32_t offset_align, std::uint32_t mem_align, std::uint64_t io_size,
              bool staged_user = false);

  [[nodiscard]] std::uint64_t count() const noexcept { return count_; }
  [[nodiscard]] Chunk chunk(std::uint64_t i) const noexcept;
  /// Chunks that go through staging buffers.
  [[nodiscard]] std::uint64_t staged_count() const noexcept;
  [[nodiscard]] bool middle_aligned() const noexcept { return middle_aligned_; }
  /// The layout uses O_DIRECT (aligned middle, staged edges).
  [[nodiscard]] bool direct() const noexcept { return direct_; }
  /// Every chunk is staged (the caller's memory is on a GPU).
  [[nodiscard]] bool staged_user() const noexcept { return staged_user_; }

 private:
  [[nodiscard]] Chunk edge(std::uint64_t lo, std::uint64_t hi) const noexcept;

  IoOp op_;
  std::uint64_t start_, end_;
  bool direct_;
  bool staged_user_;
  std::uint64_t align_ = 1;
  std::uint64_t io_size_;
  std::uint64_t a_ = 0, b_ = 0;   // aligned middle
  bool head_ = false, tail_ = false, single_ = false;
  bool middle_aligned_ = true;
  std::uint64_t middle_count_ = 0;
  std::uint64_t count_ = 0;
};

}  // namespace sluice::detail
