// Process-wide counters of what the library did: bytes, operations, errors and busy time per
// path and direction. Updated with relaxed atomics at the end of each transfer (not per I/O).
//
// Publishing: a process started with SLUICE_STATS=1 also adds every update of the process-wide
// counters to a shared-memory segment, /dev/shm/sluice-stats.<pid> (a fixed, versioned layout of
// relaxed atomics), created when the library loads and removed at normal exit. Other processes
// read it with read_published() (`sluice stats`). Each counter is exact; a snapshot taken while
// transfers finish may pair a counter with another from a moment earlier.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sluice/path.hpp"

namespace sluice {

namespace detail {
struct SharedStats;
}

enum class Direction : std::uint8_t { read, write };

struct PathCounters {
  std::uint64_t bytes = 0;
  std::uint64_t ops = 0;  ///< transfers (calls), not individual I/O requests
  std::uint64_t ios = 0;  ///< I/O requests submitted to the engine
  std::uint64_t errors = 0;
  std::uint64_t nanoseconds = 0;  ///< summed wall time of the transfers
};

struct StatsSnapshot {
  /// [path][direction]
  std::array<std::array<PathCounters, 2>, path_count> paths{};
  std::uint64_t staging_waits = 0;  ///< times a worker waited for a free staging buffer

  [[nodiscard]] const PathCounters& at(Path p, Direction d) const {
    return paths[static_cast<std::size_t>(p)][static_cast<std::size_t>(d)];
  }
};

class Stats {
 public:
  void record(Path p, Direction d, std::uint64_t bytes, std::uint64_t ios, std::uint64_t ns,
              bool error) noexcept;
  void count_staging_wait() noexcept;
  [[nodiscard]] StatsSnapshot snapshot() const noexcept;
  void reset() noexcept;

 private:
  struct Atomic {
    std::atomic<std::uint64_t> bytes{0}, ops{0}, ios{0}, errors{0}, nanoseconds{0};
  };
  std::array<std::array<Atomic, 2>, path_count> paths_{};
  std::atomic<std::uint64_t> staging_waits_{0};
  detail::SharedStats* shared_ = nullptr;  ///< the published segment (process-wide counters only)
  friend Stats& stats() noexcept;
};

/// The process-wide counters.
Stats& stats() noexcept;

/// The counters another process (or this one) publishes.
struct PublishedStats {
  int pid = 0;
  bool alive = false;                 ///< the process still runs
  std::string command;                ///< its command name (/proc/<pid>/comm at start)
  std::uint64_t start_unix_ns = 0;    ///< when publishing began
  std::uint64_t updated_unix_ns = 0;  ///< the last update (0: none yet)
  StatsSnapshot snapshot;
};

/// Layout version of the segment; readers refuse another.
inline constexpr std::uint32_t stats_layout_version = 1;

/// The segment's file: "/dev/shm/sluice-stats.<pid>".
[[nodiscard]] std::string stats_segment_path(int pid);
/// True when this process publishes its counters (SLUICE_STATS=1 when the library loaded).
[[nodiscard]] bool stats_published() noexcept;
/// Reads the counters process `pid` publishes; nullopt with `error` set when there is no
/// segment, or it has another layout version.
[[nodiscard]] std::optional<PublishedStats> read_published(int pid, std::string* error = nullptr);
/// Every segment under /dev/shm, by pid; `alive` tells the running from the stale (a process
/// that died without removing its segment).
[[nodiscard]] std::vector<PublishedStats> list_published();
/// The counters in the Prometheus text exposition format (version 0.0.4), labelled by pid,
/// path and direction.
[[nodiscard]] std::string to_prometheus(const std::vector<PublishedStats>& stats);

}  // namespace sluice
