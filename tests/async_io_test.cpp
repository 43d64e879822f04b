// The async I/O thread behind read_async, write_async and submit_batch (src/transfer/async_io.*):
// small O_DIRECT transfers of host memory go to it; each completes exactly once with the right
// bytes, whether it succeeds there, is retried (EINTR), comes back short (finished by the
// synchronous path), ends at the end of the file or fails; anything else takes the pool.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <future>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "sluice/error.hpp"
#include "sluice/file.hpp"
#include "sluice/testing/faulty_engine.hpp"
#include "sluice/transfer.hpp"
#include "sluice/units.hpp"
#include "support/residency_util.hpp"
#include "support/test_util.hpp"

namespace sluice {
namespace {

using test::GuardedBuffer;
using test::TempDir;

constexpr std::string_view async_reason = "O_DIRECT; async I/O thread";
constexpr std::uint64_t block = 4096;

// Counts the requests prepared on the engines a factory made (the count outlives the test: an
// engine may be destroyed after it).
class CountingEngine final : public IoEngine {
 public:
  CountingEngine(std::unique_ptr<IoEngine> inner, std::shared_ptr<std::atomic<unsigned>> count)
      : inner_(std::move(inner)), count_(std::move(count)) {}
  [[nodiscard]] EngineKind kind() const noexcept override { return inner_->kind(); }
  [[nodiscard]] std::string_view name() const noexcept override { return "counting"; }
  [[nodiscard]] unsigned capacity() const noexcept override { return inner_->capacity(); }
  [[nodiscard]] unsigned in_flight() const noexcept override { return inner_->in_flight(); }
  void prepare(const IoRequest& r) override {
    count_->fetch_add(1);
    inner_->prepare(r);
  }
  std::size_t submit_and_wait(std::span<IoCompletion> out, std::size_t min) override {
    return inner_->submit_and_wait(out, min);
  }
  bool enable_wake() override { return inner_->enable_wake(); }
  void wake() noexcept override { inner_->wake(); }

 private:
  std::unique_ptr<IoEngine> inner_;
  std::shared_ptr<std::atomic<unsigned>> count_;
};

class AsyncIo : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    auto f = test::direct_file("async.bin", blocks * block, 31, &why);
    if (!f) GTEST_SKIP() << why;
    dir_ = std::move(f->dir);
    path_ = std::move(f->path);
    data_ = std::move(f->data);
    file_ = std::move(f->file);
    // bypass: the file was just written, and under auto a read of cached pages goes to the pool
    // (CachePolicyChoosesTheThread checks that).
    cfg_ = with_policy("bypass");
  }

  [[nodiscard]] static std::shared_ptr<const Config> with_policy(std::string_view policy) {
    auto cfg = std::make_shared<Config>(*test::make_config("uring", {}));
    cfg->set("cache_policy", policy);
    return cfg;
  }
  [[nodiscard]] TransferOptions options() const { return test::options_for(cfg_); }
  [[nodiscard]] std::span<const std::byte> expected(std::uint64_t offset, std::uint64_t n) const {
    return std::span(data_).subspan(offset, n);
  }

  // `count` reads of one block at random block offsets, all in flight at once; checks each,
  // and that the async thread finished it alone (`alone`) or with the synchronous path's help.
  void read_blocks_checked(unsigned count, std::uint64_t seed, bool alone = true) {
    std::mt19937_64 rng(seed);
    std::vector<std::unique_ptr<GuardedBuffer>> bufs;
    std::vector<std::uint64_t> offsets;
    std::vector<TransferFuture> futs;
    for (unsigned i = 0; i < count; ++i) {
      bufs.push_back(std::make_unique<GuardedBuffer>(block));
      offsets.push_back(rng() % blocks * block);
      futs.push_back(read_async(file_, bufs.back()->data(), block, offsets.back(), options()));
    }
    for (unsigned i = 0; i < count; ++i) {
      const TransferResult r = futs[i].get();
      EXPECT_EQ(r.bytes, block);
      EXPECT_EQ(r.path, Path::host);
      if (alone) {
        EXPECT_EQ(r.reason, async_reason);
      } else {
        EXPECT_TRUE(r.reason.starts_with(std::string(async_reason) + "; the rest: ")) << r.reason;
      }
      EXPECT_TRUE(test::same_bytes(bufs[i]->first(block), expected(offsets[i], block)));
      EXPECT_TRUE(bufs[i]->guards_intact());
    }
  }

  static constexpr std::uint64_t blocks = 256;
  std::unique_ptr<TempDir> dir_;
  std::string path_;
  std::vector<std::byte> data_;
  File file_;
  std::shared_ptr<const Config> cfg_;
};

