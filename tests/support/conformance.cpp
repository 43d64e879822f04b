#include "conformance.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <future>
#include <random>
#include <vector>

#include <fmt/format.h>

#include "sluice/error.hpp"
#include "sluice/file.hpp"
#include "sluice/transfer.hpp"
#include "sluice/units.hpp"
#include "test_util.hpp"

namespace sluice::test::conformance {
namespace {

constexpr std::size_t shifts[] = {0, 1, 7, 512, 4096};
constexpr std::uint64_t small_sizes[] = {0, 1, 511, 4095, 4096, 4097};

std::string case_name(std::uint64_t off, std::uint64_t size, std::size_t shift) {
  return fmt::format("offset {} size {} buffer shift {}", off, size, shift);
}

// One library read checked against pread; false after a failure.
bool check_read(const File& f, const std::string& path, const ConfigPtr& cfg, std::uint64_t off,
                std::uint64_t size, std::size_t shift) {
  SCOPED_TRACE(case_name(off, size, shift));
  GuardedBuffer buf(size, shift);
  buf.fill(std::byte{0x5A});
  const TransferResult r = sluice::read(f, buf.data(), size, off, options_for(cfg));
  const std::vector<std::byte> want = pread_file(path, off, size);
  EXPECT_EQ(r.bytes, want.size());
  EXPECT_EQ(r.path, Path::host);
  EXPECT_TRUE(same_bytes(buf.first(std::min<std::uint64_t>(r.bytes, size)), want));
  EXPECT_TRUE(buf.guards_intact());
  return !::testing::Test::HasFailure();
}

}  // namespace

void reads_match_pread(const std::string& dir, const ConfigPtr& cfg, std::uint64_t seed) {
  const std::string path = dir + "/read-grid.bin";
  const std::uint64_t fsize = 5 * MiB + 1237;  // several MiB, not a multiple of any block
  write_file(path, random_bytes(fsize, seed));
  const File f = File::open(path, OpenMode::read);

  const std::uint64_t offsets[] = {0, 1, 511, 4096, 4097, 65536 + 100, fsize - 5000};
  for (const std::uint64_t off : offsets) {
    for (const std::uint64_t size : small_sizes) {
      for (const std::size_t shift : shifts) {
        if (!check_read(f, path, cfg, off, size, shift)) return;
      }
    }
  }
  for (const std::uint64_t off : {std::uint64_t{0}, std::uint64_t{4097}}) {
    for (const std::size_t shift : shifts) {
      if (!check_read(f, path, cfg, off, 3 * MiB + 333, shift)) return;
    }
  }
  // The whole file in one call, through an aligned and a misaligned buffer.
  if (!check_read(f, path, cfg, 0, fsize, 0)) return;
  (void)check_read(f, path, cfg, 0, fsize, 7);
}

void random_reads(const std::string& dir, const ConfigPtr& cfg, std::uint64_t seed, int rounds) {
  const std::string path = dir + "/read-random.bin";
  std::mt19937_64 rng(seed);
  const std::uint64_t fsize = 2 * MiB + rng() % (2 * MiB);
  write_file(path, random_bytes(fsize, seed + 1));
  const File f = File::open(path, OpenMode::read);
  for (int i = 0; i < rounds; ++i) {
    const std::uint64_t off = rng() % (fsize + 16384);
    const unsigned kind = rng() % 10;
    const std::uint64_t size = kind < 5 ? rng() % 8193 : (kind < 9 ? rng() % (256 * KiB) : rng() % (2 * MiB));
    const std::size_t shift = rng() % 2 == 0 ? shifts[rng() % std::size(shifts)] : rng() % 4097;
    SCOPED_TRACE(fmt::format("round {} of seed {}", i, seed));
    if (!check_read(f, path, cfg, off, size, shift)) return;
  }
}

void writes_then_reads(const std::string& dir, const ConfigPtr& cfg, std::uint64_t seed) {
  const std::string path = dir + "/write-grid.bin";
  std::vector<std::byte> model = random_bytes(MiB + 5, seed);
  write_file(path, model);
  const File f = File::open(path, OpenMode::read_write);
  std::uint64_t round = 0;

  auto one = [&](std::uint64_t off, std::uint64_t size, std::size_t shift) {
    SCOPED_TRACE(case_name(off, size, shift));
    GuardedBuffer src(size, shift);
    const auto data = random_bytes(size, seed + ++round);
    std::copy(data.begin(), data.end(), src.data());
    const TransferResult r = sluice::write(f, src.data(), size, off, options_for(cfg));
    EXPECT_EQ(r.bytes, size);
    EXPECT_EQ(r.path, Path::host);
    EXPECT_TRUE(src.guards_intact());
    if (size > 0) {
      if (model.size() < off + size) model.resize(off + size, std::byte{0});
      std::copy(data.begin(), data.end(), model.begin() + static_cast<std::ptrdiff_t>(off));
    }
    EXPECT_EQ(file_size(path), model.size());
    // The written range and a page on either side, with pread.
    const std::uint64_t lo = off > 4096 ? off - 4096 : 0;
    const std::uint64_t hi = std::max(lo, std::min<std::uint64_t>(model.size(), off + size + 4096));
    EXPECT_TRUE(same_bytes(pread_file(path, lo, hi - lo),
                           std::span(model).subspan(lo, hi - lo)));
    // And back through the library, with a different buffer alignment.
    GuardedBuffer back(size, (shift + 1) % 4097);
    const TransferResult rr = sluice::read(f, back.data(), size, off, options_for(cfg));
    EXPECT_EQ(rr.bytes, size);
    EXPECT_TRUE(same_bytes(back.first(size), data));
    EXPECT_TRUE(back.guards_intact());
    return !::testing::Test::HasFailure();
  };

  for (const std::size_t shift : shifts) {
    for (const std::uint64_t size : small_sizes) {
      const std::uint64_t end = model.size();
      for (const std::uint64_t off : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{4096},
                                      std::uint64_t{8191}, end - 10, end + 5000}) {
        if (!one(off, size, shift)) return;
      }
    }
    if (!one(4097, 2 * MiB + 3, shift)) return;
    if (!one(0, 2 * MiB, shift)) return;
  }
  EXPECT_TRUE(same_bytes(read_whole(path), model));
}

