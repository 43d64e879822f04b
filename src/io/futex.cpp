#include "io/futex.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <ctime>

namespace sluice::detail {
namespace {

// std::atomic<std::uint32_t> is the futex word itself: no lock, the integer's size and layout.
static_assert(std::atomic<std::uint32_t>::is_always_lock_free);
static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));

auto* address(const std::atomic<std::uint32_t>& word) noexcept {
  return const_cast<std::uint32_t*>(reinterpret_cast<const volatile std::uint32_t*>(&word));
}

}  // namespace

void futex_wait(const std::atomic<std::uint32_t>& word, std::uint32_t expected,
                std::int64_t timeout_ns) noexcept {
  timespec ts{};
  const timespec* limit = nullptr;  // FUTEX_WAIT's timeout is relative, on CLOCK_MONOTONIC
  if (timeout_ns != INT64_MAX) {
    ts.tv_sec = static_cast<time_t>(timeout_ns / 1'000'000'000);
    ts.tv_nsec = static_cast<long>(timeout_ns % 1'000'000'000);
    limit = &ts;
  }
  // EAGAIN (the word changed), EINTR and ETIMEDOUT all mean: look at the word again.
  (void)::syscall(SYS_futex, address(word), FUTEX_WAIT_PRIVATE, expected, limit, nullptr, 0);
}

void futex_wake_all(const std::atomic<std::uint32_t>& word) noexcept {
  (void)::syscall(SYS_futex, address(word), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace sluice::detail