TEST_F(AsyncIo, AlignedReadsTakeTheAsyncThread) {
  GuardedBuffer buf(8 * block);
  auto fut = read_async(file_, buf.data(), 8 * block, 3 * block, options());
  const TransferResult r = fut.get();
  EXPECT_EQ(r.bytes, 8 * block);
  EXPECT_EQ(r.path, Path::host);
  EXPECT_EQ(r.reason, async_reason);
  EXPECT_EQ(r.ios, 1U);
  EXPECT_TRUE(test::same_bytes(buf.first(8 * block), expected(3 * block, 8 * block)));
  EXPECT_TRUE(buf.guards_intact());
  read_blocks_checked(200, 1);
}

TEST_F(AsyncIo, WritesLandAndReadBack) {
  const auto fresh = test::random_bytes(16 * block, 77);
  std::vector<std::unique_ptr<GuardedBuffer>> srcs;
  std::vector<TransferFuture> futs;
  for (unsigned i = 0; i < 16; ++i) {
    srcs.push_back(std::make_unique<GuardedBuffer>(block));
    std::copy_n(fresh.begin() + static_cast<std::ptrdiff_t>(i * block), block, srcs.back()->data());
    futs.push_back(write_async(file_, srcs.back()->data(), block, (40 + i) * block, options()));
  }
  for (auto& f : futs) {
    const TransferResult r = f.get();
    EXPECT_EQ(r.bytes, block);
    EXPECT_EQ(r.reason, async_reason);
  }
  EXPECT_TRUE(test::same_bytes(test::pread_file(path_, 40 * block, 16 * block), fresh));
}

// Unaligned entries, a synced write and an oversized read go through the pool; the rest through
// the async thread; every future is in its entry's place.
TEST_F(AsyncIo, BatchesMixBothWaysInOrder) {
  std::vector<std::unique_ptr<GuardedBuffer>> bufs;
  std::vector<BatchEntry> entries;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;  // offset, size
  for (unsigned i = 0; i < 40; ++i) {
    const bool odd = i % 3 == 0;
    const std::uint64_t offset = odd ? i * block + 100 : i * block;
    const std::uint64_t size = odd ? block - 200 : 2 * block;
    bufs.push_back(std::make_unique<GuardedBuffer>(size));
    entries.push_back({IoOp::read, &file_, bufs.back()->data(), size, offset});
    ranges.emplace_back(offset, size);
  }
  const auto futs = submit_batch(entries, options());
  ASSERT_EQ(futs.size(), entries.size());
  for (std::size_t i = 0; i < futs.size(); ++i) {
    const TransferResult r = const_cast<TransferFuture&>(futs[i]).get();
    EXPECT_EQ(r.bytes, ranges[i].second) << i;
    EXPECT_EQ(r.reason == async_reason, i % 3 != 0) << i << ": " << r.reason;
    EXPECT_TRUE(test::same_bytes(bufs[i]->first(ranges[i].second),
                                 expected(ranges[i].first, ranges[i].second)));
    EXPECT_TRUE(bufs[i]->guards_intact());
  }
  GuardedBuffer big(2 * MiB);
  auto pooled = read_async(file_, big.data(), 2 * MiB, 0, options());  // above io_size (1 MiB)
  EXPECT_NE(pooled.get().reason, async_reason);
  GuardedBuffer src(block);
  src.fill(std::byte{7});
  auto synced = write_async(file_, src.data(), block, 0, [&] {
    auto o = options();
    o.sync = SyncMode::data;
    return o;
  }());
  EXPECT_NE(synced.get().reason, async_reason);
}

// The async thread reads O_DIRECT only, so it takes a read only where the page cache need not be
// read: bypass always; auto when the range holds no cached page (else the pool reads the cached
// pages buffered); use never. Each read's bytes are right whichever way it went.
TEST_F(AsyncIo, CachePolicyChoosesTheThread) {
  const auto read_with = [&](std::string_view policy, std::uint64_t offset) {
    GuardedBuffer buf(block);
    auto fut = read_async(file_, buf.data(), block, offset, test::options_for(with_policy(policy)));
    TransferResult r = fut.get();
    EXPECT_EQ(r.bytes, block) << policy;
    EXPECT_TRUE(test::same_bytes(buf.first(block), expected(offset, block))) << policy;
    return r;
  };
  // Just written: every page is cached.
  const TransferResult cached_auto = read_with("auto", 0);
  EXPECT_NE(cached_auto.reason, async_reason);
  EXPECT_NE(cached_auto.reason.find("page cache"), std::string::npos) << cached_auto.reason;
  EXPECT_EQ(cached_auto.cached_bytes, block);
  EXPECT_EQ(read_with("use", 0).reason, "buffered: cache_policy use");
  EXPECT_EQ(read_with("bypass", 0).reason, async_reason);
  if (!test::drop_cache(path_)) {
    test::skip_part("the page cache of the file cannot be dropped per file");
    return;
  }
  EXPECT_EQ(read_with("auto", 5 * block).reason, async_reason);
  EXPECT_EQ(read_with("use", 6 * block).reason, "buffered: cache_policy use");
}

