// Helpers shared by the test programs: temporary folders on the two kinds of filesystem the
// conformance suite runs on, guarded aligned buffers, deterministic random data, reference
// reads with plain pread, and engine-factory interposition that always restores the default.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/config.hpp"
#include "sluice/error.hpp"
#include "sluice/file.hpp"
#include "sluice/io_engine.hpp"
#include "sluice/testing/engine_factory.hpp"
#include "sluice/transfer.hpp"

namespace sluice::test {

/// A file descriptor closed on destruction (negative: none, as open(2) failed).
struct ScopedFd {
  int fd;
  explicit ScopedFd(int f) : fd(f) {}
  ~ScopedFd();
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
};

/// A fresh folder (mkdtemp) under `parent`, removed with everything in it on destruction.
class TempDir {
 public:
  explicit TempDir(const std::string& parent, std::string_view prefix = "sluice-test-");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  [[nodiscard]] const std::string& path() const noexcept { return path_; }
  [[nodiscard]] std::string file(std::string_view name) const;

 private:
  std::string path_;
};

/// The filesystems the conformance suite covers. `disk` is a disk-backed folder (ext4 on most
/// machines; SLUICE_TEST_DISK_DIR overrides /var/tmp), `tmpfs` is memory-backed
/// (SLUICE_TEST_TMPFS_DIR overrides /dev/shm).
enum class Folder : std::uint8_t { disk, tmpfs };
[[nodiscard]] std::string_view to_string(Folder f) noexcept;
/// The parent folder for `f`, or nullopt with `why` filled when this machine has none.
[[nodiscard]] std::optional<std::string> folder_root(Folder f, std::string* why = nullptr);

/// `size` bytes at `shift` bytes past a 4096-aligned allocation, with guard bytes on both sides
/// filled with a pattern, so a transfer that writes outside its buffer is caught.
class GuardedBuffer {
 public:
  static constexpr std::size_t guard = 4096;
  static constexpr std::byte pattern{0xA5};

  explicit GuardedBuffer(std::size_t size, std::size_t shift = 0);
  ~GuardedBuffer();
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;

  [[nodiscard]] std::byte* data() noexcept { return data_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] std::span<std::byte> span() noexcept { return {data_, size_}; }
  [[nodiscard]] std::span<const std::byte> first(std::size_t n) const noexcept { return {data_, n}; }
  /// Fills the buffer itself with `b`.
  void fill(std::byte b) noexcept;
  /// Whether the bytes before and after the buffer still hold the pattern.
  [[nodiscard]] ::testing::AssertionResult guards_intact() const;

