// Process-wide counters of what the library did: bytes, operations, errors and busy time per
// path and direction, per device ("host", "sim", "cuda:N") and per file system; GPU transfers
// that could not take the direct path, by reason; and a latency histogram of transfers per path
// and direction. Updated with relaxed atomics at the end of each transfer (not per I/O).
//
// Publishing: a process started with SLUICE_STATS=1 also adds every update of the process-wide
// counters to a shared-memory segment, /dev/shm/sluice-stats.<pid> (a fixed, versioned layout of
// relaxed atomics), created when the library loads and removed at normal exit. Other processes
// read it with read_published() (`sluice stats`). Each path and direction's counters and latency
// histogram are read together between updates (a per-row seqlock that never blocks a writer), so
// a snapshot never shows a transfer without its bytes or its latency; different rows, devices,
// file systems and fallbacks may be from moments a few microseconds apart.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/export.hpp"
#include "sluice/histogram.hpp"
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

/// Why a transfer into or out of device memory did not take the direct (cuFile) path although
/// the configuration allowed it (path auto).
enum class Fallback : std::uint8_t {
  no_cufile,         ///< libcufile.so.0 did not load or cuFileDriverOpen failed
  no_o_direct,       ///< the file system has no O_DIRECT (tmpfs, ...)
  buffer_unaligned,  ///< device buffer not 4 KiB aligned
  offset_unaligned,  ///< file offset not 4 KiB aligned
  size_unaligned,    ///< size not a multiple of 4 KiB
  handle_refused,    ///< cuFileHandleRegister refused the file
  io_refused,        ///< cuFileRead/Write refused the request before moving a byte
};
inline constexpr std::size_t fallback_count = 7;
[[nodiscard]] SLUICE_API std::string_view to_string(Fallback f) noexcept;

/// Counters of one device or file system, [direction].
struct KeyedCounters {
  std::string key;  ///< "host", "sim", "cuda:0"; "ext4", "tmpfs", "block device"; "other"
  std::array<PathCounters, 2> dirs{};
};

struct StatsSnapshot {
  /// [path][direction]
  std::array<std::array<PathCounters, 2>, path_count> paths{};
  std::uint64_t staging_waits = 0;  ///< times a worker waited for a free staging buffer
  /// [Fallback]: transfers that fell back from direct, by reason.
  std::array<std::uint64_t, fallback_count> fallbacks{};
  /// By device, then by file system, in the order first seen. At most 8 of each; later ones
  /// are counted together under "other".
  std::vector<KeyedCounters> devices, filesystems;
  /// [path][direction]: nanoseconds per transfer (values are bucket bounds: within 0.8%).
  std::array<std::array<LatencyHistogram, 2>, path_count> latency{};

  [[nodiscard]] const PathCounters& at(Path p, Direction d) const {
    return paths[static_cast<std::size_t>(p)][static_cast<std::size_t>(d)];
  }
  [[nodiscard]] const LatencyHistogram& latency_of(Path p, Direction d) const {
    return latency[static_cast<std::size_t>(p)][static_cast<std::size_t>(d)];
  }
  [[nodiscard]] std::uint64_t fallbacks_for(Fallback f) const {
    return fallbacks[static_cast<std::size_t>(f)];
  }
};

class SLUICE_API Stats {
 public:
  Stats();
  ~Stats();
  Stats(const Stats&) = delete;
  Stats& operator=(const Stats&) = delete;

  /// One transfer (or its failure) on a path: its bytes, engine I/Os and wall time.
  void record(Path p, Direction d, std::uint64_t bytes, std::uint64_t ios, std::uint64_t ns,
              bool error) noexcept;
  /// The same transfer by where it went: `device` ("host" for host memory) and the file's
  /// file system type. Keys longer than 31 bytes are cut.
  void record_target(std::string_view device, std::string_view fs, Direction d,
                     std::uint64_t bytes, std::uint64_t ios, std::uint64_t ns, bool error) noexcept;
  void count_fallback(Fallback f) noexcept;
  void count_staging_wait() noexcept;
  [[nodiscard]] StatsSnapshot snapshot() const;

 private:
  friend SLUICE_API void reset_stats(Stats& s) noexcept;  // a test hook: sluice/testing/stats.hpp
  std::unique_ptr<detail::SharedStats> local_;
  detail::SharedStats* shared_ = nullptr;  ///< the published segment (process-wide counters only)
  friend SLUICE_API Stats& stats() noexcept;
};

/// The process-wide counters.
SLUICE_API Stats& stats() noexcept;

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
inline constexpr std::uint32_t stats_layout_version = 3;

/// The segment's file: "/dev/shm/sluice-stats.<pid>".
[[nodiscard]] SLUICE_API std::string stats_segment_path(int pid);
/// True when this process publishes its counters (SLUICE_STATS=1 when the library loaded).
[[nodiscard]] SLUICE_API bool stats_published() noexcept;
/// Reads the counters process `pid` publishes; nullopt with `error` set when there is no
/// segment, or it has another layout version.
[[nodiscard]] SLUICE_API std::optional<PublishedStats> read_published(int pid,
                                                                      std::string* error = nullptr);
/// Every segment under /dev/shm, by pid; `alive` tells the running from the stale (a process
/// that died without removing its segment).
[[nodiscard]] SLUICE_API std::vector<PublishedStats> list_published();
/// The counters in the Prometheus text exposition format (version 0.0.4), labelled by pid,
/// path and direction (device, filesystem, reason where they apply); latencies as summaries.
[[nodiscard]] SLUICE_API std::string to_prometheus(const std::vector<PublishedStats>& stats);

}  // namespace sluice
