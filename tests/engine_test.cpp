// The IoEngine contract, for every engine: each prepared request completes exactly once with
// its tag and either the byte count or -errno; failures are completions, not exceptions.
#include "sluice/io_engine.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <map>
#include <thread>

#include "io/uring_engine.hpp"
#include "sluice/error.hpp"
#include "sluice/testing/faulty_engine.hpp"
#include "support/test_util.hpp"

namespace sluice {
namespace {

using test::TempDir;

class EngineContract : public ::testing::TestWithParam<EngineKind> {
 protected:
  void SetUp() override {
    std::string why;
    if (GetParam() == EngineKind::uring && !uring_available(&why)) SLUICE_SKIP_OR_FAIL("io_uring unavailable: " + why);
    dir_ = std::make_unique<TempDir>("/tmp");
    path_ = dir_->file("engine.bin");
    data_ = test::random_bytes(16 * 4096 + 100, 11);
    test::write_file(path_, data_);
    fd_ = ::open(path_.c_str(), O_RDWR | O_CLOEXEC);
    ASSERT_GE(fd_, 0);
  }
  void TearDown() override {
    if (fd_ >= 0) ::close(fd_);
  }

  // Collects completions until `n` have arrived, using an output span of `batch` entries.
  static std::map<std::uint64_t, std::int64_t> drain(IoEngine& e, std::size_t n, std::size_t batch) {
    std::map<std::uint64_t, std::int64_t> got;
    std::vector<IoCompletion> out(batch);
    std::size_t seen = 0;
    while (seen < n) {
      const std::size_t k = e.submit_and_wait(out, 1);
      EXPECT_GT(k, 0U) << "submit_and_wait returned nothing with requests in flight";
      if (k == 0) break;
      for (std::size_t i = 0; i < k; ++i) {
        EXPECT_TRUE(got.emplace(out[i].tag, out[i].result).second) << "tag " << out[i].tag << " twice";
      }
      seen += k;
    }
    EXPECT_EQ(e.in_flight(), 0U);
    return got;
  }

