// StagingPool, and the bound it puts on memory (DESIGN.md principle 4). This program sets a
// small process-wide pool (4 buffers of 64 KiB) before anything else runs, so that reading a
// file many times larger than the pool shows that staging memory does not grow with it.
#include "sluice/staging_pool.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <iostream>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>

#include <fmt/format.h>

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

// The waiter is seen blocked in acquire() (waiters() counts it under the pool's lock) before
// the release, so this fails if acquire() hands out a buffer that is still held, whatever the
// scheduler does.
TEST(StagingPool, AcquireWaitsForARelease) {
  StagingPool pool(1, 4096);
  const auto held = pool.acquire();
  EXPECT_EQ(pool.waiters(), 0U);
  std::atomic<bool> got{false};
  std::thread waiter([&] {
    const auto l = pool.acquire();
    got = true;
    pool.release(l);
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (pool.waiters() == 0 && !got.load() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const unsigned blocked = pool.waiters();
  const bool early = got.load();
  pool.release(held);
  waiter.join();
  EXPECT_FALSE(early) << "acquire() returned while the only buffer was held";
  EXPECT_EQ(blocked, 1U) << "the waiter was never seen blocked in acquire()";
  EXPECT_TRUE(got.load());
  EXPECT_EQ(pool.waiters(), 0U);
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

// The process pool is the one main() configured, and transfers never grow it. That is measured
// from outside the pool, in the process's resident memory (/proc/self/status): its peak across
// the transfers (VmHWM, reset first) may exceed its level before them by a slack for the
// allocator and a transparent huge page or two, never by anything that grows with the file or
// with the number of transfers. Sanitizer builds keep allocations back on purpose (ASan's
// quarantine) and map shadow memory, so there the figures are printed, not held to the bound.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool sanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool sanitized = true;
#else
constexpr bool sanitized = false;
#endif
#else
constexpr bool sanitized = false;
#endif

constexpr long slack_kib = 8 * 1024;

// A field of /proc/self/status in KiB ("VmRSS", "VmHWM"), or -1.
long status_kib(std::string_view field) {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(std::string(field) + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
  }
  return -1;
}

// Resident memory before a phase, and its peak during it.
class ResidentMemory {
 public:
  // Resets the peak (VmHWM) to the current resident set: clear_refs "5" (Linux 4.0+). Where the
  // kernel refuses, the peak is approximated by the resident set at the end.
  ResidentMemory() {
    std::ofstream clear("/proc/self/clear_refs");
    clear << "5" << std::flush;
    peak_reset_ = static_cast<bool>(clear);
    before_ = status_kib("VmRSS");
  }
  // Growth over the level before, in KiB.
  [[nodiscard]] long growth_kib() const {
    return (peak_reset_ ? status_kib("VmHWM") : status_kib("VmRSS")) - before_;
  }
  [[nodiscard]] ::testing::AssertionResult bounded(long bound_kib, const std::string& what) const {
    const long g = growth_kib();
    std::cout << "[ info ] " << what << ": resident memory grew " << g << " KiB at its peak (bound "
              << bound_kib << " KiB" << (peak_reset_ ? "" : ", resident set at the end") << ")\n";
    if (before_ < 0 || sanitized || g < bound_kib) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << what << ": resident memory grew " << g
                                         << " KiB at its peak, more than the bound of " << bound_kib
                                         << " KiB: staging memory is not bounded by the pool";
  }

 private:
  bool peak_reset_ = false;
  long before_ = -1;
};

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
  const std::uint64_t size = 128 * pool.bytes() + 4097;  // ~32 MiB through a 256 KiB pool
  const std::string path = dir_->file("big.bin");
  const auto data = test::random_bytes(size, 99);
  test::write_file(path, data);
  const File f = File::open(path, OpenMode::read);
  if (!f.has_direct()) GTEST_SKIP() << "staging is only used with O_DIRECT: " << f.direct_reason();
  test::GuardedBuffer buf(size, 1);  // misaligned: every chunk goes through staging; touched now
  for (const char* engine : {"psync", "uring"}) {
    if (!test::engine_runs_here(engine)) continue;
    SCOPED_TRACE(engine);
    // io_size asks for more than a staging buffer holds: the pool's size wins.
    const auto cfg = test::make_config(engine, {.io_size = 4 * MiB, .threads = 4, .queue_depth = 8});
    // A first read sets up what a read needs once (the pool, engines, workers).
    ASSERT_EQ(read(f, buf.data(), MiB, 3, test::options_for(cfg)).bytes, MiB);
    const ResidentMemory mem;
    const TransferResult r = read(f, buf.data(), size, 3, test::options_for(cfg));
    EXPECT_TRUE(mem.bounded(slack_kib, fmt::format("{} read of {} through the pool", engine, format_size(size))));
    EXPECT_LT(slack_kib * KiB, size / 2) << "the file must dwarf the slack for the bound to mean anything";
    EXPECT_EQ(r.bytes, size - 3);
    EXPECT_TRUE(test::same_bytes(buf.first(size - 3), std::span(data).subspan(3)));
    EXPECT_TRUE(buf.guards_intact());
    if (f.mem_align() > 2) {
      EXPECT_NE(r.reason.find("staging"), std::string::npos) << r.reason;
    }
    EXPECT_GE(r.ios, (size - 3) / pool.buffer_size());
  }
  EXPECT_EQ(pool.in_use(), 0U) << "every staging buffer must be back after the reads";
}

// Many transfers of random sizes, offsets and buffer misalignments, reads and writes, on 1..4
// workers: memory after the first hundred stays where it was (a leak of a few hundred bytes a
// transfer would pass the bound), and the file ends as a model of the same writes says.
TEST_F(HostStaging, TenThousandRandomTransfersDoNotGrowMemory) {
  constexpr std::uint64_t size = 8 * MiB;
  constexpr std::uint64_t most = 192 * KiB;
  const int transfers = sanitized ? 1000 : 10000;
  const std::string path = dir_->file("random.bin");
  auto model = test::random_bytes(size, 101);
  test::write_file(path, model);
  const File f = File::open(path, OpenMode::read_write);
  if (!f.has_direct()) GTEST_SKIP() << "staging is only used with O_DIRECT: " << f.direct_reason();
  std::mt19937_64 rng(test::test_seed(101));
  test::GuardedBuffer buf(most + 4096);
  const bool uring = test::engine_runs_here("uring");
  std::optional<ResidentMemory> mem;
  int bad = 0;
  for (int i = 0; i < transfers; ++i) {
    if (i == 100) mem.emplace();  // the pool, engines and workers exist by now
    const char* engine = i % 2 == 1 && uring ? "uring" : "psync";
    const auto cfg = test::make_config(engine, {.io_size = 16 * KiB,
                                                .threads = 1 + static_cast<unsigned>(rng() % 4),
                                                .queue_depth = 4});
    const std::uint64_t n = 1 + rng() % most;
    const std::uint64_t off = rng() % (size - n + 1);
    std::byte* p = buf.data() + 1 + rng() % 4095;  // never 4 KiB-aligned: staging
    if (rng() % 4 == 0) {
      const auto fresh = test::random_bytes(n, rng());
      std::memcpy(p, fresh.data(), n);
      bad += write(f, p, n, off, test::options_for(cfg)).bytes != n;
      std::memcpy(model.data() + off, fresh.data(), n);
    } else {
      bad += read(f, p, n, off, test::options_for(cfg)).bytes != n ||
             std::memcmp(p, model.data() + off, n) != 0;
    }
  }
  ASSERT_TRUE(mem);
  EXPECT_TRUE(mem->bounded(slack_kib, fmt::format("{} random transfers", transfers - 100)));
  EXPECT_EQ(bad, 0) << "transfers that moved a wrong count or wrong bytes";
  EXPECT_TRUE(buf.guards_intact());
  EXPECT_TRUE(test::same_bytes(test::read_whole(path), model));
  EXPECT_EQ(host_staging_pool().in_use(), 0U);
}

TEST_F(HostStaging, ConcurrentMisalignedReadsShareTheFixedPool) {
  StagingPool& pool = host_staging_pool();
  const std::uint64_t size = 4 * MiB + 123;
  const std::string path = dir_->file("shared.bin");
  const auto data = test::random_bytes(size, 100);
  test::write_file(path, data);
  const File f = File::open(path, OpenMode::read);
  if (!f.has_direct()) GTEST_SKIP() << "staging is only used with O_DIRECT: " << f.direct_reason();
  const char* engine = test::engine_runs_here("uring") ? "uring" : "psync";
  const auto cfg = test::make_config(engine, {.io_size = 64 * KiB, .threads = 2, .queue_depth = 4});
  constexpr unsigned readers_n = 6;
  std::vector<std::unique_ptr<test::GuardedBuffer>> bufs;
  for (unsigned t = 0; t < readers_n; ++t) {
    bufs.push_back(std::make_unique<test::GuardedBuffer>(size / 2, 1 + t));  // touched before
  }
  ASSERT_EQ(read(f, bufs[0]->data(), MiB, 0, test::options_for(cfg)).bytes, MiB);  // set-up
  const std::uint64_t waits_before = stats().snapshot().staging_waits;
  const ResidentMemory mem;
  std::vector<std::thread> readers;
  std::atomic<int> bad{0};
  for (unsigned t = 0; t < readers_n; ++t) {
    readers.emplace_back([&, t] {
      test::GuardedBuffer& buf = *bufs[t];
      for (int round = 0; round < 3; ++round) {
        const std::uint64_t off = (t * 7919 + static_cast<unsigned>(round) * 104729) % (size / 2);
        const std::uint64_t n = size / 2;
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
  EXPECT_TRUE(mem.bounded(slack_kib, fmt::format("{} readers x 3 reads of {}", readers_n, format_size(size / 2))));
  std::cout << "[ info ] high water " << pool.high_water() << " of " << pool.count() << " staging buffers, "
            << stats().snapshot().staging_waits - waits_before << " waits for one\n";
  EXPECT_EQ(pool.in_use(), 0U) << "every staging buffer must be back after the reads";
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
