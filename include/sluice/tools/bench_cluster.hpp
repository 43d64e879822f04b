// `sluice bench` across the processes of a parallel job (MPI): every rank runs the plan on its
// own files and device, in step (a barrier before each measured phase), and rank 0 combines the
// ranks' results the way IOR does: aggregate bandwidth = all ranks' bytes / (latest end -
// earliest start), latency histograms merged exactly, the slowest rank named with its gap to
// the median. --stonewall stops every rank at a deadline; --rotate makes each rank read what
// another rank (on another host where there are several) wrote. docs/mpi.md.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/export.hpp"
#include "sluice/tools/bench.hpp"
#include "sluice/tools/cluster.hpp"

namespace sluice::bench {

/// One rank's result of one phase, as it travels to rank 0.
struct RankRun {
  int rank = 0;
  std::string host;
  int local_rank = 0;
  int numa_node = -1;  ///< the node its threads ran on (-1: not bound)
  RunResult result;
};
/// A RankRun as a compact JSON document (histograms included) and back.
[[nodiscard]] SLUICE_API std::string rank_run_to_wire(const RankRun& r);
[[nodiscard]] SLUICE_API RankRun rank_run_from_wire(std::string_view text);

struct RankRow {
  int rank = 0;
  std::string host;
  int local_rank = 0;
  std::string device;
  std::uint64_t bytes = 0;
  std::uint64_t ios = 0;
  double start = 0;  ///< unix seconds
  double end = 0;
  double seconds = 0;
  double gib_per_s = 0;  ///< this rank's bytes over its own seconds
  double iops = 0;
  double p50_us = 0, p99_us = 0, max_us = 0;
  std::string error;
};

struct StonewallFigures {
  double seconds = 0;                   ///< from the earliest start to the latest stop
  std::string mode;                     ///< "deadline" (the only mode so far)
  std::uint64_t stonewalled_bytes = 0;  ///< moved by all ranks before each one stopped
  double stonewalled_gib_per_s = 0;
  std::uint64_t completed_bytes = 0;  ///< also the transfers in flight at the stop
  double completed_gib_per_s = 0;     ///< over the whole window
};

struct Slowest {
  int rank = 0;
  std::string host;
  double gib_per_s = 0;
  double median_gib_per_s = 0;
  double gap_pct = 0;  ///< (median - slowest) / median, percent
};

/// One phase over every rank.
struct ClusterRun {
  RunResult aggregate;  ///< bytes, ios, latency summed/merged; seconds = the common window
  int world_size = 1;
  int hosts = 1;
  double window_start = 0;  ///< earliest start, unix seconds
  double window_end = 0;    ///< latest end
  std::optional<StonewallFigures> stonewall;
  Slowest slowest;
  std::vector<RankRow> ranks;
  std::vector<RunResult> rank_results;  ///< each rank's own result (CSV rows)
};

/// Combines the ranks' results of one phase. The aggregate's error names the first failed rank
/// and host. With `stonewall_mode` non-empty, fills `stonewall` from the ranks' stopped_bytes.
[[nodiscard]] SLUICE_API ClusterRun aggregate_ranks(const std::vector<RankRun>& ranks,
                                                    const std::string& stonewall_mode = {});

/// Per-rank rows and the slowest rank, under the aggregate's row.
[[nodiscard]] SLUICE_API std::string rank_table(const ClusterRun& c);
/// CSV: the bench columns with "rank,host" in front; a row "all" (the aggregate) and one per rank.
[[nodiscard]] SLUICE_API std::string cluster_csv(const std::vector<ClusterRun>& runs);

struct ClusterInfo {
  int world_size = 1;
  std::vector<std::string> hosts;  ///< distinct, in rank order of first appearance
  std::string launcher;
  bool rotate = false;
  double stonewall_s = 0;
  bool stonewall_first_done = false;
};
/// The bench report (report_json) over the aggregates, each result with an "mpi" object and a
/// top-level "mpi" (docs/mpi.md lists the fields).
[[nodiscard]] SLUICE_API std::string cluster_report_json(const Plan& plan, std::string_view command,
                                                         const std::vector<ClusterRun>& runs,
                                                         const ClusterInfo& info);

struct ClusterOptions {
  bool rotate = false;     ///< reads go to rank (r + shift) % N's files
  double stonewall_s = 0;  ///< > 0: every rank stops this long after the common start
  bool stonewall_first_done = false;  ///< every rank stops when the first one finishes
};

/// The placeholders of the plan's files, --dir and device expanded for `where`.
[[nodiscard]] SLUICE_API Workload expand_workload(const Workload& w, const ClusterEnv& where);
/// --rotate's partner: the rank whose files rank `rank` reads. `hosts` is every rank's host;
/// the shift is the number of ranks on this rank's host when there are several hosts (so the
/// partner is on another host, IOR's -C), else 1.
[[nodiscard]] SLUICE_API int rotate_partner(int rank, const std::vector<std::string>& hosts);

/// Runs the plan on every process of `comm` (each calls it). Rank 0 gets every phase through
/// `on_phase` and the returned vector; the others get an empty vector. A failed phase on any
/// rank stops every rank after that phase, with the error in the aggregate. An exception (bad
/// workload, missing file) propagates on the rank that threw: the caller must end the job
/// (Communicator::abort), as the others wait for it in a collective call.
SLUICE_API std::vector<ClusterRun> run_plan_on_cluster(
    Communicator& comm, const ClusterEnv& where, const Plan& plan, const ClusterOptions& options,
    const std::function<void(const ClusterRun&)>& on_phase = {}, const ProgressFn& progress = {},
    std::vector<std::string>* hosts_out = nullptr);

}  // namespace sluice::bench
