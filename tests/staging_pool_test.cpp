// StagingPool, and the bound it puts on memory (DESIGN.md principle 4). This program sets a
// small process-wide pool (4 buffers of 64 KiB) before anything else runs, so that reading a
// file many times larger than the pool shows that staging memory does not grow with it.
#include "sluice/staging_pool.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <iostream>
#include <set>
#include <thread>

#include "sluice/config.hpp"
#include "sluice/error.hpp"
#include "sluice/file.hpp"
#include "sluice/stats.hpp"
#include "sluice/transfer.hpp"
#include "sluice/units.hpp"
#include "support/test_util.hpp"

namespace sluice {
namespace {

constexpr unsigned process_buffers = 4;
constexpr std::uint64_t process_io_size = 64 * KiB;

TEST(StagingPool, Geometry) {
  StagingPool pool(3, 8192);
  EXPECT_EQ(pool.count(), 3U);
  EXPECT_EQ(pool.buffer_size(), 8192U);
  EXPECT_EQ(pool.bytes(), 3U * 8192U);
  EXPECT_EQ(pool.region().iov_len, pool.bytes());
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(pool.region().iov_base) % 4096, 0U);
  EXPECT_EQ(pool.in_use(), 0U);
  EXPECT_EQ(pool.high_water(), 0U);
  StagingPool other(1, 4096);
  EXPECT_NE(pool.id(), other.id());
  EXPECT_NE(pool.id(), 0U);
}

TEST(StagingPool, BadShapesAreRefused) {
  EXPECT_THROW(StagingPool(0, 4096), Error);
  EXPECT_THROW(StagingPool(1, 0), Error);
  EXPECT_THROW(StagingPool(1, 1000), Error);
  EXPECT_THROW(StagingPool(1, 4096 + 512), Error);
}

TEST(StagingPool, AcquireReleaseAndHighWater) {
  StagingPool pool(3, 4096);
  auto* base = static_cast<std::byte*>(pool.region().iov_base);
  std::set<unsigned> indices;
  std::vector<StagingPool::Lease> leases;
  for (int i = 0; i < 3; ++i) {
    auto l = pool.try_acquire();
    ASSERT_TRUE(l);
    EXPECT_TRUE(indices.insert(l->index).second);
    EXPECT_EQ(l->data, base + l->index * 4096);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(l->data) % 4096, 0U);
    std::memset(l->data, static_cast<int>(l->index) + 1, 4096);  // each buffer is its own memory
    leases.push_back(*l);
  }
  EXPECT_FALSE(pool.try_acquire());
  EXPECT_EQ(pool.in_use(), 3U);
  EXPECT_EQ(pool.high_water(), 3U);
  for (const auto& l : leases) {
    for (std::size_t k = 0; k < 4096; k += 511) EXPECT_EQ(std::to_integer<unsigned>(l.data[k]), l.index + 1);
  }
  pool.release(leases.back());
  leases.pop_back();
  EXPECT_EQ(pool.in_use(), 2U);
  EXPECT_EQ(pool.high_water(), 3U);  // the most ever, not the current
  for (const auto& l : leases) pool.release(l);
  EXPECT_EQ(pool.in_use(), 0U);
  EXPECT_LE(pool.high_water(), pool.count());
}

TEST(StagingPool, AcquireWaitsForARelease) {
  StagingPool pool(1, 4096);
  const auto held = pool.acquire();
  std::atomic<bool> got{false};
  std::thread waiter([&] {
    const auto l = pool.acquire();
    got = true;
    pool.release(l);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(got.load());
  pool.release(held);
  waiter.join();
  EXPECT_TRUE(got.load());
  EXPECT_EQ(pool.in_use(), 0U);
  EXPECT_EQ(pool.high_water(), 1U);
}

TEST(StagingPool, MemoryComesFromTheAllocatorOnceAndGoesBack) {
  struct Calls {
    int allocs = 0, frees = 0;
    std::size_t bytes = 0;
    void* p = nullptr;
  };
  auto calls = std::make_shared<Calls>();
  {
    PoolMemory mem{
        [calls](std::size_t n) {
          ++calls->allocs;
          calls->bytes = n;
          calls->p = std::aligned_alloc(4096, n);
          return calls->p;
        },
        [calls](void* p, std::size_t n) {
          ++calls->frees;
          EXPECT_EQ(p, calls->p);
          EXPECT_EQ(n, calls->bytes);
          std::free(p);
        }};
    StagingPool pool(5, 8192, mem);
    for (int i = 0; i < 20; ++i) pool.release(pool.acquire());
    EXPECT_EQ(calls->allocs, 1);
    EXPECT_EQ(calls->bytes, 5U * 8192U);
    EXPECT_EQ(pool.region().iov_base, calls->p);
  }
  EXPECT_EQ(calls->frees, 1);
}

TEST(StagingPool, ManyThreadsNeverShareABuffer) {
  StagingPool pool(3, 4096);
  std::atomic<bool> clash{false};
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 500; ++i) {
        const auto l = (i % 2 == 0) ? pool.acquire() : [&] {
          for (;;) {
            if (auto x = pool.try_acquire()) return *x;
            std::this_thread::yield();
          }
        }();
        std::memset(l.data, static_cast<int>(t), 64);
        std::this_thread::yield();
        for (int k = 0; k < 64; ++k) {
          if (std::to_integer<unsigned>(l.data[k]) != t) clash = true;
        }
        EXPECT_LE(pool.in_use(), pool.count());
        pool.release(l);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_FALSE(clash.load()) << "two threads held the same buffer";
  EXPECT_EQ(pool.in_use(), 0U);
  EXPECT_LE(pool.high_water(), pool.count());
}

// The process pool is the one main() configured, and transfers never grow it.
class HostStaging : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    const auto root = test::folder_root(test::Folder::disk, &why);
    if (!root) GTEST_SKIP() << why;
    dir_ = std::make_unique<test::TempDir>(*root);
    StagingPool& pool = host_staging_pool();
    ASSERT_EQ(pool.count(), process_buffers);
    ASSERT_EQ(pool.buffer_size(), process_io_size);
  }
  std::unique_ptr<test::TempDir> dir_;
};