void read_past_eof(const std::string& dir, const ConfigPtr& cfg, std::uint64_t seed) {
  const std::string path = dir + "/eof.bin";
  const std::uint64_t fsize = 10000;
  write_file(path, random_bytes(fsize, seed));
  const File f = File::open(path, OpenMode::read);
  struct Case {
    std::uint64_t off, size, want;
  };
  const Case cases[] = {
      {fsize - 1, 1, 1},          {fsize - 1, 4096, 1},   {fsize - 100, 4096, 100},
      {fsize - 5000, 8192, 5000}, {0, fsize + 1, fsize},  {0, 3 * 4096, fsize},
      {4096, 64 * KiB, fsize - 4096},
      {fsize, 1, 0},              {fsize, 4096, 0},       {fsize + 1, 10, 0},
      {fsize + 4096, 4096, 0},    {std::uint64_t{1} << 40, 4096, 0},
  };
  for (const auto& c : cases) {
    for (const std::size_t shift : {std::size_t{0}, std::size_t{7}}) {
      SCOPED_TRACE(case_name(c.off, c.size, shift));
      GuardedBuffer buf(c.size, shift);
      const TransferResult r = sluice::read(f, buf.data(), c.size, c.off, options_for(cfg));
      ASSERT_EQ(r.bytes, c.want);
      EXPECT_TRUE(same_bytes(buf.first(r.bytes), pread_file(path, c.off, c.size)));
      EXPECT_TRUE(buf.guards_intact());
    }
  }
  // An empty file has nothing anywhere.
  const std::string empty = dir + "/empty.bin";
  write_file(empty, {});
  const File e = File::open(empty, OpenMode::read);
  GuardedBuffer buf(8192);
  EXPECT_EQ(sluice::read(e, buf.data(), 8192, 0, options_for(cfg)).bytes, 0U);
  EXPECT_EQ(sluice::read(e, buf.data(), 1, 4096, options_for(cfg)).bytes, 0U);
  EXPECT_TRUE(buf.guards_intact());
}

