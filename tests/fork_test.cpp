// A process that used the library and then forked (PyTorch's DataLoader workers and
// multiprocessing start that way on Linux) reads through the library in the child as well:
// synchronously on the forking thread, with read_async on the async I/O thread and with reads the
// pool finishes. Before, the child's copy of the forking thread's io_uring was its parent's (the
// kernel answered EEXIST: the ring's single issuer is the parent's task), and its async I/O
// thread and pool workers did not exist, so a read_async in the child never completed.
// Devices: a CUDA context does not survive fork() (CUDA's rule), nor do the sim device's
// stream threads, so open_device() in the child opens the child's own.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "sluice/device.hpp"
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

  // Into device memory of `dev`: 16 small read_async (the async I/O thread's pinned slots) and
  // one synchronous read of 256 KiB (the pool's bounce pipeline).
  [[nodiscard]] std::string device_reads(const std::shared_ptr<Device>& dev, const char* who) const {
    TransferOptions o = opts_;
    o.device = dev;
    o.path = Path::bounce;
    constexpr std::uint64_t big = 64 * block;
    auto* mem = static_cast<std::byte*>(dev->alloc(16 * block + big));
    std::vector<TransferFuture> futs;
    for (std::uint64_t i = 0; i < 16; ++i) futs.push_back(read_async(file_, mem + i * block, block, i * 3 % blocks * block, o));
    std::string why;
    try {
      const TransferResult r = read(file_, mem + 16 * block, big, 0, o);
      if (r.bytes != big) why = fmt::format("{}: the device read got {} bytes ({})", who, r.bytes, r.reason);
      for (std::size_t i = 0; i < futs.size() && why.empty(); ++i) {
        if (futs[i].wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
          why = fmt::format("{}: device read {} did not complete in 20 s", who, i);
        } else if (const TransferResult a = futs[i].get(); a.reason.find("async I/O thread") == std::string::npos) {
          why = fmt::format("{}: device read {} did not take the async I/O thread: {}", who, i, a.reason);
        }
      }
      std::vector<std::byte> host(16 * block + big);
      if (why.empty()) dev->copy_to_host(host.data(), mem, host.size());
      for (std::uint64_t i = 0; i < 16 && why.empty(); ++i) {
        if (!test::same_bytes(std::span(host).subspan(i * block, block), want(i * 3 % blocks * block, block))) {
          why = fmt::format("{}: device read {} has the wrong bytes", who, i);
        }
      }
      if (why.empty() && !test::same_bytes(std::span(host).subspan(16 * block, big), want(0, big))) {
        why = fmt::format("{}: the device read has the wrong bytes", who);
      }
    } catch (const std::exception& e) {
      why = fmt::format("{}: {}", who, e.what());
    }
    dev->free(mem);
    return why;
  }

  // Forks a child that runs `body` (and, with `depth` > 1, forks its own child first); "" when
  // it exited 0, else how it ended.
  [[nodiscard]] std::string child_runs(const std::function<std::string(const char*)>& body, int depth) const {
    const pid_t pid = ::fork();
    if (pid < 0) return "fork failed";
    if (pid == 0) {
      ::alarm(60);  // a hang ends the child (SIGALRM) instead of the test run
      const char* who = depth > 1 ? "child" : "grandchild";
      std::string why;
      try {
        why = body(who);
        if (why.empty() && depth > 1) why = child_runs(body, depth - 1);
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
  EXPECT_EQ(child_runs([this](const char* who) { return read_everything(who); }, 2), "");
  EXPECT_EQ(read_everything("parent, after the fork"), "");
}

// A device opened before the fork is the parent's (the sim's stream threads, a CUDA context):
// open_device() in the child opens one of the child's own, which reads as the parent's does.
TEST_F(Fork, AChildOpensADeviceOfItsOwn) {
  const std::shared_ptr<Device> parent = open_device("sim");
  ASSERT_EQ(device_reads(parent, "parent"), "");
  EXPECT_EQ(child_runs(
                [&parent, this](const char* who) {
                  const std::shared_ptr<Device> mine = open_device("sim");
                  if (mine == parent) return fmt::format("{}: open_device gave the parent's device", who);
                  return device_reads(mine, who);
                },
                2),
            "");
  EXPECT_EQ(device_reads(parent, "parent, after the fork"), "");
}

}  // namespace
}  // namespace sluice
