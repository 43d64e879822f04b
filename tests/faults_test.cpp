// Bad input, and storage that fails: every error is a sluice::Error naming the file and the
// range; retryable failures (EINTR, EAGAIN, short transfers) still give exact bytes; a file
// truncated under a read is an error, never a silently short result (a small read, one
// request, may instead return the shorter file's bytes to its new end).
#include <gtest/gtest.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "sluice/error.hpp"
#include "sluice/file.hpp"
#include "sluice/stats.hpp"
#include "sluice/testing/faulty_engine.hpp"
#include "sluice/transfer.hpp"
#include "sluice/units.hpp"
#include "support/residency_util.hpp"
#include "support/test_util.hpp"

namespace sluice {
namespace {

using test::Folder;
using test::GuardedBuffer;
using test::TempDir;
using test::error_of;


bool contains(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }

// ---- bad input -------------------------------------------------------------------------------

class BadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::make_unique<TempDir>(test::folder_root(Folder::disk).value_or("/tmp"));
    path_ = dir_->file("in.bin");
    test::write_file(path_, test::random_bytes(10000, 1));
  }
  std::unique_ptr<TempDir> dir_;
  std::string path_;
};

TEST_F(BadInput, NullBufferWithBytes) {
  const File f = File::open(path_, OpenMode::read_write);
  for (const bool is_read : {true, false}) {
    const auto e = error_of([&] {
      if (is_read) {
        (void)read(f, nullptr, 10, 4096);
      } else {
        (void)write(f, nullptr, 10, 4096);
      }
    });
    ASSERT_TRUE(e);
    EXPECT_EQ(e->domain(), ErrorDomain::usage);
    EXPECT_EQ(e->op(), is_read ? "read" : "write");
    EXPECT_EQ(e->path(), path_);
    EXPECT_EQ(e->offset(), 4096U);
    EXPECT_EQ(e->size(), 10U);
    EXPECT_TRUE(contains(e->what(), "null buffer")) << e->what();
    EXPECT_TRUE(contains(e->what(), fmt::format("'{}' [offset 4096, 10 bytes]", path_))) << e->what();
  }
  // Nothing to move: a null buffer is fine.
  EXPECT_EQ(read(f, nullptr, 0, 0).bytes, 0U);
  EXPECT_EQ(write(f, nullptr, 0, 0).bytes, 0U);
  EXPECT_EQ(test::file_size(path_), 10000U);
}

TEST_F(BadInput, RangesThatOverflow) {
  const File f = File::open(path_, OpenMode::read_write);
  GuardedBuffer buf(16);
  const std::uint64_t max = std::numeric_limits<std::uint64_t>::max();
  const std::uint64_t big = static_cast<std::uint64_t>(INT64_MAX);
  const std::pair<std::uint64_t, std::uint64_t> cases[] = {
      {max - 5, 10}, {1, max}, {big + 1, 0}, {big, 1}, {20, big - 10}, {max, max}};
  for (const auto& [off, size] : cases) {
    SCOPED_TRACE(fmt::format("offset {} size {}", off, size));
    for (const bool is_read : {true, false}) {
      const auto e = error_of([&] {
        if (is_read) {
          (void)read(f, buf.data(), size, off);
        } else {
          (void)write(f, buf.data(), size, off);
        }
      });
      ASSERT_TRUE(e);
      EXPECT_EQ(e->domain(), ErrorDomain::usage);
      EXPECT_TRUE(contains(e->what(), "range overflows")) << e->what();
      EXPECT_EQ(e->offset(), off);
      EXPECT_EQ(e->size(), size);
    }
  }
  EXPECT_EQ(test::file_size(path_), 10000U);
  EXPECT_TRUE(buf.guards_intact());
  // The largest offset that is allowed reads nothing.
  EXPECT_EQ(read(f, buf.data(), 0, big).bytes, 0U);
}

