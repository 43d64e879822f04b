// cache_policy: reads of ranges the page cache holds fully, partly or not at all take the
// buffered descriptor for the chunks it holds and O_DIRECT for the rest, and say so; bytes are
// exact for unaligned ranges whose chunks straddle cached and uncached pages while another
// thread writes elsewhere in the file; dirty pages read back as written; bypass is the
// behaviour from before residency was asked, and use reads everything buffered. A recording
// engine sees which descriptor every request went to. Needs a disk-backed folder with O_DIRECT
// whose cache can be dropped per file; skips elsewhere.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "sluice/device.hpp"
#include "sluice/file.hpp"
#include "sluice/stats.hpp"
#include "sluice/transfer.hpp"
#include "sluice/units.hpp"
#include "support/residency_util.hpp"
#include "support/test_util.hpp"

namespace sluice {
namespace {

using test::Folder;
using test::GuardedBuffer;

// Which descriptor each read went to, across every thread's engine.
struct Recorded {
  std::uint64_t offset;
  std::uint32_t len;
  bool direct;
  bool readahead_off;  // on File::cache_fd
  bool cached_only;    // only from the page cache (RWF_NOWAIT)
};

class Recorder {
 public:
  void watch(const File& f) {
    std::lock_guard lock(mutex_);
    direct_fd_ = f.direct_fd();
    buffered_fd_ = f.fd();
    cache_fd_ = f.cache_fd();
    reads_.clear();
  }
  void note(const IoRequest& r) {
    if (r.op != IoOp::read) return;
    std::lock_guard lock(mutex_);
    if (!r.fixed_file && r.fd != direct_fd_ && r.fd != buffered_fd_ && r.fd != cache_fd_) return;  // another file
    // Only the O_DIRECT descriptor is ever registered as a fixed file (pipeline.cpp).
    reads_.push_back({r.offset, r.len, r.fixed_file || r.fd == direct_fd_, !r.fixed_file && r.fd == cache_fd_,
                      r.cached_only});
  }
  std::vector<Recorded> reads() {
    std::lock_guard lock(mutex_);
    return reads_;
  }

 private:
  std::mutex mutex_;
  int direct_fd_ = -1, buffered_fd_ = -1, cache_fd_ = -1;
  std::vector<Recorded> reads_;
};

class RecordingEngine final : public test::ForwardingEngine {
 public:
  RecordingEngine(std::unique_ptr<IoEngine> inner, Recorder& rec) : ForwardingEngine(std::move(inner)), rec_(rec) {}
  [[nodiscard]] std::string_view name() const noexcept override { return "recording"; }
  void prepare(const IoRequest& req) override {
    rec_.note(req);
    inner_->prepare(req);
  }

 private:
  Recorder& rec_;
};

std::uint64_t direct_bytes(const std::vector<Recorded>& v) {
  std::uint64_t n = 0;
  for (const auto& r : v) n += r.direct ? r.len : 0;
  return n;
}

std::uint64_t buffered_bytes(const std::vector<Recorded>& v) {
  std::uint64_t n = 0;
  for (const auto& r : v) n += r.direct ? 0 : r.len;
  return n;
}

// A reason that starts "page cache held N% of the range" (or "... holds N% ..."), split into N
// and the rest. The decisions a reason states (buffered, mixed, the byte split) are asserted
// exactly; N, the probes' count, within a point or two: cachestat's count is not exact under
// load. Two TSan runs of .ci/run saw 49% for the half a test had read in and 99% for a whole
// range, with every page of it mapped and locked (test::pin_resident) and every chunk read the
// way the full count says.
struct Held {
  int pct = -1;
  std::string rest;
};

Held held(const std::string& reason) {
  static const std::regex re(R"(^(.*page cache (?:held|holds) )(\d+)% of the range(.*)$)");
  std::smatch m;
  if (!std::regex_match(reason, m, re)) return {-1, reason};
  return {std::stoi(m[2].str()), m[1].str() + "N%" + m[3].str()};
}

class CachePolicyTest : public ::testing::TestWithParam<std::string> {
 protected:
  static constexpr std::uint64_t size = 8 * MiB;

