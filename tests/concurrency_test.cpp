// Many threads at once: on many files, on one shared File, through the async API, and while the
// engine factory changes. The process staging pool is made small (main() below) so that
// workers really compete for staging buffers. Run under TSan by `make sanitize-tsan`.
#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <future>
#include <iostream>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "sluice/config.hpp"
#include "sluice/file.hpp"
#include "sluice/staging_pool.hpp"
#include "sluice/stats.hpp"
#include "sluice/testing/faulty_engine.hpp"
#include "sluice/transfer.hpp"
#include "sluice/units.hpp"
#include "support/test_util.hpp"

namespace sluice {
namespace {

using test::Folder;
using test::GuardedBuffer;
using test::TempDir;

class Concurrency : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string why;
    if (!test::engine_usable(GetParam(), &why)) SLUICE_SKIP_OR_FAIL("io_uring unavailable: " + why);
    for (const Folder f : {Folder::disk, Folder::tmpfs}) {
      if (const auto root = test::folder_root(f)) dirs_.push_back(std::make_unique<TempDir>(*root));
    }
    if (dirs_.empty()) dirs_.push_back(std::make_unique<TempDir>("/tmp"));
  }

  void TearDown() override {
    if (!dirs_.empty()) {
      EXPECT_EQ(host_staging_pool().in_use(), 0U) << "staging buffers still held after all transfers";
      EXPECT_LE(host_staging_pool().high_water(), host_staging_pool().count());
    }
  }

  [[nodiscard]] std::shared_ptr<const Config> cfg(unsigned variant) const {
    const test::Shape shapes[] = {
        {.io_size = 16 * KiB, .threads = 2, .queue_depth = 4},
        {.io_size = 4 * KiB, .threads = 1, .queue_depth = 2},
        {.io_size = 64 * KiB, .threads = 3, .queue_depth = 8},
        {.io_size = 8 * KiB, .threads = 2, .queue_depth = 3, .direct_io = false},
    };
    return test::make_config(GetParam(), shapes[variant % std::size(shapes)]);
  }

  std::vector<std::unique_ptr<TempDir>> dirs_;
};

TEST_P(Concurrency, ManyThreadsOnManyFiles) {
  constexpr unsigned threads = 8;
  std::atomic<int> failures{0};
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::mt19937_64 rng(1000 + t);
      const std::string path = dirs_[t % dirs_.size()]->file(fmt::format("t{}.bin", t));
      std::vector<std::byte> model = test::random_bytes(512 * KiB + t * 999, 2000 + t);
      test::write_file(path, model);
      const File f = File::open(path, OpenMode::read_write);
      const auto opts = test::options_for(cfg(t));
      for (int round = 0; round < 24; ++round) {
        const std::uint64_t off = rng() % (model.size() + 8192);
        const std::uint64_t n = 1 + rng() % (96 * KiB);
        const std::size_t shift = rng() % 3 == 0 ? 0 : rng() % 4097;
        GuardedBuffer buf(n, shift);
        if (round % 2 == 0) {
          const auto fresh = test::random_bytes(n, rng());
          std::copy(fresh.begin(), fresh.end(), buf.data());
          if (write(f, buf.data(), n, off, opts).bytes != n) ++failures;
          if (model.size() < off + n) model.resize(off + n, std::byte{0});
          std::copy(fresh.begin(), fresh.end(), model.begin() + static_cast<std::ptrdiff_t>(off));
        } else {
          const std::uint64_t want = off >= model.size() ? 0 : std::min<std::uint64_t>(n, model.size() - off);
          const TransferResult r = read(f, buf.data(), n, off, opts);
          if (r.bytes != want || !test::same_bytes(buf.first(want), std::span(model).subspan(off, want))) {
            ++failures;
          }
        }
        if (!buf.guards_intact()) ++failures;
      }
      if (!test::same_bytes(test::read_whole(path), model)) ++failures;
    });
  }
  for (auto& th : pool) th.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST_P(Concurrency, ManyThreadsShareOneFile) {
  constexpr unsigned threads = 8;
  constexpr std::uint64_t stripe = 192 * KiB + 13;  // stripes do not start on block boundaries
  const std::string path = dirs_.front()->file("shared.bin");
  std::vector<std::byte> model = test::random_bytes(threads * stripe, 3);
  test::write_file(path, model);
  const File f = File::open(path, OpenMode::read_write);
  std::barrier sync(threads);
  std::atomic<int> failures{0};
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::mt19937_64 rng(3000 + t);
      const auto opts = test::options_for(cfg(t));
      // Phase 1: each thread rewrites pieces of its own stripe, in parallel with the others.
      for (int round = 0; round < 8; ++round) {
        const std::uint64_t lo = rng() % stripe;
        const std::uint64_t n = 1 + rng() % (stripe - lo);
        const std::uint64_t off = t * stripe + lo;
        GuardedBuffer buf(n, rng() % 4097);
        const auto fresh = test::random_bytes(n, rng());
        std::copy(fresh.begin(), fresh.end(), buf.data());
        if (write(f, buf.data(), n, off, opts).bytes != n || !buf.guards_intact()) ++failures;
        std::copy(fresh.begin(), fresh.end(), model.begin() + static_cast<std::ptrdiff_t>(off));
      }
      sync.arrive_and_wait();  // every write is done; the model is final
      // Phase 2: everyone reads anywhere.
      for (int round = 0; round < 12; ++round) {
        const std::uint64_t off = rng() % model.size();
        const std::uint64_t n = 1 + rng() % (256 * KiB);
        const std::uint64_t want = std::min<std::uint64_t>(n, model.size() - off);
        GuardedBuffer buf(n, rng() % 4097);
        const TransferResult r = read(f, buf.data(), n, off, opts);
        if (r.bytes != want || !test::same_bytes(buf.first(want), std::span(model).subspan(off, want)) ||
            !buf.guards_intact()) {
          ++failures;
        }
      }
    });
  }
  for (auto& th : pool) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_TRUE(test::same_bytes(test::read_whole(path), model));
}