TEST_F(HostStaging, MemoryStaysBoundedForAFileManyTimesThePool) {
  StagingPool& pool = host_staging_pool();
  const std::uint64_t size = 40 * pool.bytes() + 4097;  // ~10 MiB through a 256 KiB pool
  const std::string path = dir_->file("big.bin");
  const auto data = test::random_bytes(size, 99);
  test::write_file(path, data);
  const File f = File::open(path, OpenMode::read);
  if (!f.has_direct()) GTEST_SKIP() << "staging is only used with O_DIRECT: " << f.direct_reason();
  for (const char* engine : {"psync", "uring"}) {
    if (!test::engine_usable(engine)) continue;
    SCOPED_TRACE(engine);
    // io_size asks for more than a staging buffer holds: the pool's size wins.
    const auto cfg = test::make_config(engine, {.io_size = 4 * MiB, .threads = 4, .queue_depth = 8});
    test::GuardedBuffer buf(size, 1);  // misaligned: every chunk goes through staging
    const TransferResult r = read(f, buf.data(), size, 3, test::options_for(cfg));
    EXPECT_EQ(r.bytes, size - 3);
    EXPECT_TRUE(test::same_bytes(buf.first(size - 3), std::span(data).subspan(3)));
    EXPECT_TRUE(buf.guards_intact());
    if (f.mem_align() > 2) {
      EXPECT_NE(r.reason.find("staging"), std::string::npos) << r.reason;
    }
    EXPECT_GE(r.ios, (size - 3) / pool.buffer_size());
  }
  EXPECT_EQ(pool.count(), process_buffers);
  EXPECT_EQ(pool.bytes(), process_buffers * process_io_size);
  EXPECT_GE(pool.high_water(), 1U);
  EXPECT_LE(pool.high_water(), pool.count());
  EXPECT_EQ(pool.in_use(), 0U) << "every staging buffer must be back after the reads";
}

TEST_F(HostStaging, ConcurrentMisalignedReadsShareTheFixedPool) {
  StagingPool& pool = host_staging_pool();
  const std::uint64_t size = 4 * MiB + 123;
  const std::string path = dir_->file("shared.bin");
  const auto data = test::random_bytes(size, 100);
  test::write_file(path, data);
  const File f = File::open(path, OpenMode::read);
  if (!f.has_direct()) GTEST_SKIP() << "staging is only used with O_DIRECT: " << f.direct_reason();
  const char* engine = test::engine_usable("uring") ? "uring" : "psync";
  const auto cfg = test::make_config(engine, {.io_size = 64 * KiB, .threads = 2, .queue_depth = 4});
  std::vector<std::thread> readers;
  std::atomic<int> bad{0};
  for (unsigned t = 0; t < 6; ++t) {
    readers.emplace_back([&, t] {
      for (int round = 0; round < 3; ++round) {
        const std::uint64_t off = (t * 7919 + static_cast<unsigned>(round) * 104729) % (size / 2);
        const std::uint64_t n = size / 2;
        test::GuardedBuffer buf(n, 1 + t);
        const TransferResult r = read(f, buf.data(), n, off, test::options_for(cfg));
        if (r.bytes != n || !test::same_bytes(buf.first(n), std::span(data).subspan(off, n)) ||
            !buf.guards_intact()) {
          ++bad;
        }
      }
    });
  }
  for (auto& th : readers) th.join();
  EXPECT_EQ(bad.load(), 0);
  std::cout << "[ info ] high water " << pool.high_water() << " of " << pool.count()
            << " staging buffers, " << stats().snapshot().staging_waits << " waits for one\n";
  EXPECT_LE(pool.high_water(), pool.count());
  EXPECT_EQ(pool.in_use(), 0U);
}

}  // namespace
}  // namespace sluice

int main(int argc, char** argv) {
  // Before anything touches the process pool: 4 buffers of 64 KiB.
  sluice::Config cfg = sluice::Config::load();
  cfg.set("staging_buffers", std::to_string(sluice::process_buffers));
  cfg.set("io_size", std::to_string(sluice::process_io_size));
  sluice::set_config(cfg);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