  void SetUp() override {
    std::string why;
    if (!test::engine_usable(GetParam(), &why)) GTEST_SKIP() << why;
    const auto root = test::folder_root(Folder::disk, &why);
    if (!root) GTEST_SKIP() << why;
    dir_ = std::make_unique<test::TempDir>(*root);
    path_ = dir_->file("data.bin");
    data_ = test::random_bytes(size, test::test_seed(11));
    test::write_file(path_, data_);
    file_ = File::open(path_, OpenMode::read);
    if (!file_.has_direct()) GTEST_SKIP() << "no O_DIRECT: " << file_.direct_reason();
    if (!test::drop_cache(path_))
      GTEST_SKIP() << "the page cache of " << path_ << " cannot be dropped per file";
    recorder_.watch(file_);
    factory_ = std::make_unique<test::ScopedEngineFactory>([this](EngineKind k, unsigned depth) {
      return std::make_unique<RecordingEngine>(test::make_inner_engine(k, depth), recorder_);
    });
  }

  [[nodiscard]] TransferOptions options(std::string_view policy,
                                        std::uint64_t io_size = 256 * KiB) const {
    Config cfg;
    cfg.set("engine", GetParam());
    cfg.set("threads", "2");
    cfg.set("queue_depth", "4");
    cfg.set("io_size", std::to_string(io_size));
    cfg.set("cache_policy", policy);
    return {.config = std::make_shared<const Config>(std::move(cfg))};
  }

  // Reads [offset, offset + n) into a buffer `shift` bytes past alignment and checks the bytes.
  TransferResult read_checked(std::uint64_t offset, std::uint64_t n, const TransferOptions& o,
                              std::size_t shift = 0) {
    recorder_.watch(file_);
    GuardedBuffer buf(n, shift);
    const TransferResult r = sluice::read(file_, buf.data(), n, offset, o);
    EXPECT_EQ(r.bytes, n);
    EXPECT_TRUE(test::same_bytes(buf.first(n), std::span(data_).subspan(offset, n)));
    EXPECT_TRUE(buf.guards_intact());
    return r;
  }

  // Reads [offset, offset + n) into the page cache and keeps it there for the rest of the test
  // (test::pin_resident): the reasons below state what the probes found of it.
  void resident(std::uint64_t offset, std::uint64_t n) {
    pins_.push_back(test::pin_resident(path_, offset, n));
  }

