// Asynchronous transfers hold their file: a caller may drop (or close) its File as soon as
// read_async, write_async or submit_batch has returned, and every future still completes with the
// right bytes; the descriptors are closed by the time the last future is ready. The process pool is held
// busy while the File goes, so the queued work provably runs after it is gone (the File lives on
// the heap, so a transfer that still pointed at it is a use-after-free ASan reports). Labelled
// concurrency: the ASan and the TSan builds both run it.
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "sluice/testing/faulty_engine.hpp"
#include "sluice/file.hpp"
#include "sluice/thread_pool.hpp"
#include "sluice/transfer.hpp"
#include "sluice/units.hpp"
#include "support/test_util.hpp"

namespace sluice {
namespace {

using test::GuardedBuffer;
using test::TempDir;

constexpr std::uint64_t block = 4096;
constexpr auto deadline = std::chrono::seconds(30);

// Occupies every thread of the process pool until release(), so that work queued meanwhile runs
// only afterwards.
class PoolHold {
 public:
  PoolHold() {
    ThreadPool& pool = default_pool();
    const unsigned n = pool.size();
    for (unsigned i = 0; i < n; ++i) {
      pool.post([started = started_, gate = gate_] {
        started->fetch_add(1);
        gate.wait();
      });
    }
    const auto until = std::chrono::steady_clock::now() + deadline;
    while (started_->load() < n && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    held_ = started_->load() == n;
  }
  PoolHold(const PoolHold&) = delete;
  PoolHold& operator=(const PoolHold&) = delete;
  ~PoolHold() { release(); }

  /// Whether every pool thread was seen waiting here.
  [[nodiscard]] bool held() const noexcept { return held_; }
  void release() {
    if (!released_) open_.set_value();
    released_ = true;
  }

 private:
  std::promise<void> open_;
  std::shared_future<void> gate_ = open_.get_future().share();
  std::shared_ptr<std::atomic<unsigned>> started_ = std::make_shared<std::atomic<unsigned>>(0);
  bool held_ = false;
  bool released_ = false;
};

// Descriptors of this process open on `path` (through /proc/self/fd).
unsigned descriptors_on(const std::string& path) {
  unsigned n = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    std::error_code link_ec;
    if (std::filesystem::read_symlink(e.path(), link_ec) == path) ++n;
  }
  return n;
}

// Whether no descriptor is open on `path`, asked right after the last future was ready: work lets
// go of its handle before its future is ready (a pool thread that closed the last handle after
// it, deregistering it from cuFile, ran into a library already torn down at exit), so there is
// nothing to wait for.
bool all_closed(const std::string& path) { return descriptors_on(path) == 0; }

class Lifetime : public ::testing::Test {
 protected:
  void SetUp() override {
    // Any folder serves the pool; O_DIRECT (a disk folder) also brings in the async I/O thread.
    const auto root = test::folder_root(test::Folder::disk);
    dir_ = std::make_unique<TempDir>(root.value_or("/tmp"));
    path_ = std::filesystem::canonical(dir_->path()).string() + "/data.bin";
    data_ = test::random_bytes(64 * block, test::test_seed(51));
    test::write_file(path_, data_);
  }

  [[nodiscard]] std::unique_ptr<File> open(OpenMode mode = OpenMode::read) const {
    return std::make_unique<File>(File::open(path_, mode));
  }
  [[nodiscard]] static TransferOptions options(std::string_view policy = "bypass") {
    const char* engine = test::engine_usable("uring") ? "uring" : "psync";
    auto cfg = std::make_shared<Config>(*test::make_config(engine, {}));
    cfg->set("cache_policy", policy);
    return test::options_for(cfg);
  }
  [[nodiscard]] std::span<const std::byte> expected(std::uint64_t offset, std::uint64_t n) const {
    return std::span(data_).subspan(offset, n);
  }