TEST_P(Concurrency, ReadersAndWritersOnDisjointRangesAtOnce) {
  const std::string path = dirs_.front()->file("rw.bin");
  constexpr std::uint64_t half = MiB + 4097;
  std::vector<std::byte> model = test::random_bytes(2 * half, 4);
  test::write_file(path, model);
  const File f = File::open(path, OpenMode::read_write);
  std::atomic<int> failures{0};
  std::thread writer([&] {
    std::mt19937_64 rng(5);
    const auto opts = test::options_for(cfg(0));
    for (int i = 0; i < 30; ++i) {
      const std::uint64_t off = half + rng() % (half - 70000);
      GuardedBuffer buf(65536 + i, static_cast<std::size_t>(i));
      if (write(f, buf.data(), buf.size(), off, opts).bytes != buf.size()) ++failures;
    }
  });
  std::vector<std::thread> readers;
  for (unsigned t = 0; t < 3; ++t) {
    readers.emplace_back([&, t] {
      std::mt19937_64 rng(6 + t);
      const auto opts = test::options_for(cfg(t + 1));
      for (int i = 0; i < 20; ++i) {
        const std::uint64_t off = rng() % (half - 1);
        const std::uint64_t n = 1 + rng() % (half - off);
        GuardedBuffer buf(n, rng() % 4097);
        const TransferResult r = read(f, buf.data(), n, off, opts);
        if (r.bytes != n || !test::same_bytes(buf.first(n), std::span(model).subspan(off, n))) ++failures;
      }
    });
  }
  writer.join();
  for (auto& th : readers) th.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST_P(Concurrency, AsyncFlood) {
  const std::string path = dirs_.front()->file("async.bin");
  constexpr unsigned requests = 48;
  constexpr std::uint64_t piece = 40 * KiB + 1;
  const auto data = test::random_bytes(requests * piece, 7);
  const File f = File::open(path, OpenMode::read_write, {.truncate = true});
  const auto opts = test::options_for(cfg(0));
  {
    std::vector<std::unique_ptr<GuardedBuffer>> bufs;
    std::vector<TransferFuture> futs;
    for (unsigned i = 0; i < requests; ++i) {
      bufs.push_back(std::make_unique<GuardedBuffer>(piece, i % 5));
      std::copy_n(data.begin() + static_cast<std::ptrdiff_t>(i * piece), piece, bufs.back()->data());
      futs.push_back(write_async(f, bufs.back()->data(), piece, i * piece, opts));
    }
    for (auto& fu : futs) EXPECT_EQ(fu.get().bytes, piece);
  }
  EXPECT_TRUE(test::same_bytes(test::read_whole(path), data));
  std::vector<std::unique_ptr<GuardedBuffer>> bufs;
  std::vector<TransferFuture> futs;
  for (unsigned i = 0; i < requests; ++i) {
    bufs.push_back(std::make_unique<GuardedBuffer>(piece, (i * 7) % 4097));
    futs.push_back(read_async(f, bufs.back()->data(), piece, i * piece, opts));
  }
  for (unsigned i = 0; i < requests; ++i) {
    EXPECT_EQ(futs[i].get().bytes, piece);
    EXPECT_TRUE(test::same_bytes(bufs[i]->first(piece), std::span(data).subspan(i * piece, piece)));
    EXPECT_TRUE(bufs[i]->guards_intact());
  }
}

TEST_P(Concurrency, EngineFactoryChangesWhileTransfersRun) {
  const std::string path = dirs_.front()->file("factory.bin");
  const auto data = test::random_bytes(512 * KiB + 77, 8);
  test::write_file(path, data);
  const File f = File::open(path, OpenMode::read);
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::vector<std::thread> readers;
  for (unsigned t = 0; t < 3; ++t) {
    readers.emplace_back([&, t] {
      const auto opts = test::options_for(cfg(t));
      int rounds = 0;
      while (!stop.load() || rounds < 3) {
        GuardedBuffer buf(data.size(), t + static_cast<std::size_t>(rounds));
        const TransferResult r = read(f, buf.data(), data.size(), 0, opts);
        if (r.bytes != data.size() || !test::same_bytes(buf.first(data.size()), data)) ++failures;
        ++rounds;
      }
    });
  }
  for (int i = 0; i < 20; ++i) {
    // Harmless decorators only: retries and short transfers still give exact bytes.
    const FaultPlan plan = i % 2 == 0 ? FaultPlan{.every = 3, .error = EAGAIN}
                                      : FaultPlan{.every = 2, .short_transfer = true};
    set_engine_factory([plan](EngineKind kind, unsigned depth) {
      return std::make_unique<FaultyEngine>(test::make_inner_engine(kind, depth), plan);
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  set_engine_factory({});
  stop = true;
  for (auto& th : readers) th.join();
  EXPECT_EQ(failures.load(), 0);
}

INSTANTIATE_TEST_SUITE_P(Engines, Concurrency, ::testing::Values("uring", "psync"),
                         [](const auto& p) { return p.param; });


// Stats read while writers record: for 10 s, four threads record transfers of fixed shape (4 KiB,
// 2 I/Os, 1 us; writes fail) on two paths, and a reader takes snapshots as fast as it can. Every
// row of every snapshot must be one consistent set of whole transfers: bytes, I/Os, errors, busy
// time and the latency count all agree with the transfer count, and no count goes backwards.
TEST(StatsConcurrency, SnapshotsNeverSplitATransfer) {
  Stats s;
  std::atomic<bool> stop{false};
  std::vector<std::thread> writers;
  for (unsigned t = 0; t < 4; ++t) {
    writers.emplace_back([&, t] {
      std::mt19937 rng(t);
      while (!stop.load(std::memory_order_relaxed)) {
        const Path p = rng() % 2 == 0 ? Path::host : Path::bounce;
        const Direction d = rng() % 2 == 0 ? Direction::read : Direction::write;
        s.record(p, d, 4096, 2, 1000, d == Direction::write);
      }
    });
  }
  std::uint64_t snapshots = 0, last_total = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < end) {
    const StatsSnapshot snap = s.snapshot();
    std::uint64_t total = 0;
    for (const Path p : {Path::host, Path::bounce}) {
      for (const Direction d : {Direction::read, Direction::write}) {
        const PathCounters& c = snap.at(p, d);
        ASSERT_EQ(c.bytes, 4096 * c.ops) << to_string(p) << " after " << snapshots << " snapshots";
        ASSERT_EQ(c.ios, 2 * c.ops);
        ASSERT_EQ(c.nanoseconds, 1000 * c.ops);
        ASSERT_EQ(c.errors, d == Direction::write ? c.ops : 0);
        ASSERT_EQ(snap.latency_of(p, d).count(), c.ops) << to_string(p) << " after " << snapshots;
        total += c.ops;
      }
    }
    ASSERT_GE(total, last_total);
    last_total = total;
    ++snapshots;
  }
  stop.store(true);
  for (auto& w : writers) w.join();
  EXPECT_GT(last_total, 0U);
  EXPECT_GT(snapshots, 10U);
  std::cout << snapshots << " snapshots of " << last_total << " transfers, all consistent\n";
}

}  // namespace
}  // namespace sluice

int main(int argc, char** argv) {
  // A small process staging pool (6 buffers of 64 KiB), so concurrent workers run out of it.
  sluice::Config cfg = sluice::Config::load();
  cfg.set("staging_buffers", "6");
  cfg.set("io_size", "64K");
  sluice::set_config(cfg);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