  std::unique_ptr<test::TempDir> dir_;
  std::string path_;
  std::vector<std::byte> data_;
  File file_;
  Recorder recorder_;
  std::unique_ptr<test::ScopedEngineFactory> factory_;
  std::vector<test::PinnedRange> pins_;
};

TEST_P(CachePolicyTest, FullyResidentRangeIsReadBuffered) {
  resident(0, size);
  const TransferResult r = read_checked(0, size, options("auto"));
  EXPECT_EQ(r.path, Path::host);
  EXPECT_EQ(held(r.reason).rest, "page cache held N%: buffered") << r.reason;
  EXPECT_GE(held(r.reason).pct, 98) << r.reason;
  const auto reads = recorder_.reads();
  EXPECT_EQ(direct_bytes(reads), 0U);
  EXPECT_EQ(buffered_bytes(reads), size);
  for (const Recorded& rec : reads) EXPECT_TRUE(rec.readahead_off) << "read at " << rec.offset;
}

// Small reads (128 KiB at most) of cached ranges are one pread on the calling thread, outside the
// engines: the same bytes, reason and counters as the pipeline's, and never an O_DIRECT request.
// (Whether the pipeline or the shortcut read them is not asserted: cachestat may count a page
// short under load, and the pipeline then reads the range, buffered as well.)
TEST_P(CachePolicyTest, SmallCachedReadsAreBufferedWithTheirCountersAndReason) {
  resident(0, size);
  const StatsSnapshot before = stats().snapshot();
  std::uint64_t bytes = 0;
  const std::pair<std::uint64_t, std::uint64_t> ranges[] = {{0, 1},
                                                            {4095, 100},
                                                            {8192, 4096},
                                                            {3, 128 * KiB},
                                                            {size - 128 * KiB, 128 * KiB},
                                                            {MiB + 1, 128 * KiB + 1}};
  for (const auto& [offset, n] : ranges) {
    for (std::size_t shift : {std::size_t{0}, std::size_t{7}}) {
      const TransferResult r = read_checked(offset, n, options("auto"), shift);
      EXPECT_EQ(r.path, Path::host);
      EXPECT_EQ(held(r.reason).rest, "page cache held N%: buffered")
          << offset << "+" << n << ": " << r.reason;
      EXPECT_EQ(r.cached_bytes, n) << offset << "+" << n;
      EXPECT_GE(r.ios, 1U);
      EXPECT_EQ(direct_bytes(recorder_.reads()), 0U) << offset << "+" << n;
      for (const Recorded& rec : recorder_.reads()) EXPECT_TRUE(rec.readahead_off) << rec.offset;
      bytes += n;
    }
  }
  const StatsSnapshot after = stats().snapshot();
  EXPECT_EQ(
      after.at(Path::host, Direction::read).bytes - before.at(Path::host, Direction::read).bytes,
      bytes);
  EXPECT_EQ(after.at(Path::host, Direction::read).ops - before.at(Path::host, Direction::read).ops,
            std::size(ranges) * 2);
  // The end of the file clamps, as for any read.
  std::vector<std::byte> tail(64 * KiB);
  const TransferResult end =
      sluice::read(file_, tail.data(), tail.size(), size - 1000, options("auto"));
  EXPECT_EQ(end.bytes, 1000U);
  EXPECT_TRUE(test::same_bytes(std::span(tail).first(1000), std::span(data_).subspan(size - 1000)));
  // use: buffered without asking; bypass: O_DIRECT whatever the cache holds.
  EXPECT_EQ(read_checked(5000, 4096, options("use")).reason, "buffered: cache_policy use");
  EXPECT_EQ(direct_bytes(recorder_.reads()), 0U);
  EXPECT_EQ(read_checked(8192, 4096, options("bypass")).reason, "O_DIRECT");
  EXPECT_EQ(direct_bytes(recorder_.reads()), 4096U);
}

// A small read of a cached range: the file's first is probed, then read (one plain request);
// once one found its range cached (File::last_small_read_cached), the next is one request that
// takes the bytes only if the page cache holds all of them (cached_only), which answers the
// residency question: nothing probes. Reason, ios and counters are what a probed read reports.
TEST_P(CachePolicyTest, SmallCachedReadIsOneCachedOnlyRequest) {
  resident(0, size);
  EXPECT_FALSE(file_.last_small_read_cached());
  const TransferResult first = read_checked(8192, 4096, options("auto"));
  EXPECT_EQ(first.reason, "page cache held 100% of the range: buffered");
  EXPECT_EQ(first.ios, 1U);
  auto reads = recorder_.reads();
  ASSERT_EQ(reads.size(), 1U);
  EXPECT_FALSE(reads[0].cached_only);
  EXPECT_TRUE(file_.last_small_read_cached());
  const StatsSnapshot before = stats().snapshot();
  const TransferResult r = read_checked(65536 + 100, 4096, options("auto"));
  EXPECT_EQ(r.reason, "page cache held 100% of the range: buffered");
  EXPECT_EQ(r.ios, 1U);
  EXPECT_EQ(r.cached_bytes, 4096U);
  reads = recorder_.reads();
  ASSERT_EQ(reads.size(), 1U);
  EXPECT_TRUE(reads[0].cached_only);
  EXPECT_TRUE(reads[0].readahead_off);
  EXPECT_EQ(reads[0].len, 4096U);
  const StatsSnapshot after = stats().snapshot();
  const auto delta = [&](auto field) {
    return after.at(Path::host, Direction::read).*field - before.at(Path::host, Direction::read).*field;
  };
  EXPECT_EQ(delta(&PathCounters::ops), 1U);
  EXPECT_EQ(delta(&PathCounters::bytes), 4096U);
  EXPECT_EQ(delta(&PathCounters::ios), 1U);
  EXPECT_EQ(delta(&PathCounters::errors), 0U);
}

// A small read of a range the cache does not hold is probed first (no cached_only try, which
// would start reading the range into the cache) and read with O_DIRECT: the cache is left alone
// and the hint stays off.
TEST_P(CachePolicyTest, SmallColdReadIsProbedAndReadDirect) {
  const TransferResult r = read_checked(8192, 4096, options("auto"));
  EXPECT_EQ(r.reason, "page cache held 0% of the range: O_DIRECT");
  EXPECT_EQ(r.cached_bytes, 0U);
  const auto reads = recorder_.reads();
  for (const Recorded& rec : reads) EXPECT_FALSE(rec.cached_only) << rec.offset;
  EXPECT_EQ(direct_bytes(reads), 4096U);
  EXPECT_EQ(r.ios, reads.size());
  EXPECT_FALSE(file_.last_small_read_cached());
  EXPECT_EQ(test::cached_pages(path_, 8192, 4096), 0U) << "the read went through the cache";
}

// A small read of a range the cache holds only part of goes through the pipeline, which reads
// its one chunk (a third cached: less than half) with O_DIRECT.
TEST_P(CachePolicyTest, SmallPartlyCachedReadTakesThePipeline) {
  resident(0, 32 * KiB);
  const TransferResult r = read_checked(0, 96 * KiB, options("auto"));
  EXPECT_EQ(held(r.reason).rest, "page cache held N%: O_DIRECT") << r.reason;
  EXPECT_NEAR(held(r.reason).pct, 33, 2) << r.reason;
  EXPECT_EQ(direct_bytes(recorder_.reads()), 96 * KiB);
}

TEST_P(CachePolicyTest, ColdRangeIsReadDirect) {
  const TransferResult r = read_checked(0, size, options("auto"));
  EXPECT_EQ(r.reason, "page cache held 0% of the range: O_DIRECT");
  const auto reads = recorder_.reads();
  EXPECT_EQ(buffered_bytes(reads), 0U);
  EXPECT_EQ(direct_bytes(reads), size);
  EXPECT_EQ(test::cached_pages(path_, 0, size), 0U) << "O_DIRECT reads leave the cache alone";
}

TEST_P(CachePolicyTest, PartlyResidentRangeMixesChunkByChunk) {
  resident(0, size / 2);
  const TransferResult r = read_checked(0, size, options("auto"));
  EXPECT_EQ(held(r.reason).rest, "page cache held N%: mixed: 4.00 MiB buffered, 4.00 MiB O_DIRECT")
      << r.reason;
  EXPECT_NEAR(held(r.reason).pct, 50, 2) << r.reason;
  for (const Recorded& rec : recorder_.reads()) {
    EXPECT_EQ(rec.direct, rec.offset >= size / 2) << "read at " << rec.offset;
  }
}

TEST_P(CachePolicyTest, ChunkAtLeastHalfCachedGoesBuffered) {
  // 256 KiB chunks: chunk 0 holds 128 KiB cached (half: buffered), chunk 1 holds 124 KiB (direct).
  resident(128 * KiB, 128 * KiB);
  resident(256 * KiB, 124 * KiB);
  (void)read_checked(0, 512 * KiB, options("auto"));
  const auto reads = recorder_.reads();
  ASSERT_EQ(reads.size(), 2U);
  for (const Recorded& rec : reads) EXPECT_EQ(rec.direct, rec.offset == 256 * KiB) << rec.offset;
  // Chunk 0's missing pages were read without readahead: nothing after it entered the cache
  // (had it, chunk 1 could have looked cached to a worker probing it a moment later).
  EXPECT_EQ(test::cached_pages(path_, 128 * KiB, 128 * KiB), 32U);
  EXPECT_EQ(test::cached_pages(path_, 0, 128 * KiB), 32U);
  EXPECT_EQ(test::cached_pages(path_, 380 * KiB, size - 380 * KiB), 0U);
}

TEST_P(CachePolicyTest, BypassIsTheBehaviourBeforeResidency) {
  resident(0, size);
  const TransferResult r = read_checked(0, size, options("bypass"));
  EXPECT_EQ(r.reason, "O_DIRECT");
  const auto reads = recorder_.reads();
  EXPECT_EQ(buffered_bytes(reads), 0U);
  EXPECT_EQ(direct_bytes(reads), size);
  // And an unaligned range through staging, as before.
  const TransferResult edges = read_checked(4097, 64 * KiB, options("bypass"), 1);
  EXPECT_EQ(edges.reason, "O_DIRECT; unaligned head/tail through staging");
}

TEST_P(CachePolicyTest, UseReadsEverythingBuffered) {
  const TransferResult r = read_checked(0, size, options("use"));
  EXPECT_EQ(r.reason, "buffered: cache_policy use");
  EXPECT_EQ(direct_bytes(recorder_.reads()), 0U);
  EXPECT_EQ(test::cached_pages(path_, 0, size), size / 4096) << "buffered reads fill the cache";
}

TEST_P(CachePolicyTest, ChoosePathSaysWhatTheCacheHolds) {
  GuardedBuffer buf(MiB);
  resident(0, MiB);
  const std::string all = choose_path(file_, buf.data(), MiB, 0, options("auto")).reason;
  EXPECT_EQ(held(all).rest, "host memory: page cache holds N%: buffered") << all;
  EXPECT_GE(held(all).pct, 98) << all;
  EXPECT_EQ(choose_path(file_, buf.data(), MiB, MiB, options("auto")).reason,
            "host memory: page cache holds 0% of the range: O_DIRECT");
  const std::string half = choose_path(file_, buf.data(), 2 * MiB, 0, options("auto")).reason;
  EXPECT_EQ(held(half).rest,
            "host memory: page cache holds N%: chunks it holds buffered, the rest O_DIRECT")
      << half;
  EXPECT_NEAR(held(half).pct, 50, 2) << half;
  EXPECT_EQ(choose_path(file_, buf.data(), MiB, 0, options("bypass")).reason,
            "host memory: O_DIRECT");
  EXPECT_EQ(choose_path(file_, buf.data(), MiB, 0, options("use")).reason,
            "host memory: buffered: cache_policy use");
}

// Unaligned ranges into unaligned buffers, chunks of 64 KiB over a cache pattern of 48 KiB in,
// 48 KiB out: chunks wholly in, wholly out and straddling, while a writer rewrites the last
// MiB of the file (outside every range read) as fast as it can.
TEST_P(CachePolicyTest, StraddlingUnalignedRangesStayExactBesideAWriter) {
  const std::uint64_t writer_at = size - MiB;
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    const std::vector<std::byte> junk = test::random_bytes(64 * KiB, 99);
    for (std::uint64_t i = 0; !stop.load(); ++i) {
      test::pwrite_file(path_, junk, writer_at + (i * 4096) % (MiB - junk.size()));
    }
  });
  struct Case {
    std::uint64_t offset, n;
    std::size_t shift;
  };
  const Case cases[] = {{4097, 5 * MiB + 3, 3},
                        {1, writer_at - 2, 1},
                        {96 * KiB - 1, 130 * KiB, 0},
                        {48 * KiB + 512, 3 * MiB, 512},
                        {5 * MiB + 17, 17, 7}};
  std::uint64_t direct = 0, buffered = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(fmt::format("offset {} size {} shift {}", c.offset, c.n, c.shift));
    pins_.clear();  // the last case's pins, which would keep their pages from the drop
    (void)test::drop_cache(path_);  // the writer's pages may stay: they lie outside every range
    for (std::uint64_t at = 0; at < writer_at; at += 96 * KiB) {
      resident(at, std::min(48 * KiB, writer_at - at));
    }
    const TransferResult r = read_checked(c.offset, c.n, options("auto", 64 * KiB), c.shift);
    EXPECT_TRUE(r.reason.starts_with("page cache held ")) << r.reason;
    const auto reads = recorder_.reads();
    direct += direct_bytes(reads);
    buffered += buffered_bytes(reads);
  }
  stop = true;
  writer.join();
  EXPECT_GT(direct, 0U);
  EXPECT_GT(buffered, 0U);
}

