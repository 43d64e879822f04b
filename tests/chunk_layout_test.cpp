// ChunkLayout (internal): how one request is cut into I/Os. The invariants checked for every
// layout: the chunks' caller ranges tile [start, end) exactly, in order; each I/O covers its
// caller range; O_DIRECT I/Os are aligned; chunks straight into the caller's buffer are at
// aligned addresses; staged chunks fit a staging buffer; staged_count() counts them.
#include "transfer/chunk_layout.hpp"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include <fmt/format.h>

#include "sluice/units.hpp"

namespace sluice::detail {
namespace {

struct Params {
  IoOp op = IoOp::read;
  std::uint64_t start = 0;
  std::uint64_t size = 0;
  std::uintptr_t user = 0x10000;
  bool direct = true;
  std::uint32_t offset_align = 512;
  std::uint32_t mem_align = 512;
  std::uint64_t io_size = 64 * KiB;
  bool staged_user = false;  // the caller's memory is on a device: stage every chunk
};

std::string describe(const Params& p) {
  return fmt::format(
      "{} start {} size {} user 0x{:x} direct {} offset_align {} mem_align {} io_size {} staged_user {}",
      p.op == IoOp::read ? "read" : "write", p.start, p.size, p.user, p.direct, p.offset_align,
      p.mem_align, p.io_size, p.staged_user);
}

ChunkLayout make(const Params& p) {
  return ChunkLayout(p.op, p.start, p.size, p.user, p.direct, p.offset_align, p.mem_align, p.io_size,
                     p.staged_user);
}

std::vector<Chunk> chunks_of(const ChunkLayout& l) {
  std::vector<Chunk> out;
  for (std::uint64_t i = 0; i < l.count(); ++i) out.push_back(l.chunk(i));
  return out;
}

// Checks every invariant; returns the chunks for case-specific checks.
std::vector<Chunk> check_invariants(const Params& p) {
  SCOPED_TRACE(describe(p));
  const ChunkLayout l = make(p);
  const std::vector<Chunk> cs = chunks_of(l);
  const std::uint64_t end = p.start + p.size;
  const std::uint64_t align = std::max<std::uint64_t>(p.offset_align, 4096);
  const std::uint64_t limit = std::max(align, round_down(p.io_size, align));
  if (p.size == 0) {
    EXPECT_EQ(l.count(), 0U);
    EXPECT_EQ(l.staged_count(), 0U);
    return cs;
  }
  std::uint64_t pos = p.start;
  std::uint64_t staged = 0;
  for (std::size_t i = 0; i < cs.size(); ++i) {
    const Chunk& c = cs[i];
    SCOPED_TRACE(fmt::format("chunk {}: offset {} len {} user [{}, {}) mode {}", i, c.offset, c.len,
                             c.user_begin, c.user_end, static_cast<int>(c.mode)));
    EXPECT_EQ(c.user_begin, pos) << "chunks must tile the range in order";
    EXPECT_LT(c.user_begin, c.user_end) << "empty chunk";
    EXPECT_LE(c.offset, c.user_begin);
    EXPECT_GE(c.offset + c.len, c.user_end) << "the I/O must cover its bytes";
    EXPECT_GT(c.len, 0U);
    pos = c.user_end;
    if (!p.direct) {
      EXPECT_EQ(c.mode, p.staged_user ? ChunkMode::buffered_staged : ChunkMode::buffered_user);
      EXPECT_LE(c.len, p.io_size);
    }
    if (p.staged_user) {
      EXPECT_TRUE(is_staged(c.mode)) << "device memory: every chunk is staged";
    }
    switch (c.mode) {
      case ChunkMode::direct_user:
        EXPECT_EQ(c.offset, c.user_begin);
        EXPECT_EQ(c.offset + c.len, c.user_end);
        EXPECT_EQ(c.offset % align, 0U);
        EXPECT_EQ(c.len % align, 0U);
        EXPECT_LE(c.len, limit);
        EXPECT_EQ((p.user + (c.offset - p.start)) % std::max<std::uint32_t>(p.mem_align, 1), 0U)
            << "direct into the caller's buffer needs an aligned address";
        break;
      case ChunkMode::direct_staged:
        ++staged;
        EXPECT_EQ(c.offset % align, 0U);
        EXPECT_EQ(c.len % align, 0U);
        EXPECT_LE(c.len, limit) << "a staged chunk must fit one staging buffer";
        break;
      case ChunkMode::buffered_user:
      case ChunkMode::buffered_staged:
        if (c.mode == ChunkMode::buffered_staged) {
          ++staged;
          EXPECT_LE(c.len, p.direct ? limit : p.io_size) << "a staged chunk must fit one staging buffer";
        }
        EXPECT_EQ(c.offset, c.user_begin) << "buffered I/O moves exactly the caller's bytes";
        EXPECT_EQ(c.offset + c.len, c.user_end);
        if (p.direct) {
          EXPECT_EQ(p.op, IoOp::write) << "with O_DIRECT only write edges go buffered";
          EXPECT_LT(c.len, align) << "buffered write edges stay within one block";
        }
        break;
    }
  }
  EXPECT_EQ(pos, end) << "chunks must reach the end of the range";
  EXPECT_EQ(l.staged_count(), staged);
  return cs;
}

TEST(ChunkLayout, EmptyRange) {
  for (const bool direct : {true, false}) {
    const ChunkLayout l = make({.start = 4097, .size = 0, .direct = direct});
    EXPECT_EQ(l.count(), 0U);
    EXPECT_EQ(l.staged_count(), 0U);
  }
}

TEST(ChunkLayout, BufferedCutsIntoIoSizePieces) {
  const auto cs = check_invariants({.start = 100, .size = 10000, .direct = false, .io_size = 4096});
  ASSERT_EQ(cs.size(), 3U);
  EXPECT_EQ(cs[0].offset, 100U);
  EXPECT_EQ(cs[0].len, 4096U);
  EXPECT_EQ(cs[2].offset, 100U + 8192U);
  EXPECT_EQ(cs[2].len, 10000U - 8192U);
}

TEST(ChunkLayout, AlignedRangeAndBufferIsAllDirect) {
  const Params p{.start = 8192, .size = 256 * KiB, .user = 0x200000, .io_size = 64 * KiB};
  const auto cs = check_invariants(p);
  ASSERT_EQ(cs.size(), 4U);
  for (const auto& c : cs) EXPECT_EQ(c.mode, ChunkMode::direct_user);
  EXPECT_EQ(make(p).staged_count(), 0U);
  EXPECT_TRUE(make(p).middle_aligned());
}

TEST(ChunkLayout, UnalignedStartAndEndGetHeadAndTail) {
  // [4097, 24097): head block [4096, 8192), middle [8192, 20480) in 8 KiB pieces, tail block
  // [20480, 24576).
  const Params p{.start = 4097, .size = 20000, .user = 0x10001, .io_size = 8192};
  const auto cs = check_invariants(p);
  ASSERT_EQ(cs.size(), 4U);
  EXPECT_EQ(cs[0].mode, ChunkMode::direct_staged);
  EXPECT_EQ(cs[0].offset, 4096U);
  EXPECT_EQ(cs[0].len, 4096U);
  EXPECT_EQ(cs[1].mode, ChunkMode::direct_user);
  EXPECT_EQ(cs[1].offset, 8192U);
  EXPECT_EQ(cs[1].len, 8192U);
  EXPECT_EQ(cs[2].offset, 16384U);
  EXPECT_EQ(cs[2].len, 4096U);
  EXPECT_EQ(cs[3].mode, ChunkMode::direct_staged);
  EXPECT_EQ(cs[3].offset, 20480U);
  EXPECT_EQ(cs[3].len, 4096U);
  EXPECT_EQ(cs[3].user_end, 24097U);
  EXPECT_EQ(make(p).staged_count(), 2U);
}

TEST(ChunkLayout, HeadOnlyAndTailOnly) {
  const auto head = check_invariants({.start = 100, .size = 8192 - 100, .user = 0x10000 + 100});
  ASSERT_EQ(head.size(), 2U);
  EXPECT_EQ(head[0].mode, ChunkMode::direct_staged);
  EXPECT_EQ(head[1].mode, ChunkMode::direct_user);
  const auto tail = check_invariants({.start = 4096, .size = 5000, .user = 0x10000});
  ASSERT_EQ(tail.size(), 2U);
  EXPECT_EQ(tail[0].mode, ChunkMode::direct_user);
  EXPECT_EQ(tail[1].mode, ChunkMode::direct_staged);
  EXPECT_EQ(tail[1].user_end, 9096U);
}

TEST(ChunkLayout, RangeInsideOneBlockIsOneStagedRead) {
  for (const auto& [start, size] : {std::pair<std::uint64_t, std::uint64_t>{0, 1},
                                    {1, 511}, {4095, 1}, {4097, 4094}, {100, 100}}) {
    const Params p{.start = start, .size = size};
    const auto cs = check_invariants(p);
    ASSERT_EQ(cs.size(), 1U);
    EXPECT_EQ(cs[0].mode, ChunkMode::direct_staged);
    EXPECT_EQ(cs[0].offset, round_down(start, 4096));
    EXPECT_EQ(cs[0].len, 4096U);
    EXPECT_EQ(make(p).staged_count(), 1U);
  }
}

TEST(ChunkLayout, RangeAcrossOneBoundaryWithNoMiddle) {
  // [4000, 4200): head [0, 4096) and tail [4096, 8192), nothing in between.
  const auto cs = check_invariants({.start = 4000, .size = 200});
  ASSERT_EQ(cs.size(), 2U);
  EXPECT_EQ(cs[0].offset, 0U);
  EXPECT_EQ(cs[1].offset, 4096U);
}

TEST(ChunkLayout, WriteEdgesAreBufferedAndNotStaged) {
  const Params p{.op = IoOp::write, .start = 4097, .size = 20000, .user = 0x10001, .io_size = 8192};
  const auto cs = check_invariants(p);
  ASSERT_EQ(cs.size(), 4U);
  EXPECT_EQ(cs[0].mode, ChunkMode::buffered_user);
  EXPECT_EQ(cs[0].offset, 4097U);
  EXPECT_EQ(cs[0].len, 8192U - 4097U);
  EXPECT_EQ(cs[3].mode, ChunkMode::buffered_user);
  EXPECT_EQ(cs[3].offset, 20480U);
  EXPECT_EQ(cs[3].len, 24097U - 20480U);
  EXPECT_EQ(make(p).staged_count(), 0U);
  const auto single = check_invariants({.op = IoOp::write, .start = 10, .size = 10});
  ASSERT_EQ(single.size(), 1U);
  EXPECT_EQ(single[0].mode, ChunkMode::buffered_user);
  EXPECT_EQ(single[0].offset, 10U);
  EXPECT_EQ(single[0].len, 10U);
  EXPECT_EQ(make({.op = IoOp::write, .start = 10, .size = 10}).staged_count(), 0U);
}

TEST(ChunkLayout, MisalignedBufferStagesTheMiddle) {
  const Params p{.start = 0, .size = 64 * KiB, .user = 0x10001, .io_size = 16 * KiB};
  const auto cs = check_invariants(p);
  ASSERT_EQ(cs.size(), 4U);
  for (const auto& c : cs) EXPECT_EQ(c.mode, ChunkMode::direct_staged);
  EXPECT_FALSE(make(p).middle_aligned());
  EXPECT_EQ(make(p).staged_count(), 4U);
  // Writes stage a misaligned middle too.
  Params w = p;
  w.op = IoOp::write;
  EXPECT_EQ(make(w).staged_count(), 4U);
}

TEST(ChunkLayout, BufferAlignedLikeTheOffsetGoesDirect) {
  // The middle starts at 8192, which is user + 4095: aligned when user = 1 mod 4096.
  const Params p{.start = 4097, .size = 64 * KiB, .user = 0x10001, .mem_align = 4096};
  EXPECT_TRUE(make(p).middle_aligned());
  check_invariants(p);
}

TEST(ChunkLayout, SmallMemAlignAcceptsSlightlyOffBuffers) {
  // statx may report a dio_mem_align of 4: an address 4 past a page is then fine.
  Params p{.start = 0, .size = 32 * KiB, .user = 0x10004, .mem_align = 4};
  EXPECT_TRUE(make(p).middle_aligned());
  check_invariants(p);
  p.user = 0x10002;
  EXPECT_FALSE(make(p).middle_aligned());
  check_invariants(p);
}

TEST(ChunkLayout, AlignmentIsAtLeastAPage) {
  // A 512-byte-sector device still gets page-aligned edges, so buffered writes of the edges
  // never share a page with direct writes of the middle.
  const auto cs = check_invariants({.op = IoOp::write, .start = 512, .size = 16 * KiB, .offset_align = 512});
  ASSERT_GE(cs.size(), 2U);
  EXPECT_EQ(cs[0].offset, 512U);
  EXPECT_EQ(cs[0].user_end, 4096U);
}

TEST(ChunkLayout, LargeOffsetAlignment) {
  const auto cs = check_invariants({.start = 100, .size = 100 * KiB, .offset_align = 16384,
                                    .mem_align = 4096, .io_size = 64 * KiB});
  for (const auto& c : cs) {
    if (c.mode != ChunkMode::buffered_user) {
      EXPECT_EQ(c.offset % 16384, 0U);
    }
  }
}

TEST(ChunkLayout, IoSizeIsRoundedToTheAlignment) {
  // io_size 6000 with 4 KiB blocks: pieces of 4096.
  const auto cs = check_invariants({.start = 0, .size = 20 * KiB, .io_size = 6000});
  ASSERT_EQ(cs.size(), 5U);
  for (const auto& c : cs) EXPECT_EQ(c.len, 4096U);
}

TEST(ChunkLayout, HugeRangeCostsNoMemory) {
  const Params p{.start = 1, .size = std::uint64_t{1} << 40, .io_size = MiB};
  const ChunkLayout l = make(p);
  EXPECT_EQ(l.count(), 2U + ((std::uint64_t{1} << 40) - 4096 + MiB - 1) / MiB);
  const Chunk last = l.chunk(l.count() - 1);
  EXPECT_EQ(last.user_end, p.start + p.size);
  const Chunk before = l.chunk(l.count() - 2);
  EXPECT_EQ(before.user_end, last.user_begin);
}

TEST(ChunkLayout, DeviceMemoryStagesEveryChunk) {
  // Aligned range and address: host memory would go all direct, device memory cannot.
  Params p{.start = 0, .size = 256 * KiB, .user = 0x200000, .io_size = 64 * KiB, .staged_user = true};
  auto cs = check_invariants(p);
  ASSERT_EQ(cs.size(), 4U);
  for (const auto& c : cs) EXPECT_EQ(c.mode, ChunkMode::direct_staged);
  EXPECT_EQ(make(p).staged_count(), 4U);
  EXPECT_FALSE(make(p).middle_aligned());
  // Writes: the edges are buffered writes from staging.
  p = {.op = IoOp::write, .start = 100, .size = 20000, .io_size = 8192, .staged_user = true};
  cs = check_invariants(p);
  ASSERT_GE(cs.size(), 3U);
  EXPECT_EQ(cs.front().mode, ChunkMode::buffered_staged);
  EXPECT_EQ(cs.back().mode, ChunkMode::buffered_staged);
  EXPECT_EQ(make(p).staged_count(), cs.size());
  // Without O_DIRECT: io_size pieces, all staged.
  p = {.start = 5, .size = 10000, .direct = false, .io_size = 4096, .staged_user = true};
  cs = check_invariants(p);
  ASSERT_EQ(cs.size(), 3U);
  EXPECT_EQ(make(p).staged_count(), 3U);
}

TEST(ChunkLayout, RandomLayoutsKeepEveryInvariant) {
  std::mt19937_64 rng(20240601);
  const std::uint32_t offset_aligns[] = {512, 4096, 8192};
  const std::uint32_t mem_aligns[] = {1, 4, 512, 4096};
  const std::uint64_t io_sizes[] = {4096, 8192, 12288, 65536, MiB, 5000};
  for (int i = 0; i < 3000 && !::testing::Test::HasFailure(); ++i) {
    Params p;
    p.op = rng() % 2 == 0 ? IoOp::read : IoOp::write;
    p.start = rng() % 3 == 0 ? (rng() % 64) * 4096 : rng() % (4 * MiB);
    const unsigned k = rng() % 4;
    p.size = k == 0 ? rng() % 4097 : (k == 1 ? rng() % 65536 : (k == 2 ? (rng() % 64) * 4096 : rng() % (3 * MiB)));
    p.user = 0x100000 + (rng() % 2 == 0 ? (rng() % 3) * 4096 : rng() % 8192);
    p.direct = rng() % 5 != 0;
    p.offset_align = offset_aligns[rng() % std::size(offset_aligns)];
    p.mem_align = mem_aligns[rng() % std::size(mem_aligns)];
    p.io_size = io_sizes[rng() % std::size(io_sizes)];
    p.staged_user = rng() % 4 == 0;
    if (p.direct && std::max<std::uint64_t>(p.offset_align, 4096) > p.io_size) p.io_size = p.offset_align;
    check_invariants(p);
  }
}

}  // namespace
}  // namespace sluice::detail
