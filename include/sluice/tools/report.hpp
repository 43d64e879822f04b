// `sluice report`: one or more `sluice bench --json` documents turned into one self-contained
// HTML page (charts drawn by Vega-Lite, inlined, plus the same numbers as tables), so a result
// can be mailed, attached to a ticket or opened years later without a network. docs/report.md
// describes the page; docs/bench.md the JSON it reads.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "sluice/export.hpp"

namespace sluice::report {

/// One `sluice bench --json` document and how the page names it.
struct Input {
  std::string path;   ///< where it came from (shown on the page and in errors)
  std::string label;  ///< series name in every chart; inputs sharing a label form one series
  std::string json;   ///< the document's text
};

struct Options {
  std::string title = "sluice benchmark report";
  /// false: tables only even when the charting library is built in (smaller page).
  bool charts = true;
};

/// Whether the charting library was fetched when this sluice was built (npm ci), and if not why.
struct ChartLibrary {
  bool available = false;
  std::string versions;  ///< "vega 6.4.0, vega-lite 6.4.3, vega-embed 7.3.0"
  std::string missing;   ///< why not ("npm was not found when sluice was built", ...)
};
[[nodiscard]] SLUICE_API ChartLibrary chart_library();

/// The most latency-percentile, distribution and timeline series one chart draws; the tables
/// list every one.
inline constexpr std::size_t max_chart_series = 16;

/// The whole page. Throws a usage Error naming the input when a document is not JSON, is not a
/// `sluice bench` result, or has a schema this sluice cannot read, and when `inputs` is empty.
[[nodiscard]] SLUICE_API std::string render_html(const std::vector<Input>& inputs,
                                                 const Options& options = {});

/// Reads the files; labels[i] names file i (default: the file name without ".json"). Throws a
/// usage Error for an unreadable file or more labels than files.
[[nodiscard]] SLUICE_API std::vector<Input> read_inputs(
    const std::vector<std::string>& paths, const std::vector<std::string>& labels = {});

/// render_html() written to `out` (through a temporary file, so a failed run leaves no half
/// page). What `sluice bench --report FILE` calls with its own JSON document.
SLUICE_API void write_html(const std::filesystem::path& out, const std::vector<Input>& inputs,
                           const Options& options = {});

}  // namespace sluice::report