  std::unique_ptr<TempDir> dir_;
  std::string path_;
  std::vector<std::byte> data_;
  int fd_ = -1;
};

TEST_P(EngineContract, KindNameCapacity) {
  auto e = test::make_inner_engine(GetParam(), 8);
  EXPECT_EQ(e->kind(), GetParam());
  EXPECT_EQ(e->name(), to_string(GetParam()));
  EXPECT_EQ(e->capacity(), 8U);
  EXPECT_EQ(e->in_flight(), 0U);
}

TEST_P(EngineContract, ReadsCompleteExactlyOnceWithTheirTags) {
  auto e = test::make_inner_engine(GetParam(), 16);
  std::vector<std::vector<std::byte>> bufs(16, std::vector<std::byte>(4096));
  for (unsigned i = 0; i < 16; ++i) {
    e->prepare({.op = IoOp::read, .fd = fd_, .buf = bufs[i].data(), .len = 4096,
                .offset = (15 - i) * 4096ULL, .tag = 1000 + i});
  }
  EXPECT_EQ(e->in_flight(), 16U);
  const auto got = drain(*e, 16, 3);  // a small output span: the rest must come later
  ASSERT_EQ(got.size(), 16U);
  for (unsigned i = 0; i < 16; ++i) {
    EXPECT_EQ(got.at(1000 + i), 4096);
    EXPECT_TRUE(test::same_bytes(bufs[i], std::span(data_).subspan((15 - i) * 4096ULL, 4096)));
  }
}

TEST_P(EngineContract, WritesLandInTheFile) {
  auto e = test::make_inner_engine(GetParam(), 4);
  const auto src = test::random_bytes(4 * 1000, 12);
  for (unsigned i = 0; i < 4; ++i) {
    e->prepare({.op = IoOp::write, .fd = fd_, .buf = const_cast<std::byte*>(src.data()) + i * 1000,
                .len = 1000, .offset = 50000ULL + i * 1000, .tag = i});
  }
  const auto got = drain(*e, 4, 4);
  for (unsigned i = 0; i < 4; ++i) EXPECT_EQ(got.at(i), 1000);
  EXPECT_TRUE(test::same_bytes(test::pread_file(path_, 50000, 4000), src));
}

TEST_P(EngineContract, ErrorsAndEndOfFileAreCompletions) {
  auto e = test::make_inner_engine(GetParam(), 4);
  std::vector<std::byte> buf(4096);
  e->prepare({.op = IoOp::read, .fd = 1 << 20, .buf = buf.data(), .len = 4096, .offset = 0, .tag = 1});
  e->prepare({.op = IoOp::read, .fd = fd_, .buf = buf.data(), .len = 4096, .offset = 1 << 30, .tag = 2});
  e->prepare({.op = IoOp::read, .fd = fd_, .buf = buf.data(), .len = 4096,
              .offset = data_.size() - 100, .tag = 3});
  const auto got = drain(*e, 3, 8);
  EXPECT_EQ(got.at(1), -EBADF);
  EXPECT_EQ(got.at(2), 0);    // past the end
  EXPECT_EQ(got.at(3), 100);  // up to the end
}

TEST_P(EngineContract, SubmitWithNothingInFlightReturnsNothing) {
  auto e = test::make_inner_engine(GetParam(), 2);
  std::vector<IoCompletion> out(2);
  EXPECT_EQ(e->submit_and_wait(out, 0), 0U);
  EXPECT_EQ(e->submit_and_wait(out, 1), 0U);
}

// A caller that only polls (min_complete 0) sees completions without ever waiting: a ring that
// runs completions only when its owner waits (deferred task running) must still deliver them.
// io_uring reads a pipe, which completes later, from the writer's side, not inline in the
// submission; psync (which cannot read pipes with pread) reads the file.
TEST_P(EngineContract, PollingSeesCompletions) {
  auto e = test::make_inner_engine(GetParam(), 4);
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  const bool uring = GetParam() == EngineKind::uring;
  char byte = 0;
  e->prepare(
      {.op = IoOp::read, .fd = uring ? p[0] : fd_, .buf = &byte, .len = 1, .offset = 0, .tag = 3});
  std::vector<IoCompletion> out(2);
  std::size_t k = 0;
  if (uring) {
    EXPECT_EQ(e->submit_and_wait(out, 0), 0U);  // nothing to read yet
    ASSERT_EQ(::write(p[1], "y", 1), 1);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (k == 0 && std::chrono::steady_clock::now() < deadline) {
    k = e->submit_and_wait(out, 0);
    if (k == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(k, 1U);
  EXPECT_EQ(out[0].tag, 3U);
  EXPECT_EQ(out[0].result, 1);
  EXPECT_EQ(byte, uring ? 'y' : static_cast<char>(data_[0]));
  EXPECT_EQ(e->in_flight(), 0U);
  ::close(p[0]);
  ::close(p[1]);
}

// wake() from another thread ends a wait that no completion would end (a read of an empty
// pipe); the request still completes exactly once afterwards.
TEST_P(EngineContract, WakeEndsAWaitFromAnotherThread) {
  auto e = test::make_inner_engine(GetParam(), 4);
  if (!e->enable_wake()) {
    EXPECT_EQ(GetParam(), EngineKind::psync);  // psync's waits end by themselves
    return;
  }
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  char byte = 0;
  e->prepare({.op = IoOp::read, .fd = p[0], .buf = &byte, .len = 1, .offset = 0, .tag = 7});
  std::atomic<bool> returned{false};
  std::thread waker([&] {
    // Until the wait has returned: a wake that comes before the wait begins may end it too.
    while (!returned.load()) {
      e->wake();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  std::vector<IoCompletion> out(2);
  const std::size_t k = e->submit_and_wait(out, 1);
  returned = true;
  waker.join();
  EXPECT_EQ(k, 0U);
  EXPECT_EQ(e->in_flight(), 1U);
  ASSERT_EQ(::write(p[1], "x", 1), 1);
  const auto got = drain(*e, 1, 2);
  EXPECT_EQ(got.at(7), 1);
  EXPECT_EQ(byte, 'x');
  ::close(p[0]);
  ::close(p[1]);
}

// What this kernel lets a fresh ring register, asked of liburing directly (not through the
// engine): where it can, the engine must have registered too.
struct KernelRegistration {
  bool buffers = false;
  bool files = false;
};
KernelRegistration kernel_registration(const iovec& region) {
  KernelRegistration k;
  io_uring ring{};
  if (io_uring_queue_init(4, &ring, 0) != 0) return k;
  k.buffers = io_uring_register_buffers(&ring, &region, 1) == 0;
  k.files = io_uring_register_files_sparse(&ring, UringEngine::file_slots) == 0;
  io_uring_queue_exit(&ring);
  return k;
}

TEST_P(EngineContract, RegisteredBuffersAndFiles) {
  auto e = test::make_inner_engine(GetParam(), 4);
  void* raw = nullptr;
  ASSERT_EQ(posix_memalign(&raw, 4096, 5 * 4096), 0);
  std::unique_ptr<void, decltype(&std::free)> mem(raw, &std::free);
  const iovec region{raw, 4 * 4096};  // the fifth page stays outside
  auto* uring = dynamic_cast<UringEngine*>(e.get());
  ASSERT_EQ(uring != nullptr, GetParam() == EngineKind::uring);
  const KernelRegistration kernel = uring != nullptr ? kernel_registration(region) : KernelRegistration{};
  const bool fixed = e->register_buffers({&region, 1});
  EXPECT_EQ(fixed, kernel.buffers) << "the kernel registers buffers for a fresh ring; the engine must too";
  if (uring != nullptr) {
    EXPECT_EQ(uring->buffers_registered(), fixed);
    if (!kernel.buffers) test::skip_part("fixed buffers: this kernel refuses io_uring buffer registration");
  }
  EXPECT_EQ(e->ensure_buffers(42, {&region, 1}), fixed);
  EXPECT_EQ(e->ensure_buffers(42, {&region, 1}), fixed);  // same set: no re-registration
  const int slot = e->register_file(fd_);
  EXPECT_EQ(slot >= 0, kernel.files) << "the kernel takes a sparse file table; the engine must too";
  if (uring != nullptr) {
    EXPECT_EQ(uring->files_registered(), slot >= 0 ? 1U : 0U);
    if (!kernel.files) test::skip_part("fixed files: this kernel refuses a sparse io_uring file table");
  }
  auto* bytes = static_cast<std::byte*>(raw);
  for (unsigned i = 0; i < 4; ++i) {
    IoRequest r{.op = IoOp::read, .fd = fd_, .buf = bytes + i * 4096, .len = 4096,
                .offset = i * 4096ULL, .tag = i};
    if (fixed) r.buf_index = 0;
    if (slot >= 0) {
      r.fd = slot;
      r.fixed_file = true;
    }
    e->prepare(r);
  }
  if (fixed) {
    // A fixed read into memory outside the registered buffer is refused by the kernel: proof
    // that the engine really issued fixed reads (a plain read there would succeed).
    e->prepare({.op = IoOp::read, .fd = fd_, .buf = bytes + 4 * 4096, .len = 4096, .offset = 0, .tag = 4,
                .buf_index = 0});
  }
  const auto got = drain(*e, fixed ? 5 : 4, 5);
  for (unsigned i = 0; i < 4; ++i) EXPECT_EQ(got.at(i), 4096);
  if (fixed) {
    EXPECT_EQ(got.at(4), -EFAULT) << "a read outside the registered buffer was not a fixed read";
  }
  EXPECT_TRUE(test::same_bytes({bytes, 4 * 4096}, std::span(data_).first(4 * 4096)));
  e->unregister_file(slot);
  e->unregister_buffers();
  if (uring != nullptr) {
    EXPECT_FALSE(uring->buffers_registered());
    EXPECT_EQ(uring->files_registered(), 0U);
  }
}

INSTANTIATE_TEST_SUITE_P(Engines, EngineContract, ::testing::Values(EngineKind::uring, EngineKind::psync),
                         [](const auto& p) { return std::string(to_string(p.param)); });

TEST(Engine, ZeroDepthIsRefused) {
  EXPECT_THROW((void)make_engine(EngineKind::psync, 0), Error);
  EXPECT_THROW((void)make_engine(EngineKind::uring, 0), Error);
}

TEST(Engine, ResolveSettings) {
  EXPECT_EQ(resolve_engine(EngineSetting::psync), EngineKind::psync);
  std::string why;
  const bool uring = uring_available(&why);
  EXPECT_EQ(resolve_engine(EngineSetting::automatic), uring ? EngineKind::uring : EngineKind::psync);
  if (uring) {
    EXPECT_TRUE(why.empty());
    EXPECT_EQ(resolve_engine(EngineSetting::uring), EngineKind::uring);
  } else {
    EXPECT_FALSE(why.empty());
    try {
      (void)resolve_engine(EngineSetting::uring);
      FAIL() << "no throw";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ENOSYS) << e.what();
    }
  }
  EXPECT_EQ(to_string(EngineKind::uring), "uring");
  EXPECT_EQ(to_string(EngineKind::psync), "psync");
}

TEST(Engine, ThreadEngineIsCachedPerThreadAndRebuiltAfterAFactoryChange) {
  IoEngine& a = thread_engine(EngineKind::psync, 4);
  EXPECT_EQ(&thread_engine(EngineKind::psync, 4), &a);
  EXPECT_EQ(&thread_engine(EngineKind::psync, 2), &a);  // a smaller depth fits the same engine
  IoEngine* other = nullptr;
  std::thread([&] { other = &thread_engine(EngineKind::psync, 4); }).join();
  EXPECT_NE(other, &a);

  unsigned made = 0;
  {
    test::ScopedEngineFactory factory([&](EngineKind kind, unsigned depth) {
      ++made;
      return std::make_unique<FaultyEngine>(test::make_inner_engine(kind, depth), FaultPlan{});
    });
    IoEngine& wrapped = thread_engine(EngineKind::psync, 4);
    EXPECT_EQ(wrapped.name(), "faulty");
    EXPECT_EQ(made, 1U);
    EXPECT_EQ(&thread_engine(EngineKind::psync, 4), &wrapped);
    EXPECT_EQ(made, 1U);
    IoEngine& deeper = thread_engine(EngineKind::psync, 64);  // more depth: a new engine
    EXPECT_GE(deeper.capacity(), 64U);
    EXPECT_EQ(made, 2U);
  }
  EXPECT_EQ(thread_engine(EngineKind::psync, 4).name(), "psync");  // default restored
}

class FaultyEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::make_unique<TempDir>("/tmp");
    path_ = dir_->file("f.bin");
    test::write_file(path_, test::random_bytes(64 * 1024, 5));
    fd_ = ::open(path_.c_str(), O_RDWR | O_CLOEXEC);
    ASSERT_GE(fd_, 0);
  }
  void TearDown() override { ::close(fd_); }

  // Issues `n` reads or writes of `len` bytes one after another; returns result by tag.
  std::vector<std::int64_t> run(FaultyEngine& e, unsigned n, IoOp op, std::uint32_t len = 4096) {
    std::vector<std::int64_t> results(n);
    std::vector<std::byte> buf(len);
    for (unsigned i = 0; i < n; ++i) {
      e.prepare({.op = op, .fd = fd_, .buf = buf.data(), .len = len, .offset = 0, .tag = i});
      IoCompletion c[2];
      std::size_t k = 0;
      while (k == 0) k = e.submit_and_wait(c, 1);
      EXPECT_EQ(k, 1U);
      EXPECT_EQ(c[0].tag, i);
      results[i] = c[0].result;
    }
    EXPECT_EQ(e.in_flight(), 0U);
    return results;
  }

  std::unique_ptr<TempDir> dir_;
  std::string path_;
  int fd_ = -1;
};

TEST_F(FaultyEngineTest, ErrorEveryNth) {
  FaultyEngine e(test::make_inner_engine(EngineKind::psync, 4), {.every = 3, .error = EIO});
  EXPECT_EQ(e.name(), "faulty");
  EXPECT_EQ(e.kind(), EngineKind::psync);
  EXPECT_EQ(e.capacity(), 4U);
  const auto r = run(e, 9, IoOp::read);
  for (unsigned i = 0; i < 9; ++i) EXPECT_EQ(r[i], (i + 1) % 3 == 0 ? -EIO : 4096) << i;
  EXPECT_EQ(e.injected(), 3U);
}

TEST_F(FaultyEngineTest, ShortTransfers) {
  FaultyEngine e(test::make_inner_engine(EngineKind::psync, 4), {.every = 2, .short_transfer = true});
  const auto r = run(e, 4, IoOp::read, 3000);
  EXPECT_EQ(r[0], 3000);
  EXPECT_EQ(r[1], 1024);  // half of 3000, rounded down to 512
  EXPECT_EQ(r[3], 1024);
  // Between 512 and 1024 bytes: 512, never a zero-byte "short" transfer (that would read as EOF).
  FaultyEngine odd(test::make_inner_engine(EngineKind::psync, 4), {.every = 1, .short_transfer = true});
  EXPECT_EQ(run(odd, 1, IoOp::read, 924)[0], 512);
  // Requests of 512 bytes or less are never shortened.
  FaultyEngine small(test::make_inner_engine(EngineKind::psync, 4), {.every = 1, .short_transfer = true});
  EXPECT_EQ(run(small, 2, IoOp::read, 512)[1], 512);
}

TEST_F(FaultyEngineTest, OnlyOneDirection) {
  FaultyEngine e(test::make_inner_engine(EngineKind::psync, 4),
                 {.every = 1, .error = ENOSPC, .only = IoOp::write});
  for (const auto v : run(e, 3, IoOp::read)) EXPECT_EQ(v, 4096);
  for (const auto v : run(e, 3, IoOp::write)) EXPECT_EQ(v, -ENOSPC);
  EXPECT_EQ(e.injected(), 3U);
}

TEST_F(FaultyEngineTest, Delay) {
  FaultyEngine e(test::make_inner_engine(EngineKind::psync, 4), {.delay = std::chrono::milliseconds(5)});
  const auto t0 = std::chrono::steady_clock::now();
  for (const auto v : run(e, 4, IoOp::read)) EXPECT_EQ(v, 4096);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(20));
  EXPECT_EQ(e.injected(), 0U);
}

TEST_F(FaultyEngineTest, SyntheticAndRealCompletionsTogether) {
  for (const EngineKind kind : {EngineKind::psync, EngineKind::uring}) {
    if (!test::engine_runs_here(to_string(kind))) continue;
    FaultyEngine e(test::make_inner_engine(kind, 8), {.every = 2, .error = EAGAIN});
    std::vector<std::byte> buf(8 * 4096);
    for (unsigned i = 0; i < 8; ++i) {
      e.prepare({.op = IoOp::read, .fd = fd_, .buf = buf.data() + i * 4096, .len = 4096,
                 .offset = i * 4096ULL, .tag = i});
    }
    EXPECT_EQ(e.in_flight(), 8U);
    std::map<std::uint64_t, std::int64_t> got;
    IoCompletion out[3];
    while (got.size() < 8) {
      const std::size_t k = e.submit_and_wait(out, 1);
      ASSERT_GT(k, 0U);
      for (std::size_t i = 0; i < k; ++i) EXPECT_TRUE(got.emplace(out[i].tag, out[i].result).second);
    }
    EXPECT_EQ(e.in_flight(), 0U);
    for (unsigned i = 0; i < 8; ++i) EXPECT_EQ(got.at(i), i % 2 == 1 ? -EAGAIN : 4096) << to_string(kind);
  }
}

}  // namespace
}  // namespace sluice
