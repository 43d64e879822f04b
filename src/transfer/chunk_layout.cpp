#include "chunk_layout.hpp"

#include <algorithm>

#include "sluice/units.hpp"

namespace sluice::detail {

ChunkLayout::ChunkLayout(IoOp op, std::uint64_t start, std::uint64_t size, std::uintptr_t user,
                         bool direct, std::uint32_t offset_align, std::uint32_t mem_align,
                         std::uint64_t io_size, bool staged_user)
    : op_(op), start_(start), end_(start + size), direct_(direct), staged_user_(staged_user),
      io_size_(io_size) {
  if (size == 0) return;
  if (!direct_) {
    count_ = (size + io_size_ - 1) / io_size_;
    return;
  }
  align_ = std::max<std::uint64_t>(offset_align, 4096);
  io_size_ = std::max(align_, round_down(io_size_, align_));
  a_ = round_up(start_, align_);
  b_ = round_down(end_, align_);
  if (a_ > b_) {  // start and end inside one block
    single_ = true;
    count_ = 1;
    return;
  }
  head_ = start_ != a_;
  tail_ = end_ != b_;
  middle_count_ = (b_ - a_ + io_size_ - 1) / io_size_;
  // Every middle piece starts a multiple of io_size (itself a multiple of 4 KiB) after `a`, so
  // all share the alignment of the first one.
  middle_aligned_ = !staged_user_ &&
                    (user + (a_ - start_)) % std::max<std::uint32_t>(mem_align, 1) == 0;
  count_ = (head_ ? 1 : 0) + middle_count_ + (tail_ ? 1 : 0);
}

Chunk ChunkLayout::edge(std::uint64_t lo, std::uint64_t hi) const noexcept {
  const std::uint64_t ub = std::max(lo, start_);
  const std::uint64_t ue = std::min(hi, end_);
  if (op_ == IoOp::write) {
    return {ub, static_cast<std::uint32_t>(ue - ub), ub, ue,
            staged_user_ ? ChunkMode::buffered_staged : ChunkMode::buffered_user};
  }
  return {lo, static_cast<std::uint32_t>(hi - lo), ub, ue, ChunkMode::direct_staged};
}

Chunk ChunkLayout::chunk(std::uint64_t i) const noexcept {
  if (!direct_) {
    const std::uint64_t off = start_ + i * io_size_;
    const std::uint64_t len = std::min(io_size_, end_ - off);
    return {off, static_cast<std::uint32_t>(len), off, off + len,
            staged_user_ ? ChunkMode::buffered_staged : ChunkMode::buffered_user};
  }
  if (single_) return edge(round_down(start_, align_), round_up(end_, align_));
  if (head_) {
    if (i == 0) return edge(a_ - align_, a_);
    --i;
  }
  if (i == middle_count_) return edge(b_, b_ + align_);  // the tail
  const std::uint64_t off = a_ + i * io_size_;
  const std::uint64_t len = std::min(io_size_, b_ - off);
  return {off, static_cast<std::uint32_t>(len), off, off + len,
          middle_aligned_ ? ChunkMode::direct_user : ChunkMode::direct_staged};
}

std::uint64_t ChunkLayout::staged_count() const noexcept {
  if (staged_user_) return count_;
  if (!direct_ || count_ == 0) return 0;
  if (single_) return op_ == IoOp::read ? 1 : 0;
  std::uint64_t n = middle_aligned_ ? 0 : middle_count_;
  if (op_ == IoOp::read) n += (head_ ? 1 : 0) + (tail_ ? 1 : 0);
  return n;
}

}  // namespace sluice::detail