void write_extends_file(const std::string& dir, const ConfigPtr& cfg, std::uint64_t seed) {
  const std::string path = dir + "/extend.bin";
  const File f = File::open(path, OpenMode::read_write, {.truncate = true});
  ASSERT_EQ(f.size(), 0U);
  std::vector<std::byte> model;
  std::uint64_t round = 0;
  auto put = [&](std::uint64_t off, std::uint64_t size, std::size_t shift) {
    SCOPED_TRACE(case_name(off, size, shift));
    GuardedBuffer src(size, shift);
    const auto data = random_bytes(size, seed + ++round);
    std::copy(data.begin(), data.end(), src.data());
    EXPECT_EQ(sluice::write(f, src.data(), size, off, options_for(cfg)).bytes, size);
    if (size > 0 && model.size() < off + size) model.resize(off + size, std::byte{0});
    std::copy(data.begin(), data.end(), model.begin() + static_cast<std::ptrdiff_t>(off));
    EXPECT_EQ(f.size(), model.size());
  };
  put(0, 4097, 0);               // a file from nothing, ending mid-block
  put(50000, 10000, 1);          // past the end: a hole of zeros in between
  put(MiB, 64 * KiB, 0);         // block-aligned range and buffer: the pure O_DIRECT case
  put(3 * MiB + 1, 1, 7);        // one byte far past the end
  put(3 * MiB + 2, 0, 0);        // an empty write changes nothing
  put(3 * MiB - 100, 300, 512);  // overlapping the end
  EXPECT_TRUE(same_bytes(read_whole(path), model));
}

void async_round_trip(const std::string& dir, const ConfigPtr& cfg, std::uint64_t seed) {
  const std::string path = dir + "/async.bin";
  constexpr int pieces = 8;
  constexpr std::uint64_t piece = 256 * KiB + 13;
  const std::vector<std::byte> data = random_bytes(pieces * piece, seed);
  const File f = File::open(path, OpenMode::read_write, {.truncate = true});
  {
    std::vector<std::unique_ptr<GuardedBuffer>> srcs;
    std::vector<TransferFuture> futs;
    for (int i = 0; i < pieces; ++i) {
      srcs.push_back(std::make_unique<GuardedBuffer>(piece, shifts[i % std::size(shifts)]));
      std::copy_n(data.begin() + static_cast<std::ptrdiff_t>(i * piece), piece, srcs.back()->data());
      futs.push_back(sluice::write_async(f, srcs.back()->data(), piece, i * piece, options_for(cfg)));
    }
    for (auto& fut : futs) EXPECT_EQ(fut.get().bytes, piece);
  }
  EXPECT_TRUE(same_bytes(read_whole(path), data));

  std::vector<std::unique_ptr<GuardedBuffer>> dsts;
  std::vector<TransferFuture> futs;
  for (int i = 0; i < pieces; ++i) {
    dsts.push_back(std::make_unique<GuardedBuffer>(piece, shifts[(i + 2) % std::size(shifts)]));
    futs.push_back(sluice::read_async(f, dsts.back()->data(), piece, i * piece, options_for(cfg)));
  }
  for (int i = 0; i < pieces; ++i) {
    EXPECT_EQ(futs[static_cast<std::size_t>(i)].get().bytes, piece);
    EXPECT_TRUE(same_bytes(dsts[static_cast<std::size_t>(i)]->first(piece),
                           std::span(data).subspan(i * piece, piece)));
    EXPECT_TRUE(dsts[static_cast<std::size_t>(i)]->guards_intact());
  }

  // Errors arrive through the future, not as a throw from the call.
  const File wo = File::open(path, OpenMode::write);
  GuardedBuffer buf(100);
  auto bad = sluice::read_async(wo, buf.data(), 100, 0, options_for(cfg));
  EXPECT_THROW((void)bad.get(), Error);
  const File ro = File::open(path, OpenMode::read);
  auto bad_write = sluice::write_async(ro, buf.data(), 100, 0, options_for(cfg));
  EXPECT_THROW((void)bad_write.get(), Error);
}