// The end of the file: a block that holds its last bytes reads short, past it reads nothing.
TEST_F(AsyncIo, ReadsStopAtTheEndOfTheFile) {
  const std::uint64_t size = 10 * block + 1000;
  test::write_file(path_, std::span(data_).first(size));
  const File f = File::open(path_, OpenMode::read);
  GuardedBuffer tail(2 * block), past(block);
  auto a = read_async(f, tail.data(), 2 * block, 9 * block, options());
  auto b = read_async(f, past.data(), block, 20 * block, options());
  const TransferResult ra = a.get();
  EXPECT_EQ(ra.bytes, block + 1000);
  EXPECT_TRUE(ra.reason.starts_with(async_reason)) << ra.reason;
  EXPECT_TRUE(test::same_bytes(tail.first(block + 1000), expected(9 * block, block + 1000)));
  EXPECT_EQ(b.get().bytes, 0U);
  EXPECT_TRUE(tail.guards_intact());
}

// EINTR on every second request: resubmitted until it succeeds, each read completed once.
TEST_F(AsyncIo, InterruptedRequestsAreRetried) {
  auto prepared = std::make_shared<std::atomic<unsigned>>(0);
  test::ScopedEngineFactory factory(
      [prepared](EngineKind kind, unsigned depth) -> std::unique_ptr<IoEngine> {
        auto faulty = std::make_unique<FaultyEngine>(test::make_inner_engine(kind, depth),
                                                     FaultPlan{.every = 2, .error = EINTR});
        return std::make_unique<CountingEngine>(std::move(faulty), prepared);
      });
  read_blocks_checked(100, 2);
  EXPECT_GE(prepared->load(), 150U);  // every second try interrupted: retries were prepared
}

// Every request comes back half done: the synchronous path finishes each.
TEST_F(AsyncIo, ShortTransfersAreFinished) {
  test::ScopedEngineFactory factory(
      [](EngineKind kind, unsigned depth) -> std::unique_ptr<IoEngine> {
        return std::make_unique<FaultyEngine>(test::make_inner_engine(kind, depth),
                                              FaultPlan{.every = 1, .short_transfer = true});
      });
  GuardedBuffer buf(4 * block);
  auto fut = read_async(file_, buf.data(), 4 * block, 8 * block, options());
  const TransferResult r = fut.get();
  EXPECT_EQ(r.bytes, 4 * block);
  EXPECT_GE(r.ios, 2U);
  EXPECT_TRUE(r.reason.starts_with(std::string(async_reason) + "; the rest: ")) << r.reason;
  EXPECT_TRUE(test::same_bytes(buf.first(4 * block), expected(8 * block, 4 * block)));
  read_blocks_checked(20, 3, false);
}

// EIO on every read: each future carries the error (once), and the thread keeps serving.
TEST_F(AsyncIo, ErrorsArriveThroughTheFuture) {
  {
    test::ScopedEngineFactory factory(
        [](EngineKind kind, unsigned depth) -> std::unique_ptr<IoEngine> {
          return std::make_unique<FaultyEngine>(
              test::make_inner_engine(kind, depth),
              FaultPlan{.every = 1, .error = EIO, .only = IoOp::read});
        });
    std::vector<std::unique_ptr<GuardedBuffer>> bufs;
    std::vector<TransferFuture> futs;
    for (unsigned i = 0; i < 8; ++i) {
      bufs.push_back(std::make_unique<GuardedBuffer>(block));
      futs.push_back(read_async(file_, bufs.back()->data(), block, i * block, options()));
    }
    for (auto& f : futs) {
      const auto err = test::error_of([&] { (void)f.get(); });
      ASSERT_TRUE(err.has_value());
      EXPECT_EQ(err->code(), EIO) << err->what();
    }
  }
  read_blocks_checked(20, 4);  // the default engine again
}

// Several threads with many reads in flight each: the wake-ups between callers and the thread.
TEST_F(AsyncIo, ConcurrentCallers) {
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < 4; ++t) {
    threads.emplace_back([this, t] {
      for (unsigned round = 0; round < 20; ++round) read_blocks_checked(16 + t, t * 100 + round);
    });
  }
  for (auto& th : threads) th.join();
}

}  // namespace
}  // namespace sluice
