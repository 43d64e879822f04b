// The two futex operations a one-shot completion needs (transfer/transfer_future.cpp). Private
// to the process (FUTEX_PRIVATE_FLAG): the word lives in ordinary process memory.
#pragma once

#include <atomic>
#include <cstdint>

namespace sluice::detail {

/// Sleeps while `*word` == `expected`, at most `timeout_ns` (INT64_MAX: no limit). Returns when
/// woken, when the word differs, on a signal or at the timeout: the caller re-reads the word.
void futex_wait(const std::atomic<std::uint32_t>& word, std::uint32_t expected,
                std::int64_t timeout_ns) noexcept;

/// Wakes every thread sleeping on `word`.
void futex_wake_all(const std::atomic<std::uint32_t>& word) noexcept;

}  // namespace sluice::detail