TEST_F(BadInput, ReadingAWriteOnlyFile) {
  const File f = File::open(path_, OpenMode::write);
  GuardedBuffer buf(100);
  const auto e = error_of([&] { (void)read(f, buf.data(), 100, 0); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->domain(), ErrorDomain::usage);
  EXPECT_EQ(e->path(), path_);
  EXPECT_TRUE(contains(e->what(), "writing only")) << e->what();
  EXPECT_TRUE(contains(e->what(), path_)) << e->what();
}

TEST_F(BadInput, WritingAReadOnlyFile) {
  const File f = File::open(path_, OpenMode::read);
  GuardedBuffer buf(100);
  const auto before = test::read_whole(path_);
  const auto e = error_of([&] { (void)write(f, buf.data(), 100, 0); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->domain(), ErrorDomain::usage);
  EXPECT_EQ(e->path(), path_);
  EXPECT_TRUE(contains(e->what(), "read-only")) << e->what();
  EXPECT_TRUE(test::same_bytes(test::read_whole(path_), before));
}

TEST_F(BadInput, ClosedFile) {
  File f = File::open(path_, OpenMode::read_write);
  f.close();
  GuardedBuffer buf(100);
  for (const bool is_read : {true, false}) {
    const auto e = error_of([&] {
      if (is_read) {
        (void)read(f, buf.data(), 100, 0);
      } else {
        (void)write(f, buf.data(), 100, 0);
      }
    });
    ASSERT_TRUE(e);
    EXPECT_EQ(e->code(), EBADF);
    EXPECT_TRUE(contains(e->what(), path_)) << e->what();
  }
  const File never;
  EXPECT_THROW((void)read(never, buf.data(), 100, 0), Error);
}

// ---- injected faults, for every engine and filesystem ---------------------------------------

struct FaultParam {
  std::string engine;
  Folder folder;
};

void PrintTo(const FaultParam& p, std::ostream* os) { *os << p.engine << " on " << test::to_string(p.folder); }

class Faults : public ::testing::TestWithParam<FaultParam> {
 protected:
  void SetUp() override {
    std::string why;
    if (!test::engine_usable(GetParam().engine, &why)) SLUICE_SKIP_OR_FAIL("io_uring unavailable: " + why);
    const auto root = test::folder_root(GetParam().folder, &why);
    if (!root) GTEST_SKIP() << why;
    dir_ = std::make_unique<TempDir>(*root);
    path_ = dir_->file("faults.bin");
    data_ = test::random_bytes(size_, 77);
    test::write_file(path_, data_);
    cfg_ = test::make_config(GetParam().engine, {.io_size = 16 * KiB, .threads = 2, .queue_depth = 4});
  }

  void install(FaultPlan plan) {
    factory_ = std::make_unique<test::ScopedEngineFactory>([plan](EngineKind kind, unsigned depth) {
      return std::make_unique<FaultyEngine>(test::make_inner_engine(kind, depth), plan);
    });
  }

  // Reads [off, off + n) through a buffer at `shift` and checks the bytes.
  void expect_exact_read(std::uint64_t off, std::uint64_t n, std::size_t shift) {
    SCOPED_TRACE(fmt::format("read offset {} size {} shift {}", off, n, shift));
    const File f = File::open(path_, OpenMode::read);
    GuardedBuffer buf(n, shift);
    const TransferResult r = read(f, buf.data(), n, off, test::options_for(cfg_));
    EXPECT_EQ(r.bytes, n);
    EXPECT_TRUE(test::same_bytes(buf.first(n), std::span(data_).subspan(off, n)));
    EXPECT_TRUE(buf.guards_intact());
  }

  // Writes fresh bytes at [off, off + n) through a buffer at `shift` and checks the file.
  void expect_exact_write(std::uint64_t off, std::uint64_t n, std::size_t shift, std::uint64_t seed) {
    SCOPED_TRACE(fmt::format("write offset {} size {} shift {}", off, n, shift));
    const File f = File::open(path_, OpenMode::read_write);
    GuardedBuffer buf(n, shift);
    const auto fresh = test::random_bytes(n, seed);
    std::copy(fresh.begin(), fresh.end(), buf.data());
    EXPECT_EQ(write(f, buf.data(), n, off, test::options_for(cfg_)).bytes, n);
    std::copy(fresh.begin(), fresh.end(), data_.begin() + static_cast<std::ptrdiff_t>(off));
    EXPECT_TRUE(test::same_bytes(test::read_whole(path_), data_));
  }

  // Checks that `e` names the file and a range inside the block-widened request.
  void expect_names_file_and_range(const Error& e, std::uint64_t off, std::uint64_t n) {
    EXPECT_EQ(e.path(), path_);
    EXPECT_TRUE(contains(e.what(), path_)) << e.what();
    EXPECT_TRUE(contains(e.what(), fmt::format("[offset {}, {} bytes]", e.offset(), e.size()))) << e.what();
    EXPECT_GT(e.size(), 0U);
    EXPECT_GE(e.offset(), round_down(off, 4096)) << e.what();
    EXPECT_LE(e.offset() + e.size(), round_up(off + n, 4096)) << e.what();
  }

  static constexpr std::uint64_t size_ = MiB + 3000;
  std::unique_ptr<TempDir> dir_;
  std::string path_;
  std::vector<std::byte> data_;
  std::shared_ptr<const Config> cfg_;
  std::unique_ptr<test::ScopedEngineFactory> factory_;
};

TEST_P(Faults, EioIsAnErrorNamingFileAndRange) {
  install({.every = 5, .error = EIO});
  const File f = File::open(path_, OpenMode::read);
  GuardedBuffer buf(size_ - 10, 7);
  const StatsSnapshot before = stats().snapshot();
  const auto e = error_of([&] { (void)read(f, buf.data(), size_ - 10, 10, test::options_for(cfg_)); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->domain(), ErrorDomain::os);
  EXPECT_EQ(e->code(), EIO);
  EXPECT_EQ(e->op(), "read");
  EXPECT_TRUE(contains(e->what(), std::strerror(EIO))) << e->what();
  expect_names_file_and_range(*e, 10, size_ - 10);
  EXPECT_TRUE(buf.guards_intact());
  EXPECT_EQ(stats().snapshot().at(Path::host, Direction::read).errors,
            before.at(Path::host, Direction::read).errors + 1);
}

// A hard error on a small read of cached data (one request outside the pipeline, host_path.cpp)
// is reported as the pipeline reports it, never retried into a success. Every second request
// fails and requests are counted per engine: the first read's is the first, the second read's
// the second.
TEST_P(Faults, EioOnASmallCachedReadIsReported) {
  const test::PinnedRange pin = test::pin_resident(path_, 0, size_);  // cached, and kept so
  install({.every = 2, .error = EIO, .only = IoOp::read});
  const File f = File::open(path_, OpenMode::read);
  GuardedBuffer buf(4096, 0);
  const TransferOptions opts = test::options_for(test::make_config(
      GetParam().engine,
      {.io_size = 16 * KiB, .threads = 2, .queue_depth = 4, .cache_policy = "auto"}));
  EXPECT_EQ(read(f, buf.data(), 4096, 8192, opts).bytes, 4096U);
  const auto e = error_of([&] { (void)read(f, buf.data(), 4096, 8192, opts); });
  ASSERT_TRUE(e) << "the EIO was masked";
  EXPECT_EQ(e->code(), EIO);
  EXPECT_EQ(e->op(), "read");
  expect_names_file_and_range(*e, 8192, 4096);
  EXPECT_TRUE(buf.guards_intact());
}

// A soft error (EAGAIN) on a small cached read's first request, the cached_only one, sends the
// read the probed way, whose plain read succeeds: exact bytes, the reason of a cached read, both
// requests in its ios. Every second request fails: the first read's is the first.
TEST_P(Faults, EagainOnASmallCachedReadGoesTheProbedWay) {
  const test::PinnedRange pin = test::pin_resident(path_, 0, size_);  // cached, and kept so
  install({.every = 2, .error = EAGAIN, .only = IoOp::read});
  const File f = File::open(path_, OpenMode::read);
  GuardedBuffer buf(4096, 0);
  const TransferOptions opts = test::options_for(test::make_config(
      GetParam().engine,
      {.io_size = 16 * KiB, .threads = 2, .queue_depth = 4, .cache_policy = "auto"}));
  EXPECT_EQ(read(f, buf.data(), 4096, 0, opts).ios, 1U);
  const TransferResult r = read(f, buf.data(), 4096, 8192, opts);
  EXPECT_EQ(r.bytes, 4096U);
  EXPECT_TRUE(test::same_bytes(buf.first(4096), std::span(data_).subspan(8192, 4096)));
  EXPECT_EQ(r.ios, 2U);
  EXPECT_EQ(r.path, Path::host);
  if (f.has_direct()) {
    EXPECT_EQ(r.reason, "page cache held 100% of the range: buffered");
    EXPECT_EQ(r.cached_bytes, 4096U);
  }
  EXPECT_TRUE(buf.guards_intact());
}

// SLUICE_FAULTS' random faults: soft ones (EAGAIN, EINTR, short transfers, delays) at a high rate
// leave reads and writes exact; EIO at rate 1 fails the first request, and the log has its line.
TEST_P(Faults, RandomSoftFaultsLeaveBytesExact) {
  const std::string log = dir_->file("faults.log");
  const RandomFaults faults = parse_faults("eagain=0.2,eintr=0.2,short=0.2,delay=0.05:100us,seed=9,log=" + log);
  factory_ = std::make_unique<test::ScopedEngineFactory>([faults](EngineKind kind, unsigned depth) {
    return std::make_unique<FaultyEngine>(test::make_inner_engine(kind, depth), faults);
  });
  expect_exact_read(0, size_, 0);
  expect_exact_read(4097, 300 * KiB, 1);
  expect_exact_write(5000, 100 * KiB + 7, 3, 1);
  const std::string lines = test::read_text(log);
  for (const char* kind : {"fault=eagain", "fault=eintr", "fault=short", "fault=delay"}) {
    EXPECT_TRUE(contains(lines, kind)) << kind << " never drawn:\n" << lines;
  }
  EXPECT_FALSE(contains(lines, "fault=eio"));
}

TEST_P(Faults, RandomEioFailsNamingFileAndRange) {
  const std::string log = dir_->file("faults.log");
  const RandomFaults faults = parse_faults("eio=1,log=" + log);
  factory_ = std::make_unique<test::ScopedEngineFactory>([faults](EngineKind kind, unsigned depth) {
    return std::make_unique<FaultyEngine>(test::make_inner_engine(kind, depth), faults);
  });
  const File f = File::open(path_, OpenMode::read);
  GuardedBuffer buf(200 * KiB, 0);
  const auto e = error_of([&] { (void)read(f, buf.data(), 200 * KiB, 8192, test::options_for(cfg_)); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), EIO);
  expect_names_file_and_range(*e, 8192, 200 * KiB);
  EXPECT_TRUE(contains(test::read_text(log), fmt::format("pid={} fault=eio op=read offset=", ::getpid())));
}

TEST(FaultSpec, ParsesEveryKeyAndRefusesBadItems) {
  const RandomFaults f =
      parse_faults("eio=0.001,enospc=0.002,eagain=0.01,eintr=0.02,short=0.03,delay=0.5:2ms,seed=42,only=write,log=/x");
  EXPECT_DOUBLE_EQ(f.eio, 0.001);
  EXPECT_DOUBLE_EQ(f.enospc, 0.002);
  EXPECT_DOUBLE_EQ(f.eagain, 0.01);
  EXPECT_DOUBLE_EQ(f.eintr, 0.02);
  EXPECT_DOUBLE_EQ(f.short_transfer, 0.03);
  EXPECT_DOUBLE_EQ(f.delay, 0.5);
  EXPECT_EQ(f.delay_for, std::chrono::milliseconds(2));
  EXPECT_EQ(f.seed, 42U);
  EXPECT_EQ(f.only, IoOp::write);
  EXPECT_EQ(f.log, "/x");
  EXPECT_EQ(parse_faults("").eio, 0);
  // The delay takes the durations of every option (units.hpp), to the microsecond.
  EXPECT_EQ(parse_faults("delay=0.1:250us").delay_for, std::chrono::microseconds(250));
  EXPECT_EQ(parse_faults("delay=0.1:1.5ms").delay_for, std::chrono::microseconds(1500));
  EXPECT_EQ(parse_faults("delay=0.1:2").delay_for, std::chrono::seconds(2));
  EXPECT_EQ(parse_faults("delay=0.1:1m").delay_for, std::chrono::minutes(1));
  for (const char* bad : {"eio", "eio=2", "eio=-0.1", "eio=x", "nosuch=1", "delay=0.1:5x", "delay=0.1:-1ms",
                          "delay=0.1:", "only=both",
                          "seed=abc", "eio=0.6,eagain=0.6"}) {
    const auto e = error_of([&] { (void)parse_faults(bad); });
    ASSERT_TRUE(e) << bad;
    EXPECT_EQ(e->domain(), ErrorDomain::usage) << bad;
    EXPECT_TRUE(contains(e->what(), "SLUICE_FAULTS")) << e->what();
  }
}

TEST_P(Faults, EioOnWrite) {
  install({.every = 3, .error = EIO, .only = IoOp::write});
  const File f = File::open(path_, OpenMode::read_write);
  GuardedBuffer buf(200 * KiB, 0);
  const auto e = error_of([&] { (void)write(f, buf.data(), 200 * KiB, 4096, test::options_for(cfg_)); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), EIO);
  EXPECT_EQ(e->op(), "write");
  expect_names_file_and_range(*e, 4096, 200 * KiB);
}

TEST_P(Faults, EintrIsRetried) {
  install({.every = 3, .error = EINTR});
  expect_exact_read(0, size_, 0);
  expect_exact_read(4097, 300 * KiB, 1);
  expect_exact_write(5000, 100 * KiB + 7, 3, 1);
  expect_exact_write(64 * KiB, 128 * KiB, 0, 2);
}

TEST_P(Faults, EagainIsRetried) {
  install({.every = 2, .error = EAGAIN});
  expect_exact_read(1, size_ - 1, 7);
  expect_exact_read(0, 4096, 0);
  expect_exact_write(12345, 70000, 512, 3);
}

TEST_P(Faults, EndlessEintrGivesUpWithAnError) {
  install({.every = 1, .error = EINTR});
  const File f = File::open(path_, OpenMode::read);
  GuardedBuffer buf(8192);
  const auto e = error_of([&] { (void)read(f, buf.data(), 8192, 0, test::options_for(cfg_)); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), EINTR);
  expect_names_file_and_range(*e, 0, 8192);
}

// A filesystem that refuses an O_DIRECT request with EINVAL (alignments it reported but does not
// honour) gets the request again on the buffered descriptor; a buffered request has no such way
// out and fails. One request in flight, so every retry directly follows its refusal.
TEST_P(Faults, EinvalOnDirectIsRetriedBuffered) {
  install({.every = 3, .error = EINVAL, .only = IoOp::read});
  cfg_ = test::make_config(GetParam().engine, {.io_size = 16 * KiB, .threads = 1, .queue_depth = 1});
  const File f = File::open(path_, OpenMode::read);
  if (f.has_direct()) {
    expect_exact_read(0, size_, 0);
    expect_exact_read(4097, 300 * KiB, 1);
    return;
  }
  GuardedBuffer buf(size_);
  const auto e = error_of([&] { (void)read(f, buf.data(), size_, 0, test::options_for(cfg_)); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), EINVAL);
  expect_names_file_and_range(*e, 0, size_);
}

TEST_P(Faults, ShortTransfersAreContinued) {
  install({.every = 2, .short_transfer = true});
  expect_exact_read(0, size_, 0);
  expect_exact_read(4095, 500 * KiB, 1);
  expect_exact_read(size_ - 9000, 9000, 4096);
  expect_exact_write(0, 256 * KiB, 0, 4);
  expect_exact_write(777, 256 * KiB, 7, 5);
}

TEST_P(Faults, ShortTransfersEveryTime) {
  install({.every = 1, .short_transfer = true});
  expect_exact_read(100, 200 * KiB, 0);
  expect_exact_write(100, 200 * KiB, 1, 6);
}

TEST_P(Faults, EnospcOnWriteIsAnError) {
  install({.every = 4, .error = ENOSPC, .only = IoOp::write});
  const File f = File::open(path_, OpenMode::read_write);
  GuardedBuffer buf(300 * KiB, 1);
  const auto e = error_of([&] { (void)write(f, buf.data(), 300 * KiB, size_, test::options_for(cfg_)); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->domain(), ErrorDomain::os);
  EXPECT_EQ(e->code(), ENOSPC);
  EXPECT_TRUE(contains(e->what(), std::strerror(ENOSPC))) << e->what();
  expect_names_file_and_range(*e, size_, 300 * KiB);
  // Reads are unaffected by a write-only fault plan.
  expect_exact_read(0, size_, 0);
}

TEST_P(Faults, DelaysChangeNothing) {
  install({.delay = std::chrono::microseconds(200)});
  expect_exact_read(3, 256 * KiB, 0);
  expect_exact_write(3, 64 * KiB, 0, 7);
}

// After a failed transfer the engine of the calling thread has nothing left in flight, and
// the next transfer on the same engines gives exact bytes.
TEST_P(Faults, EnginesAreCleanAfterAFailure) {
  auto armed = std::make_shared<std::atomic<bool>>(true);
  class OneShotEio final : public IoEngine {
   public:
    OneShotEio(std::unique_ptr<IoEngine> inner, std::shared_ptr<std::atomic<bool>> armed)
        : inner_(std::move(inner)), armed_(std::move(armed)) {}
    EngineKind kind() const noexcept override { return inner_->kind(); }
    std::string_view name() const noexcept override { return "one-shot-eio"; }
    unsigned capacity() const noexcept override { return inner_->capacity(); }
    unsigned in_flight() const noexcept override { return inner_->in_flight() + (pending_ ? 1U : 0U); }
    void prepare(const IoRequest& r) override {
      // The third request of the armed period fails: by then others are in flight.
      if (armed_->load() && ++seen_ == 3) {
        pending_ = IoCompletion{r.tag, -EIO};
        return;
      }
      inner_->prepare(r);
    }
    std::size_t submit_and_wait(std::span<IoCompletion> out, std::size_t min) override {
      std::size_t n = 0;
      if (pending_ && !out.empty()) {
        out[n++] = *pending_;
        pending_.reset();
      }
      if (inner_->in_flight() == 0) return n;
      return n + inner_->submit_and_wait(out.subspan(n), min > n ? min - n : 0);
    }
    bool register_buffers(std::span<const iovec> b) override { return inner_->register_buffers(b); }
    void unregister_buffers() override { inner_->unregister_buffers(); }
    int register_file(int fd) override { return inner_->register_file(fd); }
    void unregister_file(int slot) override { inner_->unregister_file(slot); }

   private:
    std::unique_ptr<IoEngine> inner_;
    std::shared_ptr<std::atomic<bool>> armed_;
    unsigned seen_ = 0;
    std::optional<IoCompletion> pending_;
  };
  test::ScopedEngineFactory factory([armed](EngineKind kind, unsigned depth) {
    return std::make_unique<OneShotEio>(test::make_inner_engine(kind, depth), armed);
  });
  auto cfg = test::make_config(GetParam().engine, {.io_size = 16 * KiB, .threads = 1, .queue_depth = 8});
  const File f = File::open(path_, OpenMode::read);
  GuardedBuffer buf(size_, 0);
  const auto e = error_of([&] { (void)read(f, buf.data(), size_, 0, test::options_for(cfg)); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code(), EIO);
  IoEngine& engine = thread_engine(resolve_engine(*parse_engine_setting(GetParam().engine)), 8);
  EXPECT_EQ(engine.name(), "one-shot-eio");
  EXPECT_EQ(engine.in_flight(), 0U) << "I/O left in flight after the failure";
  armed->store(false);
  buf.fill(std::byte{0});
  EXPECT_EQ(read(f, buf.data(), size_, 0, test::options_for(cfg)).bytes, size_);
  EXPECT_TRUE(test::same_bytes(buf.first(size_), data_));
  EXPECT_TRUE(buf.guards_intact());
}

// An engine decorator that shrinks the file when the first I/O is prepared, so every request
// of the read sees the shorter file.
class TruncatingEngine final : public test::ForwardingEngine {
 public:
  TruncatingEngine(std::unique_ptr<IoEngine> inner, std::shared_ptr<std::atomic<bool>> once, int fd,
                   off_t new_size)
      : ForwardingEngine(std::move(inner)), once_(std::move(once)), fd_(fd), new_size_(new_size) {}
  std::string_view name() const noexcept override { return "truncating"; }
  void prepare(const IoRequest& r) override {
    if (!once_->exchange(true)) {
      EXPECT_EQ(::ftruncate(fd_, new_size_), 0);
    }
    inner_->prepare(r);
  }

 private:
  std::shared_ptr<std::atomic<bool>> once_;
  int fd_;
  off_t new_size_;
};

TEST_P(Faults, FileTruncatedDuringARead) {
  struct Case {
    const char* name;
    test::Shape shape;
    std::uint64_t off, n;
    off_t new_size;
    std::size_t shift;
  };
  const Case cases[] = {
      {"multi-worker, aligned", {.io_size = 16 * KiB, .threads = 2, .queue_depth = 4}, 0, size_, 300000, 0},
      {"misaligned buffer", {.io_size = 16 * KiB, .threads = 1, .queue_depth = 2}, 100, size_ - 100, 4096 * 10 + 5, 1},
      {"to nothing", {.io_size = 64 * KiB, .threads = 1, .queue_depth = 1}, 0, 1000, 0, 0},
      {"inside one block", {.io_size = 64 * KiB, .threads = 1, .queue_depth = 1}, 10, 1000, 500, 0},
      {"buffered", {.io_size = 8 * KiB, .threads = 3, .queue_depth = 2, .direct_io = false}, 0, size_, 20000, 0},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    test::write_file(path_, data_);
    const int fd = ::open(path_.c_str(), O_RDWR | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    auto once = std::make_shared<std::atomic<bool>>(false);
    {
      test::ScopedEngineFactory factory([once, fd, &c](EngineKind kind, unsigned depth) {
        return std::make_unique<TruncatingEngine>(test::make_inner_engine(kind, depth), once, fd, c.new_size);
      });
      const File f = File::open(path_, OpenMode::read);
      GuardedBuffer buf(c.n, c.shift);
      const auto cfg = test::make_config(GetParam().engine, c.shape);
      std::optional<Error> e;
      std::optional<TransferResult> r;
      try {
        r = read(f, buf.data(), c.n, c.off, test::options_for(cfg));
      } catch (const Error& x) {
        e = x;
      }
      if (e) {
        EXPECT_EQ(e->domain(), ErrorDomain::data) << e->what();
        EXPECT_TRUE(contains(e->what(), "truncated")) << e->what();
        expect_names_file_and_range(*e, c.off, c.n);
      } else {
        // Only a small read (one request outside the pipeline, host_path.cpp) may succeed: a short
        // one asks the file's size again, which orders the truncation before the read, and the
        // bytes are then those of the shorter file, to its new end; never silently fewer.
        ASSERT_TRUE(r);
        EXPECT_LE(c.n, 128 * KiB) << "a pipeline read came back short without an error";
        const std::uint64_t end = static_cast<std::uint64_t>(c.new_size);
        EXPECT_EQ(r->bytes, end > c.off ? std::min(c.n, end - c.off) : 0U);
        EXPECT_TRUE(test::same_bytes(buf.first(r->bytes), std::span(data_).subspan(c.off, r->bytes)));
      }
      EXPECT_TRUE(once->load()) << "no I/O was prepared";
      EXPECT_TRUE(buf.guards_intact());
    }
    ::close(fd);
  }
}

INSTANTIATE_TEST_SUITE_P(Engines, Faults,
                         ::testing::Values(FaultParam{"uring", Folder::disk}, FaultParam{"uring", Folder::tmpfs},
                                           FaultParam{"psync", Folder::disk}, FaultParam{"psync", Folder::tmpfs}),
                         [](const auto& p) {
                           return fmt::format("{}_{}", p.param.engine, test::to_string(p.param.folder));
                         });

}  // namespace
}  // namespace sluice
