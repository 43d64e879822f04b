// The Vega-Lite specifications of the report's charts, built from the model so that what each
// chart shows (series, axes, units) is decided, and unit-tested, in C++; the page only hands
// them to vega-embed.
#pragma once

#include <string>
#include <vector>

#include "report/model.hpp"

namespace sluice::report::detail {

struct Chart {
  std::string id;  ///< the element id on the page
  json spec;       ///< a Vega-Lite specification with its data inline
};

/// Bars per case (median of the rounds, whisker min..max), fallbacks labelled.
[[nodiscard]] std::vector<Chart> throughput_charts(const Model& m);
/// Throughput and IOPS against each of block size, queue depth and threads that varies.
[[nodiscard]] std::vector<Chart> sweep_charts(const Model& m);
/// Percentiles p50..max per case, and the distribution from the merged histograms.
[[nodiscard]] std::vector<Chart> latency_charts(const Model& m);
/// Throughput samples over time of time-bound runs.
[[nodiscard]] std::vector<Chart> timeline_charts(const Model& m);
/// Per-rank bars of each MPI result, the slowest rank marked.
[[nodiscard]] std::vector<Chart> mpi_charts(const Model& m);

/// The series a case belongs to in charts that mix cases: its input label (when the report has
/// several) and its case name.
[[nodiscard]] std::string case_series(const Model& m, const Case& c);

}  // namespace sluice::report::detail
