// A process that used the library and then forked (PyTorch's DataLoader workers and
// multiprocessing start that way on Linux) reads through the library in the child as well:
// synchronously on the forking thread, with read_async on the async I/O thread and with reads the
// pool finishes. Before, the child's copy of the forking thread's io_uring was its parent's (the
// kernel answered EEXIST: the ring's single issuer is the parent's task), and its async I/O
// thread and pool workers did not exist, so a read_async in the child never completed.
// Host memory only: a CUDA context does not survive fork() (CUDA's rule), nor do the sim
// device's stream threads.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "sluice/file.hpp"
#include "sluice/transfer.hpp"
#include "support/test_util.hpp"

namespace sluice {
namespace {

constexpr std::uint64_t block = 4096;
constexpr std::uint64_t blocks = 64;

class Fork : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    auto f = test::direct_file("fork.bin", blocks * block, 51, &why);
    if (!f) GTEST_SKIP() << why;
    dir_ = std::move(f->dir);
    data_ = std::move(f->data);
    file_ = std::move(f->file);
    // bypass: the file was just written; under auto its cached pages would be read on the pool
    // only.
    opts_ = test::options_for(test::make_config("uring", {}));
  }

  // What one process reads: a synchronous read on this thread, read_async requests the async
  // I/O thread takes, a submit_batch, and an unaligned read_async the pool serves. "" when every
  // byte and reason is right, else what was wrong (the child has no gtest to report to).
  [[nodiscard]] std::string read_everything(const char* who) const {
    test::GuardedBuffer sync_buf(16 * block);
    const TransferResult s = read(file_, sync_buf.data(), 16 * block, 4 * block, opts_);
    if (s.bytes != 16 * block ||
        !test::same_bytes(sync_buf.first(16 * block), want(4 * block, 16 * block))) {
      return fmt::format("{}: the synchronous read got {} bytes or the wrong ones ({})", who,
                         s.bytes, s.reason);
    }
    std::vector<std::unique_ptr<test::GuardedBuffer>> bufs;
    std::vector<TransferFuture> futs;
    std::vector<std::uint64_t> offsets;
    for (std::uint64_t i = 0; i < 16; ++i) {
      bufs.push_back(std::make_unique<test::GuardedBuffer>(block));
      offsets.push_back(i * 3 % blocks * block);
      futs.push_back(read_async(file_, bufs.back()->data(), block, offsets.back(), opts_));
    }
    std::vector<BatchEntry> batch;
    for (std::uint64_t i = 0; i < 8; ++i) {
      bufs.push_back(std::make_unique<test::GuardedBuffer>(block));
      offsets.push_back(i * 5 % blocks * block);
      batch.push_back({IoOp::read, &file_, bufs.back()->data(), block, offsets.back()});
    }
    for (auto& f : submit_batch(batch, opts_)) futs.push_back(std::move(f));
    bufs.push_back(std::make_unique<test::GuardedBuffer>(block + 100));
    offsets.push_back(7);  // unaligned: the pool's synchronous path
    futs.push_back(read_async(file_, bufs.back()->data(), block + 100, 7, opts_));
    for (std::size_t i = 0; i < futs.size(); ++i) {
      if (futs[i].wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
        return fmt::format("{}: asynchronous read {} did not complete in 20 s", who, i);
      }
      const TransferResult r = futs[i].get();
      const std::uint64_t n = bufs[i]->size();
      if (r.bytes != n || !test::same_bytes(bufs[i]->first(n), want(offsets[i], n))) {
        return fmt::format("{}: asynchronous read {} got {} bytes or the wrong ones ({})", who, i,
                           r.bytes, r.reason);
      }
      const bool pool = offsets[i] == 7;
      if (pool == (r.reason == "O_DIRECT; async I/O thread")) {
        return fmt::format("{}: asynchronous read {} took the wrong way: {}", who, i, r.reason);
      }
    }
    return {};
  }

  [[nodiscard]] std::span<const std::byte> want(std::uint64_t offset, std::uint64_t n) const {
    return std::span(data_).subspan(offset, n);
  }

  // Forks a child that runs read_everything (and, with `depth` > 1, forks its own child first);
  // "" when it exited 0, else how it ended.
  [[nodiscard]] std::string child_reads(int depth) const {
    const pid_t pid = ::fork();
    if (pid < 0) return "fork failed";
    if (pid == 0) {
      ::alarm(60);  // a hang ends the child (SIGALRM) instead of the test run
      const char* who = depth > 1 ? "child" : "grandchild";
      std::string why;
      try {
        why = read_everything(who);
        if (why.empty() && depth > 1) why = child_reads(depth - 1);
      } catch (const std::exception& e) {  // never back into gtest, which belongs to the parent
        why = fmt::format("{}: {}", who, e.what());
      }
      if (!why.empty()) std::fprintf(stderr, "%s\n", why.c_str());
      std::_Exit(why.empty() ? 0 : 1);
    }
    int status = 0;
    if (::waitpid(pid, &status, 0) != pid) return "waitpid failed";
    if (WIFSIGNALED(status)) {
      return fmt::format("the child was killed by signal {}{}", WTERMSIG(status),
                         WTERMSIG(status) == SIGALRM ? " (it hung)" : "");
    }
    return WEXITSTATUS(status) == 0 ? "" : "the child's reads failed (its message is above)";
  }

  std::unique_ptr<test::TempDir> dir_;
  std::vector<std::byte> data_;
  File file_;
  TransferOptions opts_;
};

// The parent has read (this thread's ring, the async I/O thread and the pool exist), then forks
// a child, which forks a grandchild: each reads everything; the parent still does afterwards.
TEST_F(Fork, AChildReadsAfterItsParentDid) {
  ASSERT_EQ(read_everything("parent"), "");
  EXPECT_EQ(child_reads(2), "");
  EXPECT_EQ(read_everything("parent, after the fork"), "");
}

}  // namespace
}  // namespace sluice
