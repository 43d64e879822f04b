// The benchmark engine behind `sluice bench`: a workload (files, block size, pattern, threads,
// queue depth, transfer type) runs on N threads, each keeping `iodepth` transfers in flight, and
// comes back as one RunResult: bytes, time, IOPS, a latency histogram, CPU time and the path the
// bytes took with the reason. A Plan adds what varies between runs (block-size sweep, transfer
// types to compare, repeats), interleaved so that noise on a shared machine hits every variant
// alike. docs/bench.md describes the method; the CLI only parses options and prints.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/device.hpp"
#include "sluice/export.hpp"
#include "sluice/histogram.hpp"
#include "sluice/units.hpp"

namespace sluice::bench {

/// Transfer types, numbered as gdsio's -x (7, GPU_BATCH_STREAM, is not supported).
enum class XferType : int {
  gpu_direct = 0,        ///< storage -> GPU through cuFile (path direct; auto-fallback is flagged)
  cpu_only = 1,          ///< storage -> host memory, the I/O engine driven directly (fio's peer)
  cpu_gpu = 2,           ///< pread into host memory, then a synchronous copy (path posix)
  cpu_async_gpu = 3,     ///< pipelined pinned staging with async copies (path bounce)
  cpu_cached_gpu = 4,    ///< buffered (page cache) read into pinned memory, then a copy
  gpu_direct_async = 5,  ///< stream-ordered transfers (read_on_stream), iodepth streams a thread
  gpu_batch = 6,         ///< submit_batch of iodepth entries at a time
  automatic = 100,       ///< whatever the library chooses for device memory (path auto)
};

[[nodiscard]] SLUICE_API std::string_view to_string(XferType x) noexcept;
/// gdsio's XferType spelling in its result line: GPUD, CPUONLY, CPU_GPU, ...
[[nodiscard]] SLUICE_API std::string_view gdsio_name(XferType x) noexcept;
/// A name ("cpu-only", "cpu_only", "CPUONLY", "auto") or a gdsio number ("1"). Throws a usage
/// Error that lists the valid types for anything else.
[[nodiscard]] SLUICE_API XferType parse_xfer(std::string_view text);
/// "all" or a comma list of types.
[[nodiscard]] SLUICE_API std::vector<XferType> parse_xfer_list(std::string_view text);
/// Every supported type, in the order `--compare all` runs them.
[[nodiscard]] SLUICE_API std::vector<XferType> all_xfers();
[[nodiscard]] SLUICE_API bool uses_gpu(XferType x) noexcept;

/// The page cache a run that reads starts from. Like for like is the default: a buffered type
/// that found the file cached would race memory while O_DIRECT types read the storage (fio
/// drops a job's file from the cache first too, its invalidate=1).
enum class CacheState : std::uint8_t {
  cold,   ///< the data set written back and dropped (fdatasync, posix_fadvise DONTNEED) first
  warm,   ///< the data set read through the page cache first
  as_is,  ///< left as it is (library callers that manage the cache themselves: sluice doctor)
};
[[nodiscard]] SLUICE_API std::string_view to_string(CacheState c) noexcept;
/// "cold" | "warm" | "as-is"; throws a usage Error for anything else.
[[nodiscard]] SLUICE_API CacheState parse_cache_state(std::string_view text);

enum class RwMode : std::uint8_t { read, write, randread, randwrite, rw, randrw };
[[nodiscard]] SLUICE_API std::string_view to_string(RwMode m) noexcept;
/// "read" | "write" | "randread" | "randwrite" | "rw" | "randrw", or gdsio's -I number 0-3.
[[nodiscard]] SLUICE_API RwMode parse_rw(std::string_view text);
[[nodiscard]] SLUICE_API bool is_random(RwMode m) noexcept;
[[nodiscard]] SLUICE_API bool does_reads(RwMode m) noexcept;
[[nodiscard]] SLUICE_API bool does_writes(RwMode m) noexcept;

struct Workload {
  std::vector<std::string> files;   ///< thread t works on files[t % n]; threads on one file split it
  std::string dir;                  ///< instead of files: one file per thread, DIR/sluice-bench.<t>
  std::uint64_t size = 0;           ///< bytes of each file covered (0: the file from offset to end)
  std::uint64_t offset = 0;         ///< first byte of each file
  std::uint64_t block_size = MiB;
  RwMode rw = RwMode::read;
  unsigned mix_read = 50;           ///< rw/randrw: percent of I/Os that are reads
  unsigned threads = 1;
  unsigned iodepth = 1;             ///< transfers in flight per thread
  double time_s = 0;                ///< > 0: run this long (wrapping around); 0: cover `size` once
  double warmup_s = 0;              ///< run this long first and discard it
  bool unaligned = false;           ///< random offsets at any byte, not block multiples
  std::uint64_t seed = 1;           ///< random offsets and the verification pattern
  bool verify = false;              ///< writes write a pattern; reads check it
  bool direct = true;               ///< O_DIRECT where the filesystem has it
  /// Reads with `direct`: bypass (O_DIRECT regardless: a storage measurement, the default), auto
  /// (blocks the page cache holds at least half of are read buffered, the rest O_DIRECT, as
  /// sluice::read does by default), use (buffered regardless; what --buffered also gives).
  CachePolicy cache_policy = CachePolicy::bypass;
  XferType xfer = XferType::cpu_only;
  std::string device = "auto";      ///< auto | sim | cuda:N | cuda:0,1 (threads round-robin)
  std::optional<MemoryKind> memory; ///< default: device memory for GPU types, host for cpu-only
  bool strict = false;              ///< gpu-direct fails instead of falling back
  int numa_node = -1;               ///< >= 0: run the threads on this node's CPUs
  double sample_interval_s = 1.0;   ///< throughput-over-time samples of time-bound runs
  /// cpu-only: submit after this many requests are prepared (1: each one at once, fio's default
  /// iodepth_batch_submit=1); 0: refill every free slot, submitting max(1, iodepth / 16) at a
  /// time, the last ones with the wait for the next completion.
  unsigned submit_batch = 0;
  /// cpu-only: collect at most this many completions per wait (1: fio's default
  /// iodepth_batch_complete_max=1); 0: every completion that is ready.
  unsigned reap_batch = 0;
  /// cpu-only: I/O buffers 2 MiB-aligned on transparent huge pages (madvise); false: 4 KiB
  /// pages, like fio's default iomem=malloc.
  bool huge_pages = true;
  /// cpu-only: every transfer through sluice::read/write (`iodepth` sub-workers, the library's
  /// host path, staging where needed), as unaligned offsets always go, instead of the engine
  /// loop. `sluice doctor` keeps a variant on its baseline's path with it.
  bool via_library = false;
  /// What run_workload does to the page cache of the data set just before the measured phase of
  /// a run that reads (after a warm-up, which would refill it). run_plan sets it from Plan::cache.
  CacheState cache = CacheState::as_is;
};

/// Checks what can be checked without touching files; throws a usage Error with the reason.
SLUICE_API void validate(const Workload& w);
/// Whether a workload runs on the engine loop (cpu-only, offsets and sizes 4 KiB multiples, not
/// `via_library`); every other workload goes through the public transfer API.
[[nodiscard]] SLUICE_API bool runs_engine_loop(const Workload& w) noexcept;

/// "4K" -> {4096}; "4K:1M:x2" -> 4K, 8K, ... 1M; "4K:16K:4K" -> 4K, 8K, 12K, 16K (gdsio's
/// min:max:step). Throws a usage Error on a malformed or empty range.
[[nodiscard]] SLUICE_API std::vector<std::uint64_t> parse_block_sizes(std::string_view spec);

struct Sample {
  double t = 0;          ///< seconds since the measured phase began (end of the interval)
  double gib_per_s = 0;
  double iops = 0;
};

struct PathShare {
  std::string path;
  std::string reason;
  std::uint64_t ios = 0;
};

/// One direction of a run: a mixed (rw/randrw) run reports its reads and writes apart.
struct DirectionStats {
  std::uint64_t bytes = 0;
  std::uint64_t ios = 0;
  LatencyHistogram latency;  ///< nanoseconds per transfer of this direction