 private:
  std::byte* base_ = nullptr;
  std::size_t total_ = 0;
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

/// The seed of a test's random data: SLUICE_TEST_SEED when set, else `fallback`.
[[nodiscard]] std::uint64_t test_seed(std::uint64_t fallback);
[[nodiscard]] std::vector<std::byte> random_bytes(std::size_t n, std::uint64_t seed);

/// Plain POSIX file access, the reference the library is checked against.
void write_file(const std::string& path, std::span<const std::byte> data);
void pwrite_file(const std::string& path, std::span<const std::byte> data, std::uint64_t offset);
/// Up to `size` bytes at `offset` with pread (fewer at the end of the file).
[[nodiscard]] std::vector<std::byte> pread_file(const std::string& path, std::uint64_t offset,
                                                std::uint64_t size);
[[nodiscard]] std::vector<std::byte> read_whole(const std::string& path);
[[nodiscard]] std::uint64_t file_size(const std::string& path);
[[nodiscard]] std::string read_text(const std::string& path);
/// The first non-empty line of a file (say a command's captured stderr), or "" when none.
[[nodiscard]] std::string first_line(const std::string& path);

/// Equal bytes, or a message naming the first difference and both lengths.
[[nodiscard]] ::testing::AssertionResult same_bytes(std::span<const std::byte> got,
                                                    std::span<const std::byte> want);

/// A configuration for one transfer: the shape knobs the suites vary.
struct Shape {
  std::string name{};
  std::uint64_t io_size = 1 << 20;
  unsigned threads = 1;
  unsigned queue_depth = 16;
  bool direct_io = true;
  /// Test files are read right after they are written, from the page cache: bypass keeps a
  /// shape on the O_DIRECT code it is meant to cover; auto shapes cover the residency choice.
  std::string cache_policy = "bypass";
};
[[nodiscard]] std::shared_ptr<const Config> make_config(std::string_view engine, const Shape& s);
[[nodiscard]] TransferOptions options_for(std::shared_ptr<const Config> cfg);

/// Engine names the suites run, in order; "uring" only where io_uring works (else the uring
/// tests skip).
[[nodiscard]] bool engine_usable(std::string_view engine, std::string* why = nullptr);
/// engine_usable() for one pass of a loop over engines: when `engine` cannot run here, says so
/// through skip_part() (a failure under strict mode) and returns false.
[[nodiscard]] bool engine_runs_here(std::string_view engine);

/// A file of random bytes in a disk folder, open read-write, for the suites of io_uring and
/// O_DIRECT: the async I/O thread, fork().
struct DirectFile {
  std::unique_ptr<TempDir> dir;
  std::string path;
  std::vector<std::byte> data;
  File file;
};
/// `size` bytes from `seed` in a file `name`; nullopt with `why` when this machine has no
/// io_uring, no disk folder or no O_DIRECT there (the suite then skips).
[[nodiscard]] std::optional<DirectFile> direct_file(std::string_view name, std::size_t size, std::uint64_t seed,
                                                    std::string* why);

/// An engine made directly, without going through the engine factory (so a factory can wrap
/// one without calling itself).
[[nodiscard]] std::unique_ptr<IoEngine> make_inner_engine(EngineKind kind, unsigned depth);

/// Installs an engine factory for the lifetime of the object; the default comes back after.
class ScopedEngineFactory {
 public:
  explicit ScopedEngineFactory(EngineFactory f) { set_engine_factory(std::move(f)); }
  ~ScopedEngineFactory() { set_engine_factory({}); }
  ScopedEngineFactory(const ScopedEngineFactory&) = delete;
  ScopedEngineFactory& operator=(const ScopedEngineFactory&) = delete;
};

/// Sets (or unsets, with nullopt) an environment variable, restoring it on destruction.
class ScopedEnv {
 public:
  ScopedEnv(std::string name, std::optional<std::string> value);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

/// Strict mode, SLUICE_TEST_STRICT=1 (.ci/run sets it): what `make deps` installs and what the
/// CI machine provides (loop devices, io_uring, MPI, NumPy, Chromium) must be there, so a test
/// that would skip for want of it, or because a set-up step failed, fails instead, naming what is
/// missing. Skips that stay legitimate everywhere (no GPU, not root, a fake's mode) stay skips.
[[nodiscard]] bool strict_mode();
/// The failure message of strict mode for `what` (what is missing or which step failed).
[[nodiscard]] std::string strict_failure(std::string_view what);
/// A part of a test that cannot run here (say io_uring in a loop over engines): a test failure
/// under strict mode, else the line "SLUICE_PART_SKIPPED: <what>", which the skip list printed at
/// the end of `make test` (tests/list-skips.sh) shows along with the skipped tests.
void skip_part(std::string_view what);

/// Whether `cmd` is found on PATH (or in /sbin, /usr/sbin).
[[nodiscard]] bool have_program(std::string_view cmd);

/// Runs a shell command, returning its exit status (or -1 when it did not exit normally).
int shell(const std::string& cmd);
/// Single-quotes `s` for /bin/sh.
[[nodiscard]] std::string shell_quote(std::string_view s);

/// A finished command: exit status (-1: it did not exit normally) and what it printed.
struct CliRun {
  int rc = -1;
  std::string out;
  std::string err;
};
/// Runs `prefix program args <stdin_path`, with stdout and stderr captured through files in
/// `scratch_dir`. `args` and `prefix` (say "env A=1") are already quoted for the shell.
CliRun run_captured(const std::string& program, const std::string& args, const std::string& scratch_dir,
                    const std::string& prefix = "", const std::string& stdin_path = "/dev/null");

/// Unsets SLUICE_CONFIG and every SLUICE_* setting for its lifetime, so a test's child processes
/// see defaults whatever the caller's environment holds.
class CleanSluiceEnv {
 public:
  CleanSluiceEnv();

 private:
  std::vector<std::unique_ptr<ScopedEnv>> env_;
};

/// The sluice::Error that `fn` throws; records a test failure (and returns nullopt) when it
/// throws none.
template <typename Fn>
std::optional<Error> error_of(Fn fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no Error thrown";
  return std::nullopt;
}

/// An engine that passes every call to `inner`: test decorators override only what they change.
class ForwardingEngine : public IoEngine {
 public:
  explicit ForwardingEngine(std::unique_ptr<IoEngine> inner) : inner_(std::move(inner)) {}
  [[nodiscard]] EngineKind kind() const noexcept override { return inner_->kind(); }
  [[nodiscard]] unsigned capacity() const noexcept override { return inner_->capacity(); }
  [[nodiscard]] unsigned in_flight() const noexcept override { return inner_->in_flight(); }
  void prepare(const IoRequest& req) override { inner_->prepare(req); }
  std::size_t submit_and_wait(std::span<IoCompletion> out, std::size_t min_complete) override {
    return inner_->submit_and_wait(out, min_complete);
  }
  bool register_buffers(std::span<const iovec> b) override { return inner_->register_buffers(b); }
  void unregister_buffers() override { inner_->unregister_buffers(); }
  int register_file(int fd) override { return inner_->register_file(fd); }
  void unregister_file(int slot) override { inner_->unregister_file(slot); }

 protected:
  std::unique_ptr<IoEngine> inner_;
};

}  // namespace sluice::test

/// GTEST_SKIP() with `what` (a string: what is missing or which set-up step failed), or, under
/// SLUICE_TEST_STRICT=1, a fatal failure saying so. For a test body or SetUp(), as GTEST_SKIP.
#define SLUICE_SKIP_OR_FAIL(what)                                                  \
  do {                                                                             \
    const std::string sluice_skip_what_ = (what);                                  \
    if (::sluice::test::strict_mode()) {                                           \
      GTEST_FAIL() << ::sluice::test::strict_failure(sluice_skip_what_);           \
    }                                                                              \
    GTEST_SKIP() << sluice_skip_what_;                                             \
  } while (false)
