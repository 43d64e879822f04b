// The seam between Sluice and the kernel's I/O interfaces. An engine belongs to the thread that
// created it (only wake() may be called from others: io_uring rings are set up single-issuer).
// Contract (exactly once): every request given to prepare() produces exactly one completion from
// a later submit_and_wait(), carrying its tag and either the byte count or a negative errno;
// submission failures are reported as completions, never lost.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "sluice/config.hpp"
#include "sluice/export.hpp"

namespace sluice {

enum class IoOp : std::uint8_t { read, write };

struct IoRequest {
  IoOp op = IoOp::read;
  int fd = -1;               ///< a descriptor, or a registered slot when `fixed_file`
  void* buf = nullptr;
  std::uint32_t len = 0;
  std::uint64_t offset = 0;
  std::uint64_t tag = 0;     ///< handed back in the completion
  int buf_index = -1;        ///< registered buffer holding `buf`, or -1
  bool fixed_file = false;   ///< `fd` is a slot from register_file()
  /// Reads only: take the bytes only from the page cache and start no I/O (preadv2's
  /// RWF_NOWAIT): -EAGAIN, or fewer bytes, where a page of the range is not there. Where the
  /// filesystem cannot say (no FMODE_NOWAIT), -EOPNOTSUPP.
  bool cached_only = false;
};

struct IoCompletion {
  std::uint64_t tag = 0;
  std::int64_t result = 0;   ///< bytes transferred, or -errno
};

enum class EngineKind : std::uint8_t { uring, psync };

[[nodiscard]] SLUICE_API std::string_view to_string(EngineKind k) noexcept;

class SLUICE_API IoEngine {
 public:
  virtual ~IoEngine() = default;
  [[nodiscard]] virtual EngineKind kind() const noexcept = 0;
  [[nodiscard]] virtual std::string_view name() const noexcept = 0;
  /// Most requests that may be in flight (prepared and not yet completed).
  [[nodiscard]] virtual unsigned capacity() const noexcept = 0;
  [[nodiscard]] virtual unsigned in_flight() const noexcept = 0;
  /// Queues one request. Requires in_flight() < capacity().
  virtual void prepare(const IoRequest& req) = 0;
  /// Submits what is queued and waits until at least `min_complete` completions are ready
  /// (fewer only if fewer are in flight); returns how many were written to `out`.
  virtual std::size_t submit_and_wait(std::span<IoCompletion> out, std::size_t min_complete) = 0;
  /// Registers buffers for fixed I/O; returns false where unsupported (callers then pass -1).
  virtual bool register_buffers(std::span<const iovec> buffers) { (void)buffers; return false; }
  virtual void unregister_buffers() {}
  /// Registers `fd` in a slot for fixed-file I/O; returns the slot or -1 when unsupported/full.
  virtual int register_file(int fd) { (void)fd; return -1; }
  virtual void unregister_file(int slot) { (void)slot; }
  /// Lets other threads end this engine's waits: after it returns true, wake() makes a
  /// submit_and_wait() that is blocked (or the next one to block) return early, possibly with no
  /// completions. Call from the owning thread. False where waits end only with completions.
  virtual bool enable_wake() { return false; }
  /// Thread-safe; only after enable_wake() returned true.
  virtual void wake() noexcept {}
  /// Does one request on the calling thread and returns what its completion would carry (bytes,
  /// or -errno). Requires in_flight() == 0. This default queues it and waits for it, so a
  /// decorator (FaultyEngine) sees it like any other request; the kernel engines make one
  /// preadv2/pwritev2 call instead, which for a read the page cache serves costs less than a
  /// ring's round trip (a small read from Python: one syscall, not an io_uring_enter).
  virtual std::int64_t transfer_now(const IoRequest& req);

  /// Registers a caller's buffer set once per engine: a no-op when the set with this `id` is
  /// already registered. Returns whether fixed I/O may be used for it.
  bool ensure_buffers(std::uint64_t id, std::span<const iovec> buffers) {
    if (id != registered_set_) {
      registered_set_ = register_buffers(buffers) ? id : 0;
      registered_ok_ = registered_set_ == id;
    }
    return registered_ok_;
  }

 private:
  std::uint64_t registered_set_ = 0;
  bool registered_ok_ = false;
};

/// Creates an engine of `kind` with room for `depth` requests in flight. Throws an Error with
/// the kernel's reason if io_uring cannot be set up.
[[nodiscard]] SLUICE_API std::unique_ptr<IoEngine> make_engine(EngineKind kind, unsigned depth);

/// The engine a setting stands for: auto is uring when this process can set up a ring, else
/// psync. Throws an Error (ENOSYS, with the kernel's reason) when uring is asked for and unusable.
[[nodiscard]] SLUICE_API EngineKind resolve_engine(EngineSetting setting);

/// Whether io_uring works here; the reason when it does not (seccomp, kernel, sysctl).
[[nodiscard]] SLUICE_API bool uring_available(std::string* reason = nullptr);

/// How many times the library resubmits one request that completed with EINTR or EAGAIN (a
/// signal, or a full device queue) before reporting the error: the engines' callers share it.
inline constexpr unsigned max_transient_retries = 64;

/// The calling thread's engine of `kind` and at least `depth` capacity, created on first use.
SLUICE_API IoEngine& thread_engine(EngineKind kind, unsigned depth);

}  // namespace sluice