  void merge(const DirectionStats& o) {
    bytes += o.bytes;
    ios += o.ios;
    latency.merge(o.latency);
  }
};

/// The page cache state a run started in, measured rather than assumed: the share of the data
/// set's pages the cache held just before the clock started, and just after it stopped.
struct SLUICE_API CacheRecord {
  CacheState state = CacheState::as_is;  ///< what was asked for
  std::uint64_t pages = 0;         ///< pages of the data set (its files' ranges)
  std::uint64_t cached_start = 0;  ///< of them, cached when the measured phase began
  std::uint64_t cached_end = 0;    ///< and when it ended
  bool known = false;              ///< a residency probe answered (cachestat or mincore)
  /// A cold start whose run read its data set more than once through the page cache, which
  /// then held at least half of it: the later passes were served from memory.
  bool rewarmed = false;
  std::string how;    ///< what was done to the cache, for the record ("" for as-is)
  std::string error;  ///< the errno of an eviction or a read-in that failed, in words

  [[nodiscard]] double start_fraction() const noexcept;
  [[nodiscard]] double end_fraction() const noexcept;
  /// Whether the run started in the state asked for: cold at most 1% cached, warm at least 99%
  /// (true for as-is, and where no probe could tell).
  [[nodiscard]] bool held() const noexcept;
  /// The table's cell: "cold 0%", "warm 100%", "NOT cold 37%", "cold->warm", "as-is 12%",
  /// "cold ?" (no probe answered).
  [[nodiscard]] std::string label() const;
};

struct SLUICE_API RunResult {
  XferType xfer = XferType::cpu_only;
  RwMode rw = RwMode::read;
  std::string phase = "run";   ///< "run", or "verify" for the read-back after a --verify write
  unsigned round = 1;
  std::uint64_t block_size = 0;
  unsigned threads = 0;
  unsigned iodepth = 0;
  std::uint64_t bytes = 0;     ///< reads.bytes + writes.bytes
  std::uint64_t ios = 0;
  std::uint64_t dataset_bytes = 0;  ///< the configured data set (threads' regions together)
  double seconds = 0;
  double cpu_user_s = 0;
  double cpu_sys_s = 0;
  LatencyHistogram latency;    ///< nanoseconds per transfer, submission to completion
  /// fio's completion latency (clat): from the return of the syscall that submitted the request
  /// to its completion being reaped. Measured only by cpu-only runs on io_uring that submit in
  /// syscalls of their own (Workload::submit_batch > 0); empty (count() == 0) otherwise.
  LatencyHistogram clat;
  DirectionStats reads;        ///< the reads alone (all of the run for read modes)
  DirectionStats writes;       ///< the writes alone
  std::string path;            ///< the path most bytes took
  std::string reason;          ///< why (for gpu-direct that did not run direct: "fell back ...")
  bool fell_back = false;      ///< gpu-direct ran on another path
  std::vector<PathShare> paths;  ///< every (path, reason) seen, most used first
  std::string memory;          ///< device | pinned_host | pageable_host
  std::string device;          ///< device names, "" for host-only runs
  bool verified = false;       ///< data was checked against the pattern
  std::vector<Sample> samples;
  std::vector<std::uint64_t> covered;  ///< writes: bytes of each thread's region written
  std::string error;           ///< non-empty: failed mid-run; the figures cover what ran
  double start_unix = 0;       ///< wall-clock start of the measured phase (s since the epoch)
  double end_unix = 0;         ///< wall-clock end (start_unix + seconds): windows across processes
  /// Stopped from outside (RunHooks::poll: a stonewall): bytes moved and seconds elapsed at the
  /// moment of the stop; the figures above also count the transfers in flight then.
  std::optional<std::uint64_t> stopped_bytes;
  double stopped_s = 0;
  CacheRecord cache;           ///< the page cache state the run started (and ended) in

