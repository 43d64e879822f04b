// The layout of the stats segment (/dev/shm/sluice-stats.<pid>). Readers check magic, version
// and size before trusting the rest; a new field means a new version.
#pragma once

#include <atomic>
#include <cstdint>
#include <type_traits>

#include "sluice/stats.hpp"

namespace sluice::detail {

inline constexpr std::uint64_t stats_magic = 0x5453434955'4c53ULL;  // "SLUICST", little endian

struct SharedCounters {
  std::atomic<std::uint64_t> bytes{0}, ops{0}, ios{0}, errors{0}, nanoseconds{0};
};

struct SharedStats {
  std::uint64_t magic = stats_magic;
  std::uint32_t version = stats_layout_version;
  std::uint32_t size = sizeof(SharedStats);
  std::int32_t pid = 0;
  std::uint32_t reserved = 0;
  std::uint64_t start_unix_ns = 0;
  char command[64] = {};
  std::atomic<std::uint64_t> updated_unix_ns{0};
  SharedCounters paths[path_count][2];
  std::atomic<std::uint64_t> staging_waits{0};
};
static_assert(std::atomic<std::uint64_t>::is_always_lock_free,
              "the segment needs lock-free 64-bit atomics");
static_assert(std::is_standard_layout_v<SharedStats>);

/// Creates this process's segment when SLUICE_STATS=1 (null otherwise, or when it cannot be
/// created: a warning goes to stderr). The segment is removed at exit by this process only.
SharedStats* attach_published_stats() noexcept;

/// Wall-clock now, in nanoseconds since the epoch.
std::uint64_t unix_ns() noexcept;

}  // namespace sluice::detail