  std::unique_ptr<TempDir> dir_;
  std::string path_;
  std::vector<std::byte> data_;
};

// Unaligned reads and writes take the pool; the File is destroyed before any of them runs.
TEST_F(Lifetime, PoolTransfersOutliveTheirFile) {
  const auto fresh = test::random_bytes(3 * block, 52);
  GuardedBuffer src(fresh.size(), 3);
  std::copy(fresh.begin(), fresh.end(), src.data());
  std::vector<std::unique_ptr<GuardedBuffer>> bufs;
  std::vector<TransferFuture> reads;
  TransferFuture write;
  {
    PoolHold hold;
    ASSERT_TRUE(hold.held()) << "the pool threads never all started";
    auto file = open(OpenMode::read_write);
    for (unsigned i = 0; i < 8; ++i) {
      bufs.push_back(std::make_unique<GuardedBuffer>(block + 7, i));
      reads.push_back(read_async(*file, bufs.back()->data(), block + 7, i * block + 11, options()));
    }
    write = write_async(*file, src.data(), fresh.size(), 40 * block + 5, options());
    file.reset();
    hold.release();
  }
  for (unsigned i = 0; i < reads.size(); ++i) {
    const TransferResult r = reads[i].get();
    EXPECT_EQ(r.bytes, block + 7) << i;
    EXPECT_TRUE(test::same_bytes(bufs[i]->first(block + 7), expected(i * block + 11, block + 7))) << i;
    EXPECT_TRUE(bufs[i]->guards_intact()) << i;
  }
  EXPECT_EQ(write.get().bytes, fresh.size());
  EXPECT_TRUE(test::same_bytes(test::pread_file(path_, 40 * block + 5, fresh.size()), fresh));
  EXPECT_TRUE(all_closed(path_)) << "descriptors stayed open after the last transfer";
}

// close() lets go of the caller's handle only: transfers in flight finish on theirs, and the
// descriptors close after the last of them.
TEST_F(Lifetime, CloseWaitsForTransfersInFlight) {
  std::vector<std::unique_ptr<GuardedBuffer>> bufs;
  std::vector<TransferFuture> futs;
  File file = File::open(path_, OpenMode::read);
  {
    PoolHold hold;
    ASSERT_TRUE(hold.held()) << "the pool threads never all started";
    for (unsigned i = 0; i < 4; ++i) {
      bufs.push_back(std::make_unique<GuardedBuffer>(2 * block + 1, i));
      futs.push_back(read_async(file, bufs.back()->data(), 2 * block + 1, i * 3 * block + 1, options()));
    }
    file.close();
    EXPECT_FALSE(file.is_open());
    EXPECT_GT(descriptors_on(path_), 0U) << "queued transfers lost their descriptors";
    hold.release();
  }
  for (unsigned i = 0; i < futs.size(); ++i) {
    EXPECT_EQ(futs[i].get().bytes, 2 * block + 1) << i;
    EXPECT_TRUE(test::same_bytes(bufs[i]->first(2 * block + 1), expected(i * 3 * block + 1, 2 * block + 1)));
  }
  EXPECT_TRUE(all_closed(path_)) << "descriptors stayed open after the last transfer";
  const auto e = test::error_of([&] { (void)read(file, bufs[0]->data(), 1, 0); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), EBADF);  // the closed handle itself refuses I/O
}

// Aligned reads go to the async I/O thread; every request comes back half done, so its rest
// runs on the (held) pool after the File is gone.
TEST_F(Lifetime, AsyncThreadTransfersOutliveTheirFile) {
  std::string why;
  if (!test::engine_usable("uring", &why)) GTEST_SKIP() << why;
  if (!open()->has_direct()) GTEST_SKIP() << "no O_DIRECT here: " << open()->direct_reason();
  test::ScopedEngineFactory factory([](EngineKind kind, unsigned depth) -> std::unique_ptr<IoEngine> {
    return std::make_unique<FaultyEngine>(test::make_inner_engine(kind, depth),
                                          FaultPlan{.every = 1, .short_transfer = true});
  });
  std::vector<std::unique_ptr<GuardedBuffer>> bufs;
  std::vector<TransferFuture> futs;
  {
    PoolHold hold;
    ASSERT_TRUE(hold.held()) << "the pool threads never all started";
    auto file = open();
    for (unsigned i = 0; i < 16; ++i) {
      bufs.push_back(std::make_unique<GuardedBuffer>(2 * block));
      futs.push_back(read_async(*file, bufs.back()->data(), 2 * block, i * 2 * block, options()));
    }
    file.reset();
    hold.release();
  }
  for (unsigned i = 0; i < futs.size(); ++i) {
    const TransferResult r = futs[i].get();
    EXPECT_EQ(r.bytes, 2 * block) << i;
    EXPECT_TRUE(r.reason.starts_with("O_DIRECT; async I/O thread; the rest: ")) << r.reason;
    EXPECT_TRUE(test::same_bytes(bufs[i]->first(2 * block), expected(i * 2 * block, 2 * block)));
  }
  EXPECT_TRUE(all_closed(path_)) << "descriptors stayed open after the last transfer";
}

// A batch over several Files, each dropped as soon as submit_batch has returned.
TEST_F(Lifetime, BatchEntriesOutliveTheirFiles) {
  std::vector<std::unique_ptr<GuardedBuffer>> bufs;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;  // offset, size
  std::vector<TransferFuture> futs;
  {
    PoolHold hold;
    ASSERT_TRUE(hold.held()) << "the pool threads never all started";
    std::vector<std::unique_ptr<File>> files;
    std::vector<BatchEntry> entries;
    for (unsigned i = 0; i < 24; ++i) {
      if (i % 6 == 0) files.push_back(open());
      const bool aligned = i % 2 == 0;  // aligned ones take the async thread where it serves
      const std::uint64_t offset = aligned ? i * block : i * block + 3;
      const std::uint64_t size = aligned ? block : block - 9;
      bufs.push_back(std::make_unique<GuardedBuffer>(size, i));
      entries.push_back({IoOp::read, files.back().get(), bufs.back()->data(), size, offset});
      ranges.emplace_back(offset, size);
    }
    futs = submit_batch(entries, options());
    files.clear();
    hold.release();
  }
  ASSERT_EQ(futs.size(), ranges.size());
  for (std::size_t i = 0; i < futs.size(); ++i) {
    EXPECT_EQ(futs[i].get().bytes, ranges[i].second) << i;
    EXPECT_TRUE(test::same_bytes(bufs[i]->first(ranges[i].second),
                                 expected(ranges[i].first, ranges[i].second))) << i;
    EXPECT_TRUE(bufs[i]->guards_intact()) << i;
  }
  EXPECT_TRUE(all_closed(path_)) << "descriptors stayed open after the last transfer";
}

// Threads that each open a File, start a read and drop the File at once (on the stack: a
// transfer still pointing at it would be a stack-use-after-scope), while the others do the same.
TEST_F(Lifetime, ThreadsDropFilesDuringAsyncWork) {
  constexpr unsigned threads = 4;
  constexpr unsigned rounds = 20;
  std::atomic<unsigned> wrong{0};
  std::vector<std::thread> workers;
  for (unsigned t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      for (unsigned round = 0; round < rounds; ++round) {
        const bool aligned = (t + round) % 2 == 0;
        const std::uint64_t offset = (t * rounds + round) % 60 * block + (aligned ? 0 : 13);
        const std::uint64_t size = aligned ? 2 * block : block + 5;
        GuardedBuffer buf(size, t);
        TransferFuture fut;
        {
          const File f = File::open(path_, OpenMode::read);
          fut = read_async(f, buf.data(), size, offset, options(round % 3 == 0 ? "auto" : "bypass"));
        }
        const TransferResult r = fut.get();
        if (r.bytes != size || !test::same_bytes(buf.first(size), expected(offset, size)) ||
            !buf.guards_intact()) {
          wrong.fetch_add(1);
        }
      }
    });
  }
  for (auto& w : workers) w.join();
  EXPECT_EQ(wrong.load(), 0U);
  EXPECT_TRUE(all_closed(path_)) << "descriptors stayed open after the last transfer";
}

}  // namespace
}  // namespace sluice
