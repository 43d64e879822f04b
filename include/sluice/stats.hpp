// Process-wide counters of what the library did: bytes, operations, errors and busy time per
// path and direction. Updated with relaxed atomics at the end of each transfer (not per I/O).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include "sluice/path.hpp"

namespace sluice {

enum class Direction : std::uint8_t { read, write };

struct PathCounters {
  std::uint64_t bytes = 0;
  std::uint64_t ops = 0;      ///< transfers (calls), not individual I/O requests
  std::uint64_t ios = 0;      ///< I/O requests submitted to the engine
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
  void count_staging_wait() noexcept { staging_waits_.fetch_add(1, std::memory_order_relaxed); }
  [[nodiscard]] StatsSnapshot snapshot() const noexcept;
  void reset() noexcept;

 private:
  struct Atomic {
    std::atomic<std::uint64_t> bytes{0}, ops{0}, ios{0}, errors{0}, nanoseconds{0};
  };
  std::array<std::array<Atomic, 2>, path_count> paths_{};
  std::atomic<std::uint64_t> staging_waits_{0};
};

/// The process-wide counters.
Stats& stats() noexcept;

}  // namespace sluice
