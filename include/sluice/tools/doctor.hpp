// `sluice doctor`: why a workload reaches only part of what this machine and path can do. It runs
// the user's bench workload, measures variants of it (deeper queue, larger blocks, aligned
// offsets, O_DIRECT, more threads, async copies, all helpful changes together) within a time
// budget, gathers platform facts (cgroup I/O limits, PCIe links, NUMA, IOMMU, page-cache
// residency, memory and host-to-device bandwidth), and names the causes of the gap, ranked by
// how much each would recover. Gathering (measure()) and judging (diagnose()) are apart so the
// judgement is unit-tested with synthetic evidence. docs/doctor.md describes the method.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/export.hpp"
#include "sluice/tools/bench.hpp"

namespace sluice::doctor {

/// The causes the doctor can name (docs/tuning.md has one section for each).
enum class Cause : std::uint8_t {
  queue_depth,
  block_size,
  alignment,
  page_cache,
  buffered_io,
  threads,
  cpu_bound,
  copy_not_overlapped,
  pcie_link,
  numa_placement,
  iommu,
  device_limit,
  throttled,
};
[[nodiscard]] SLUICE_API std::string_view to_string(Cause c) noexcept;
/// Every cause, in declaration order.
[[nodiscard]] SLUICE_API std::vector<Cause> all_causes();

/// One measured run: the user's workload ("baseline") or a variant of it.
struct Probe {
  std::string name;  ///< baseline | iodepth | block_size | aligned | direct | threads | async_copy
                     ///< | numa | combined
  std::string
      change;  ///< what differs from the baseline ("iodepth 1 -> 16"); empty for the baseline
  bench::Workload workload;  ///< what ran
  double gib_s = 0;
  double seconds = 0;
  double cpu_cores = 0;  ///< user + system CPU seconds per second of the run
  double system_busy =
      -1;  ///< fraction (0..1) of all CPUs busy, any process, while it ran; -1 unknown
  bool cold_cache =
      false;  ///< the files' page cache was dropped before it (buffered, cold-cache workloads)
  std::string path;   ///< the path the bytes took
  std::string error;  ///< non-empty: the run failed or was skipped; gib_s covers what ran
  /// Interleaved rounds it ran (baseline, trials, baseline, trials); its figures are their
  /// totals. 0: none recorded (evidence built by hand).
  unsigned rounds = 0;
  /// Bytes other processes read from the files' device while it ran, as a fraction (0..1) of
  /// those and its own traffic (its device reads, or the bytes it moved where more); -1 unknown
  /// (no block device behind the files, no task I/O accounting).
  double others_read_share = -1;
};

/// A cgroup I/O limit that applies to this process on a device behind the workload's files.
struct Throttle {
  std::string file;   ///< the cgroup file holding it
                      ///< ("/sys/fs/cgroup/blkio/x/blkio.throttle.read_bps_device")
  std::string devno;  ///< "7:3"
  std::uint64_t read_bps = 0, write_bps = 0, read_iops = 0, write_iops = 0;  ///< 0: no limit
};

/// A PCIe link behind the path (a disk's or, for GPU transfer types, the GPU's).
struct Link {
  std::string what;  ///< "loop0", "nvme0n1 (0000:01:00.0)", "GPU cuda:0 (0000:17:00.0)"
  std::string speed, width, max_speed, max_width;  ///< as sysfs writes them
  double gib_s = 0;      ///< bandwidth of the link as trained (0: unknown)
  double max_gib_s = 0;  ///< bandwidth at its maximum speed and width (0: unknown)
};

/// Everything diagnose() judges. measure() fills it; tests build it by hand.
struct Evidence {
  bench::Workload workload;
  Probe baseline;
  std::vector<Probe> trials;  ///< variants, by Probe::name
  unsigned cpus = 1;          ///< CPUs this process may run on
  double cached_before =
      -1;  ///< fraction of the workload's file bytes in the page cache before any run; -1 unknown
  std::string fs_type;  ///< of the first file's folder
  std::string devno;    ///< device of the first file's filesystem ("major:minor"); empty: unknown
  bool memory_fs = false;       ///< tmpfs/ramfs: the data lives in memory, no device behind it
  bool o_direct = true;         ///< the filesystem supports O_DIRECT
  std::uint32_t dio_align = 0;  ///< O_DIRECT offset alignment (0: unknown or none)
  std::vector<Throttle> throttles;
  std::vector<Link> links;
  unsigned numa_nodes = 1;
  int device_numa_node = -1;  ///< NUMA node of the disk (or GPU) behind the path; -1 unknown
  bool iommu = false;
  std::string iommu_cmdline;
  double memory_gib_s = 0;  ///< measured memcpy bandwidth of one thread (0: not measured)
  double h2d_gib_s =
      0;  ///< measured pinned host-to-device copy bandwidth (GPU types; 0: not measured)
  /// The budget that would have given every probe two rounds, where this one did not (0: it did,
  /// or unknown).
  double two_round_budget_s = 0;
};

struct Finding {
  Cause cause = Cause::device_limit;
  std::string evidence;        ///< what was seen or measured
  std::string recommendation;  ///< the concrete change
  /// The throughput after the change: measured where a probe ran it, estimated where `measured`
  /// is false; none where it cannot be told (a limit whose removal was not tried).
  std::optional<double> expected_gib_s;
  bool measured = true;
};

/// How far the ranking can be trusted. A comparison is confident only where the baseline and the
/// variant ran in `confident_rounds` interleaved rounds or more (noise on a busy machine then
/// falls on both alike, where one round of each measures whatever that moment left free), and
/// had the device to themselves (another process reading the same device takes a share of it
/// that depends on its own load, not on the knob). `combined` runs once by design and is never
/// counted; neither is a failed trial.
struct Confidence {
  bool low = false;
  std::string reason;  ///< why it is low (and the budget that avoids it); empty if not
  std::vector<std::string> few_rounds;     ///< compared probes that ran fewer rounds
  std::vector<std::string> device_shared;  ///< compared probes while others read the device
};

struct Diagnosis {
  double achieved_gib_s = 0;
  double ceiling_gib_s = 0;        ///< the best throughput measured on this path (any probe)
  bool near_ceiling = false;       ///< achieved is within 15% of the ceiling
  std::string summary;             ///< one line
  std::vector<Finding> findings;   ///< ranked, most recovered first
  std::vector<std::string> notes;  ///< facts seen that do not explain the gap
  Confidence confidence;
};

/// Noise margin: a variant must beat the baseline by this factor to count as a finding.
inline constexpr double significant_gain = 1.2;
/// Achieved at or above this fraction of the ceiling is "near the ceiling".
inline constexpr double near_ceiling_fraction = 0.85;
/// Interleaved rounds the baseline and each trial need for a confident comparison.
inline constexpr unsigned confident_rounds = 2;
/// Other processes' share of the device's reads at which a comparison is no longer confident.
inline constexpr double shared_device_fraction = 0.25;

/// Judges the evidence: pure, no I/O. Findings rank as: a binding cgroup limit first (nothing
/// else can beat it), then a warm page cache (the figure is not the device's), then measured and
/// estimated gains by size, changes that alter a random workload's access pattern (larger
/// blocks) after the ones that keep it, and causes with no measured gain last. Confidence is low
/// where the baseline or a compared trial ran fewer than `confident_rounds` rounds, or shared
/// the device with other processes' reads (`shared_device_fraction`).
[[nodiscard]] SLUICE_API Diagnosis diagnose(const Evidence& e);

struct Options {
  bench::Workload workload;
  double budget_s = 60;  ///< for the whole run, probes and facts together
  /// Called as each stage starts: its name and the fraction of the budget used so far.
  std::function<void(std::string_view stage, double used)> progress;
};

struct Report {
  Evidence evidence;
  Diagnosis diagnosis;
  double budget_s = 0;
  double elapsed_s = 0;
  std::vector<std::string> skipped;  ///< probes left out, with why ("numa: single NUMA node")
};

/// Gathers the evidence (runs the workload and its variants, reads the platform facts) within
/// the budget, then diagnoses it. Bad workloads throw usage Errors, as bench::run_workload does.
[[nodiscard]] SLUICE_API Report run(const Options& opts);

/// The report as `sluice doctor --json` prints it, and as human text.
[[nodiscard]] SLUICE_API std::string to_json(const Report& r);
[[nodiscard]] SLUICE_API std::string to_text(const Report& r);

/// Fraction (0..1) of the pages of `files` in the page cache (sluice/residency.hpp: cachestat,
/// else mincore); -1 when none could be probed (missing or empty files).
[[nodiscard]] SLUICE_API double cached_fraction(const std::vector<std::string>& files);
/// Drops the clean page cache of `files` (fdatasync, then fadvise DONTNEED); never the whole
/// system's: drop_page_cache(files, DropScope::files) (sluice/page_cache.hpp).
SLUICE_API void drop_file_cache(const std::vector<std::string>& files);
/// The cgroup (v1 blkio.throttle.* or v2 io.max) limits on this process's cgroup and its
/// ancestors for any of the devices `devnos` ("major:minor").
[[nodiscard]] SLUICE_API std::vector<Throttle> cgroup_throttles(
    const std::vector<std::string>& devnos);
/// Bandwidth in GiB/s of a PCIe link from sysfs strings ("8.0 GT/s PCIe", "4"); 0 if unparsable.
[[nodiscard]] SLUICE_API double pcie_gib_s(std::string_view speed, std::string_view width);

}  // namespace sluice::doctor
