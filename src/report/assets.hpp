// The charting library bundles linked into libsluice_tools by the build (src/report/assets.cmake
// generates the definition), or the reason they are missing.
#pragma once

#include <array>
#include <string_view>

namespace sluice::report::detail {

struct ChartAssets {
  bool available;
  std::string_view versions;
  std::string_view missing;
  /// vega, vega-lite, vega-embed (in the order the page must load them).
  std::array<std::string_view, 3> scripts;
};

extern const ChartAssets chart_assets;

}  // namespace sluice::report::detail
