// The layout of the stats counters: the same struct is the process's own counters and the
// published segment (/dev/shm/sluice-stats.<pid>), so recording and reading have one
// implementation. Readers check magic, version and size before trusting the rest; a new field
// means a new version.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string_view>
#include <type_traits>

#include "sluice/stats.hpp"

namespace sluice::detail {

inline constexpr std::uint64_t stats_magic = 0x5453434955'4c53ULL;  // "SLUICST", little endian
inline constexpr std::size_t keyed_slots = 8;  // the last one is "other"
inline constexpr std::size_t key_bytes = 32;

struct SharedCounters {
  std::atomic<std::uint64_t> bytes{0}, ops{0}, ios{0}, errors{0}, nanoseconds{0};
};

// A device or file system's counters. `state` 0: free, 1: being claimed, 2: key written.
struct SharedKeyed {
  std::atomic<std::uint32_t> state{0};
  char key[key_bytes] = {};
  SharedCounters dirs[2];
};

struct SharedLatency {
  std::atomic<std::uint64_t> buckets[LatencyHistogram::bucket_count];
};

// A path row's update counts, a seqlock for any number of writers: an update adds to `begun`,
// then to the row's counters and latency bucket, then to `ended`. A reader that loads `ended`,
// then the row, then `begun`, and finds the two equal read the row with no update in flight, so
// every transfer it counts has its bytes and its latency (never one without the other).
// [first_bucket, end_bucket) holds every non-empty latency bucket, so a reader loads a few
// hundred buckets, not all 4,992, and its window between two updates stays short.
struct SharedSeq {
  std::atomic<std::uint64_t> begun{0}, ended{0};
  std::atomic<std::uint32_t> first_bucket{LatencyHistogram::bucket_count}, end_bucket{0};
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
  std::atomic<std::uint64_t> fallbacks[fallback_count] = {};
  SharedKeyed devices[keyed_slots];
  SharedKeyed filesystems[keyed_slots];
  SharedLatency latency[path_count][2] = {};
  SharedSeq seq[path_count][2];
};
static_assert(std::atomic<std::uint64_t>::is_always_lock_free,
              "the segment needs lock-free 64-bit atomics");
static_assert(std::is_standard_layout_v<SharedStats>);

void add_path(SharedStats& s, Path p, Direction d, std::uint64_t bytes, std::uint64_t ios,
              std::uint64_t ns, bool error) noexcept;
void add_target(SharedStats& s, std::string_view device, std::string_view fs, Direction d,
                std::uint64_t bytes, std::uint64_t ios, std::uint64_t ns, bool error) noexcept;
/// Every counter of `s`. Each path row (counters and latency of one path and direction) is read
/// whole between updates, waiting out an update in flight; rows, keyed counters and fallbacks are
/// read one after another. `give_up` (asked now and then while a row waits) says the writer will
/// never finish its update (its process died): the row is then read as it stands.
StatsSnapshot load(const SharedStats& s, const std::function<bool()>& give_up = {});
void zero(SharedStats& s) noexcept;

/// Creates this process's segment when SLUICE_STATS=1 (null otherwise, or when it cannot be
/// created: a warning goes to stderr). The segment is removed at exit by this process only.
SharedStats* attach_published_stats() noexcept;

/// Wall-clock now, in nanoseconds since the epoch.
std::uint64_t unix_ns() noexcept;

}  // namespace sluice::detail
