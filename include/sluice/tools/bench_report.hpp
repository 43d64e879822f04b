// What `sluice bench` prints and saves: a human table, gdsio's one-line format, CSV, and one JSON
// document carrying the version, command, configuration (enough to rerun it), the system and
// every result. docs/bench.md lists the JSON schema.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "sluice/export.hpp"
#include "sluice/tools/bench.hpp"

namespace sluice::bench {

/// One row per run: GiB/s, GB/s, IOPS, latency mean/p50/p90/p99/p99.9/max (us), CPU s/GiB,
/// the page cache state it started in, path and reason. Failed and fallen-back runs are marked,
/// and so are runs that did not start in the cache state asked for.
[[nodiscard]] SLUICE_API std::string result_table(const std::vector<RunResult>& runs,
                                                  bool header = true);
/// One line above the tables: the page cache state the plan's runs start from, and what the
/// cache column means.
[[nodiscard]] SLUICE_API std::string cache_note(const Plan& plan);
/// Medians and ratios of a comparison or of repeated runs.
[[nodiscard]] SLUICE_API std::string summary_table(const std::vector<Summary>& summaries);
/// gdsio's result line: "IoType: READ XferType: GPUD Threads: 8 DataSetSize: .../...(KiB)
/// IOSize: 1024(KiB) Throughput: 6.524658 GiB/sec, Avg_Latency: 1197.370995 usecs ops: 799606
/// total_time 119.679102 secs".
[[nodiscard]] SLUICE_API std::string gdsio_line(const RunResult& r);

[[nodiscard]] SLUICE_API std::string csv_header();
[[nodiscard]] SLUICE_API std::string csv_row(const RunResult& r);

/// The plan as JSON (the report's "config"), and back (for --replay).
[[nodiscard]] SLUICE_API std::string plan_to_json(const Plan& plan);
[[nodiscard]] SLUICE_API Plan plan_from_json(std::string_view json);
/// The "config" of a saved report, as a plan. Throws a usage Error naming what is missing.
[[nodiscard]] SLUICE_API Plan plan_from_report(std::string_view report_json);

/// One result as JSON (an object of the report's results[]).
[[nodiscard]] SLUICE_API std::string result_json(const RunResult& r);
/// The system the run was made on: CPU, memory, kernel, GPUs, each file's filesystem, mount
/// options and block device (model, PCIe link where sysfs shows them), sluice configuration.
[[nodiscard]] SLUICE_API std::string system_json(const Plan& plan);
/// The version of the report's JSON layout ("schema"): raised when a field changes meaning or
/// goes away (adding fields does not), so readers such as `sluice report` can refuse files they
/// would misread.
inline constexpr int report_schema_version = 1;

/// The whole report: {"version","command","started","config","system","results","summary"}.
[[nodiscard]] SLUICE_API std::string report_json(const Plan& plan, std::string_view command,
                                                 const std::vector<RunResult>& runs);

}  // namespace sluice::bench