void synced_writes(const std::string& dir, const ConfigPtr& cfg, std::uint64_t seed) {
  const std::string path = dir + "/sync.bin";
  const File f = File::open(path, OpenMode::read_write, {.truncate = true});
  std::vector<std::byte> model;
  std::uint64_t round = 0;
  for (const SyncMode mode : {SyncMode::none, SyncMode::data, SyncMode::full}) {
    for (const auto& [off, size] : {std::pair<std::uint64_t, std::uint64_t>{0, 100000}, {4096, 8192}, {99999, 3}}) {
      SCOPED_TRACE(fmt::format("sync mode {} offset {} size {}", static_cast<int>(mode), off, size));
      const auto data = random_bytes(size, seed + ++round);
      TransferOptions o = options_for(cfg);
      o.sync = mode;
      EXPECT_EQ(sluice::write(f, data.data(), size, off, o).bytes, size);
      if (model.size() < off + size) model.resize(off + size);
      std::copy(data.begin(), data.end(), model.begin() + static_cast<std::ptrdiff_t>(off));
      EXPECT_TRUE(same_bytes(read_whole(path), model));
    }
  }
  // A sync-only call (nothing to write) is allowed and flushes what is there.
  TransferOptions o = options_for(cfg);
  o.sync = SyncMode::full;
  EXPECT_EQ(sluice::write(f, nullptr, 0, 0, o).bytes, 0U);
}

void path_and_reason(const std::string& dir, const ConfigPtr& cfg, std::uint64_t seed) {
  const std::string path = dir + "/reason.bin";
  const std::uint64_t fsize = 2 * MiB;
  write_file(path, random_bytes(fsize, seed));
  const File f = File::open(path, OpenMode::read_write);
  const bool direct = cfg->direct_io && f.has_direct();
  const auto opts = options_for(cfg);

  GuardedBuffer aligned(MiB, 0);
  const TransferResult r = sluice::read(f, aligned.data(), MiB, 0, opts);
  EXPECT_EQ(r.path, Path::host);
  EXPECT_EQ(r.bytes, MiB);
  EXPECT_GT(r.ios, 0U);
  EXPECT_GE(r.seconds, 0.0);
  if (!direct) {
    EXPECT_TRUE(r.reason.starts_with("buffered: ")) << r.reason;
    if (!cfg->direct_io) {
      EXPECT_NE(r.reason.find("disabled by configuration"), std::string::npos) << r.reason;
    } else {
      EXPECT_NE(r.reason.find(f.direct_reason()), std::string::npos) << r.reason;
      if (f.fs_type() == "tmpfs") {
        EXPECT_NE(r.reason.find("tmpfs"), std::string::npos) << r.reason;
      }
    }
    return;
  }
  if (cfg->cache_policy == CachePolicy::automatic) {
    // Just written, so (short of memory pressure) cached: tests/cache_policy_test.cpp has the rest.
    EXPECT_TRUE(r.reason.starts_with("page cache held ")) << r.reason;
    return;
  }
  EXPECT_EQ(r.reason, "O_DIRECT");
  EXPECT_EQ(sluice::write(f, aligned.data(), MiB, MiB, opts).reason, "O_DIRECT");

  // An unaligned range through a buffer aligned like the file offset (4097 = 1 mod 4096): the
  // middle goes direct into the buffer, only the edges through staging.
  GuardedBuffer like_offset(64 * KiB, 1);
  const TransferResult edges = sluice::read(f, like_offset.data(), 64 * KiB, 4097, opts);
  EXPECT_EQ(edges.reason, "O_DIRECT; unaligned head/tail through staging");

  // A buffer that is not aligned like the file offset goes through staging, and says so.
  if (f.mem_align() > 1) {
    GuardedBuffer odd(MiB, 1);
    const TransferResult s = sluice::read(f, odd.data(), MiB, 0, opts);
    EXPECT_TRUE(s.reason.starts_with("O_DIRECT through staging buffers")) << s.reason;
    EXPECT_TRUE(same_bytes(odd.first(MiB), pread_file(path, 0, MiB)));
  }
}

}  // namespace sluice::test::conformance
