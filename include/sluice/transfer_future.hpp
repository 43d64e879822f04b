// The result of an asynchronous transfer (read_async, write_async, submit_batch, the
// stream-ordered forms), delivered once. It is used as std::future<TransferResult> is (get, wait,
// wait_for, wait_until, valid; a default-constructed one is not valid; moving only) and adds
// ready(), which never blocks. Why not std::future: libstdc++ sets a promise's value through
// pthread_once, whose slow path makes a futex system call every time, whether or not anyone
// waits; at hundreds of thousands of small reads a second that call was a tenth of the async I/O
// thread's work (docs/tuning.md, "The library path"). This one enters the kernel to wake a thread
// only when a thread is waiting, and costs one allocation.
#pragma once

#include <chrono>
#include <cstdint>
#include <future>

#include "sluice/export.hpp"
#include "sluice/transfer_result.hpp"

namespace sluice {

namespace detail {
class TransferState;
}  // namespace detail

class SLUICE_API TransferFuture {
 public:
  TransferFuture() noexcept = default;
  TransferFuture(TransferFuture&& other) noexcept : state_(other.state_) { other.state_ = nullptr; }
  TransferFuture& operator=(TransferFuture&& other) noexcept;
  TransferFuture(const TransferFuture&) = delete;
  TransferFuture& operator=(const TransferFuture&) = delete;
  /// Does not wait: dropping the future leaves the transfer running (its buffer must stay valid
  /// until it has finished, which only a future can tell).
  ~TransferFuture();

  /// Whether it refers to a transfer (false after get(), after a move from it, and by default).
  [[nodiscard]] bool valid() const noexcept { return state_ != nullptr; }
  /// Whether the result is there (get() will not block). Throws std::future_error (no_state) when
  /// not valid, as do the waits and get().
  [[nodiscard]] bool ready() const;
  /// Blocks until the result is there.
  void wait() const;
  /// Blocks until the result is there or `timeout` has passed: ready or timeout (never deferred).
  template <class Rep, class Period>
  std::future_status wait_for(const std::chrono::duration<Rep, Period>& timeout) const {
    using std::chrono::nanoseconds;
    if (timeout <= timeout.zero()) return wait_ns(0);
    // A timeout of 30 years or more (duration::max() included) is no limit.
    if (std::chrono::duration<double>(timeout).count() >= 1e9) return wait_ns(INT64_MAX);
    return wait_ns(std::chrono::ceil<nanoseconds>(timeout).count());
  }
  /// Blocks until the result is there or `deadline` (on any clock) has passed.
  template <class Clock, class Duration>
  std::future_status wait_until(const std::chrono::time_point<Clock, Duration>& deadline) const {
    for (;;) {
      const auto left = deadline - Clock::now();
      if (left <= left.zero()) return wait_ns(0);
      if (wait_for(left) == std::future_status::ready) return std::future_status::ready;
    }
  }
  /// Waits, then returns the result or throws the transfer's error; the future is then not valid.
  TransferResult get();

 private:
  friend class detail::TransferState;
  explicit TransferFuture(detail::TransferState* state) noexcept : state_(state) {}
  // Waits up to `ns` nanoseconds (0: does not block; INT64_MAX: no limit).
  std::future_status wait_ns(std::int64_t ns) const;

  detail::TransferState* state_ = nullptr;
};

}  // namespace sluice