  [[nodiscard]] double gib_per_s() const noexcept;
  [[nodiscard]] double gb_per_s() const noexcept;
  [[nodiscard]] double iops() const noexcept;
  [[nodiscard]] double cpu_seconds_per_gib() const noexcept;
  /// A direction's throughput and IOPS over the run's wall time (as fio reports each direction).
  [[nodiscard]] double gib_per_s(const DirectionStats& d) const noexcept;
  [[nodiscard]] double iops(const DirectionStats& d) const noexcept;
};

struct Progress {
  double elapsed_s = 0;
  double planned_s = 0;      ///< time-bound runs; 0 for size-bound
  std::uint64_t bytes = 0;
  std::uint64_t planned_bytes = 0;  ///< size-bound runs
  double gib_per_s = 0;      ///< over the last interval
};
using ProgressFn = std::function<void(const Progress&)>;

/// What a run does in step with other processes (sluice bench under MPI): a barrier just
/// before the measured phase starts (after files are laid out and devices opened), and a poll
/// every ~10 ms while it runs that can stop every thread (a stonewall).
struct RunHooks {
  std::function<void()> at_start;
  /// Called with the bytes moved so far; true stops the run (recorded in stopped_bytes).
  std::function<bool(std::uint64_t bytes)> poll;
};

/// Runs one workload. Files to read that do not exist (or are short) are laid out first when
/// `size` is given, with the verification pattern. Bad workloads and set-up failures throw
/// (usage Errors for bad arguments); a failure during the run does not: it stops every thread
/// and returns what was measured so far with `error` set. A --verify write returns its write
/// result; run_plan adds the read-back.
[[nodiscard]] SLUICE_API RunResult run_workload(const Workload& w, const ProgressFn& progress = {});
/// The same, with hooks (a warm-up runs them too, so every process makes the same calls).
[[nodiscard]] SLUICE_API RunResult run_workload(const Workload& w, const ProgressFn& progress,
                                                const RunHooks& hooks);
/// The read-back of a --verify write: reads the range the write covered and checks it.
[[nodiscard]] SLUICE_API RunResult verify_written(const Workload& w, const RunResult& write,
                                                  const ProgressFn& progress = {},
                                                  const RunHooks& hooks = {});

struct Plan {
  Workload workload;
  std::vector<std::uint64_t> block_sizes;  ///< empty: workload.block_size
  std::vector<XferType> xfers;             ///< empty: workload.xfer
  unsigned repeat = 1;
  bool drop_caches = false;                ///< before every run (root: drop_caches, else fadvise)
  /// The page cache each run that reads starts from (Workload::cache): cold, as fio's default
  /// invalidate=1; warm (--warm) also makes O_DIRECT types read with cache_policy auto
  /// (make_plan in the CLI does that, so the plan records it).
  CacheState cache = CacheState::cold;
};

/// Runs every (block size, round, transfer type), rounds interleaved across types. Calls
/// on_result after each run (and its read-back). Stops at the first run that failed mid-run.
/// What run_plan does in step with other processes (see RunHooks).
struct PlanHooks {
  /// Before each run ("run") and read-back ("verify"): may change the workload (--rotate reads
  /// another process's files).
  std::function<void(Workload&, const std::string& phase)> before_run;
  /// After each run, before on_result: may replace the result (by the aggregate over processes);
  /// false stops the plan, as a failed run does.
  std::function<bool(RunResult&)> after_run;
  RunHooks run;
};

SLUICE_API std::vector<RunResult> run_plan(
    const Plan& plan, const std::function<void(const RunResult&)>& on_result = {},
    const ProgressFn& progress = {}, const PlanHooks& hooks = {});

/// Medians over the rounds of each (block size, transfer type), with ratios to the first type.
struct Summary {
  XferType xfer = XferType::cpu_only;
  std::uint64_t block_size = 0;
  unsigned rounds = 0;
  double gib_per_s = 0;
  double iops = 0;
  double p50_us = 0;
  double p99_us = 0;
  double cpu_seconds_per_gib = 0;
  double ratio = 1;   ///< gib_per_s / the first type's at this block size
  std::string path;
  /// The rounds' cache state: "cold" or "warm" where every round started so, else the first
  /// round's label that did not ("NOT cold 37%", "cold->warm").
  std::string cache;
};
[[nodiscard]] SLUICE_API std::vector<Summary> summarize(const std::vector<RunResult>& runs);

/// The median of `v` (the mean of the middle two for an even count; 0 when empty).
[[nodiscard]] SLUICE_API double median(std::vector<double> v);

/// Drops the page cache of `files` (all of it as root, else each file's with fadvise); returns
/// how, for the record: drop_page_cache(files, DropScope::system) (sluice/page_cache.hpp).
SLUICE_API std::string drop_caches(const std::vector<std::string>& files);

/// The verification pattern: a function of (seed, file offset) only, so data written with any
/// block size, thread count or order checks the same.
SLUICE_API void fill_pattern(std::byte* dst, std::uint64_t file_offset, std::size_t len,
                             std::uint64_t seed);
/// The file offset of the first byte that differs from the pattern, or nullopt.
[[nodiscard]] SLUICE_API std::optional<std::uint64_t> check_pattern(const std::byte* src,
                                                                    std::uint64_t file_offset,
                                                                    std::size_t len,
                                                                    std::uint64_t seed);

}  // namespace sluice::bench