// Pages written and not yet written back: buffered chunks read them from the cache, O_DIRECT
// chunks after the kernel writes them back. Either way the read sees what was written.
TEST_P(CachePolicyTest, DirtyPagesReadAsWritten) {
  std::vector<std::byte> model = data_;
  const std::pair<std::uint64_t, std::uint64_t> writes[] = {
      {100, 5000}, {300 * KiB, 256 * KiB}, {2 * MiB - 3, 10}, {6 * MiB, 4096}};
  for (const auto& [at, n] : writes) {
    const auto bytes = test::random_bytes(n, at);
    test::pwrite_file(path_, bytes, at);
    std::copy(bytes.begin(), bytes.end(), model.begin() + static_cast<std::ptrdiff_t>(at));
  }
  data_ = model;
  const TransferResult r = read_checked(0, size, options("auto"), 5);
  EXPECT_TRUE(r.reason.find("mixed") != std::string::npos) << r.reason;
}

TEST_P(CachePolicyTest, BouncePathReadsCachedChunksIntoStaging) {
  const auto dev = open_device("sim");
  resident(0, size / 2);
  TransferOptions o = options("auto");
  o.device = dev;
  o.path = Path::bounce;
  DeviceBuffer buf(dev, size);
  recorder_.watch(file_);
  const TransferResult r = sluice::read(file_, buf.data(), size, 0, o);
  EXPECT_EQ(r.path, Path::bounce);
  EXPECT_TRUE(held(r.reason).rest.starts_with(
      "page cache held N%: mixed: 4.00 MiB buffered, 4.00 MiB O_DIRECT via"))
      << r.reason;
  EXPECT_NEAR(held(r.reason).pct, 50, 2) << r.reason;
  std::vector<std::byte> back(size);
  dev->copy_to_host(back.data(), buf.data(), size);
  EXPECT_TRUE(test::same_bytes(back, data_));
  for (const Recorded& rec : recorder_.reads())
    EXPECT_EQ(rec.direct, rec.offset >= size / 2) << rec.offset;

  // Fully cached: every chunk buffered, through the same pinned buffers.
  resident(0, size);
  const TransferResult all = sluice::read(file_, buf.data(), size, 0, o);
  EXPECT_TRUE(held(all.reason).rest.starts_with("page cache held N%: buffered via")) << all.reason;
  EXPECT_GE(held(all.reason).pct, 98) << all.reason;
}

INSTANTIATE_TEST_SUITE_P(Engines, CachePolicyTest, ::testing::Values("psync", "uring"),
                         [](const auto& p) { return p.param; });

}  // namespace
}  // namespace sluice
