// Inside the benchmark runner: what one benchmark thread is given (its file region, device and
// the run's shared stop/progress state) and what it hands back. Two kinds of thread exist:
// engine threads (cpu-only: the thread's own IoEngine with `iodepth` requests in flight, the
// same shape as fio's io_uring engine) and library threads (every GPU type, and cpu-only with
// unaligned offsets or --via-library: `iodepth` transfers in flight through the public transfer
// API). runs_engine_loop() (bench.hpp) tells which.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "sluice/config.hpp"
#include "sluice/device.hpp"
#include "sluice/file.hpp"
#include "sluice/io_engine.hpp"
#include "sluice/tools/bench.hpp"

namespace sluice::bench::detail {

inline std::uint64_t now_ns() noexcept {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

struct Region {
  std::uint64_t lo = 0;
  std::uint64_t hi = 0;  ///< exclusive
};

/// The offsets (and, for mixed runs, directions) one thread issues. Size-bound: every block of
/// the region once (random order for random modes: a full-period LCG walk, like fio's random
/// map); time-bound: wraps around forever. Not thread-safe.
class OffsetGen {
 public:
  struct Op {
    std::uint64_t offset = 0;
    std::uint32_t len = 0;
    IoOp op = IoOp::read;
  };
  OffsetGen(Region region, std::uint64_t block_size, const Workload& w, std::uint64_t seed);
  bool next(Op& op);
  [[nodiscard]] std::uint64_t issued() const noexcept { return issued_; }

 private:
  std::uint64_t rand() noexcept;
  Region region_;
  std::uint64_t bs_;
  std::uint64_t blocks_;
  RwMode rw_;
  unsigned mix_read_;
  bool unaligned_;
  bool wrap_;
  std::uint64_t issued_ = 0;
  std::uint64_t lcg_mask_ = 0;
  std::uint64_t lcg_state_ = 0;
  std::uint64_t lcg_inc_ = 1;
  std::uint64_t rng_ = 0;
};

/// State every thread of one run shares.
struct Shared {
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> bytes{0};
  std::atomic<std::uint64_t> ios{0};
  std::uint64_t deadline_ns = UINT64_MAX;  ///< time-bound runs stop issuing here
  std::mutex mutex;
  std::string error;

  /// Records the first failure and stops every thread.
  void fail(std::string message);
  [[nodiscard]] bool past_deadline(std::uint64_t t) const noexcept { return t >= deadline_ns; }
};

struct ThreadJob {
  const Workload* w = nullptr;
  unsigned index = 0;
  const File* file = nullptr;
  Region region;
  std::shared_ptr<Device> device;   ///< null for host-memory runs
  MemoryKind memory = MemoryKind::pageable_host;
  std::shared_ptr<const Config> cfg;
  Shared* shared = nullptr;
  std::vector<int> cpus;            ///< pin to these CPUs (--numa-node); empty: anywhere
};

/// (path, reason) -> I/Os.
using PathCounts = std::map<std::pair<std::string, std::string>, std::uint64_t>;

struct ThreadOutcome {
  LatencyHistogram latency;
  LatencyHistogram clat;  ///< engine threads that submit on their own (RunResult::clat)
  DirectionStats reads;
  DirectionStats writes;
  std::uint64_t ios = 0;
  std::uint64_t issued = 0;
  PathCounts paths;

  void merge(const ThreadOutcome& o);
  /// Counts one finished transfer everywhere (here and in the shared progress counters).
  void count(const ThreadJob& job, IoOp op, std::uint64_t bytes, std::uint64_t ns);
};

void run_engine_thread(const ThreadJob& job, ThreadOutcome& out);
void run_library_thread(const ThreadJob& job, ThreadOutcome& out);

/// The result's paths, most I/Os first, and its path and reason those of the first (with a note
/// of how many other combinations there were). Runs and their aggregates over ranks say it alike.
void set_paths(RunResult& r, const PathCounts& paths);

/// One file's range a run covers: the union of its threads' regions.
struct CacheSpan {
  const File* file = nullptr;
  std::uint64_t lo = 0;
  std::uint64_t hi = 0;  ///< exclusive
};

/// Puts the spans' pages in `state` (nothing for as-is) and measures what the cache then holds.
[[nodiscard]] CacheRecord prepare_cache(CacheState state, const std::vector<CacheSpan>& spans);
/// Measures what the cache holds after the run, and whether a cold run was served from memory
/// on later passes (rewarmed).
void finish_cache(CacheRecord& rec, const std::vector<CacheSpan>& spans, const RunResult& res);

/// Pins the calling thread to `cpus` (no-op when empty).
void pin_thread(const std::vector<int>& cpus);

/// "verify: data at offset N differs from the pattern ..." for a mismatch found at `bad`.
[[nodiscard]] std::string mismatch_message(const File& file, std::uint64_t bad, std::uint64_t block,
                                           std::uint64_t seed);

}  // namespace sluice::bench::detail
