// Vega-Lite specifications for the report. Every chart has a title, axis titles with units and a
// legend whenever colour carries meaning; inputs (labels) are always told apart by colour so two
// back ends sit side by side in every chart.
#include "report/charts.hpp"

#include <algorithm>
#include <iterator>
#include <set>

#include <fmt/format.h>

namespace sluice::report::detail {
namespace {

constexpr const char* size_label_expr =
    "datum.value >= 1073741824 ? format(datum.value / 1073741824, '~g') + ' GiB' : "
    "datum.value >= 1048576 ? format(datum.value / 1048576, '~g') + ' MiB' : "
    "datum.value >= 1024 ? format(datum.value / 1024, '~g') + ' KiB' : datum.value + ' B'";

json base(const std::string& title, const std::string& subtitle, json values) {
  json spec = {{"title", {{"text", title}, {"anchor", "start"}}},
               {"data", {{"values", std::move(values)}}},
               {"config",
                {{"axis", {{"labelFontSize", 11}, {"titleFontSize", 12}}},
                 {"legend", {{"labelLimit", 320}}}}}};
  if (!subtitle.empty()) spec["title"]["subtitle"] = subtitle;
  return spec;
}

json color(const std::string& field, const std::string& title) {
  return {{"field", field},
          {"type", "nominal"},
          {"title", title},
          {"sort", nullptr},
          {"legend", {{"orient", "bottom"}, {"columns", 2}}}};
}

bool multi_series(const Model& m) {
  return m.labels.size() > 1;
}

// The page's content is at most 1200 px wide (html.cpp's style): the first chart is sized to fit
// in it with its axes and gaps, so that it never scrolls sideways on a 1400 px screen.
constexpr int chart_budget_px = 1140;

// A panel's y axis with its title, and the gap to the next panel.
constexpr int axis_px = 70;

struct BarLayout {
  std::size_t columns;
  int step;  ///< px per bar
};

// `panels` panels of `bars` bars each: as many side by side as fit with bars 16 px or wider.
BarLayout bar_layout(std::size_t panels, std::size_t bars) {
  const int n = static_cast<int>(std::max<std::size_t>(bars, 1));
  for (std::size_t cols = std::max<std::size_t>(panels, 1);; --cols) {
    const int c = static_cast<int>(cols);
    const int step = (chart_budget_px - c * axis_px) / c / n;
    if (step >= 16 || cols == 1) return {cols, std::clamp(step, 8, 44)};
  }
}

// The legend's words for a case's cache state (docs/bench.md "Cache state").
std::string cache_words(const std::string& cache) {
  if (cache == "cold") return "cold: dropped from the page cache before each run";
  if (cache == "warm") return "warm: read through the page cache first";
  if (cache == "as-is") return "as-is: left as it was (writes)";
  if (cache.empty()) return "not recorded (an older sluice)";
  return cache;  // a round that did not start as asked: its label ("NOT cold 37%")
}

json throughput_values(const Model& m) {
  json values = json::array();
  for (const Case& c : m.cases) {
    values.push_back({{"case", c.name},
                      {"xfer", c.xfer},
                      {"panel", c.setting},
                      {"series", c.series},
                      {"median", c.median},
                      {"min", c.min},
                      {"max", c.max},
                      {"iops", c.iops_median},
                      {"path", c.path},
                      {"cache", cache_words(c.cache)},
                      {"rounds", c.rows.size()},
                      {"note", c.fell_back ? "fell back: " + c.path : ""},
                      {"reason", c.reason}});
  }
  return values;
}

// Colours that keep their meaning from page to page: one per path, only those present.
json path_color(const Model& m) {
  static constexpr std::pair<const char*, const char*> palette[] = {{"direct", "#54a24b"},
                                                                    {"bounce", "#f58518"},
                                                                    {"posix", "#e45756"},
                                                                    {"host", "#4c78a8"},
                                                                    {"mapped", "#72b7b2"}};
  json domain = json::array(), range = json::array();
  for (const auto& entry : palette) {
    // Not a structured binding: clang 14 cannot capture one in the lambda below.
    const char* path = entry.first;
    const char* rgb = entry.second;
    if (std::any_of(m.cases.begin(), m.cases.end(),
                    [&](const Case& c) { return c.path == path; })) {
      domain.push_back(path);
      range.push_back(rgb);
    }
  }
  json enc = color("path", "path the bytes took");
  enc["scale"] = {{"domain", domain}, {"range", range}};
  for (const Case& c : m.cases) {  // a path this sluice does not know: the scheme's colours
    if (std::find(domain.begin(), domain.end(), c.path) == domain.end()) enc.erase("scale");
  }
  return enc;
}

// The page cache state the runs started in, as a legend of its own: a cold and a warm number
// are different measurements (of storage, of memory), so every chart of bars says which it is.
json cache_opacity(const Model& m) {
  json domain = json::array(), range = json::array();
  for (const Case& c : m.cases) {
    const std::string words = cache_words(c.cache);
    if (std::find(domain.begin(), domain.end(), words) != domain.end()) continue;
    domain.push_back(words);
    range.push_back(c.cache == "cold" ? 1.0 : c.cache == "warm" ? 0.5 : 0.75);
  }
  return {{"field", "cache"},
          {"type", "nominal"},
          {"title", "page cache at the start of each run"},
          {"scale", {{"domain", domain}, {"range", range}}},
          {"legend",
           {{"orient", "bottom"},
            {"columns", 1},
            {"titleLimit", 400},
            {"symbolType", "square"},
            {"symbolFillColor", "#777"},
            {"symbolStrokeColor", "#777"}}}};
}

// Bars (median), whiskers (slowest..fastest round) and "fell back: PATH" written up from the
// foot of a bar that took another path than the one asked for.
json throughput_layers(const Model& m, int height, bool faceted) {
  const json tooltip =
      json::array({{{"field", "series"}, {"title", "input"}},
                   {{"field", "case"}, {"title", "case"}},
                   {{"field", "median"}, {"title", "GiB/s (median)"}, {"format", ".3f"}},
                   {{"field", "min"}, {"title", "GiB/s (min)"}, {"format", ".3f"}},
                   {{"field", "max"}, {"title", "GiB/s (max)"}, {"format", ".3f"}},
                   {{"field", "iops"}, {"title", "IOPS"}, {"format", ",.0f"}},
                   {{"field", "path"}, {"title", "path"}},
                   {{"field", "cache"}, {"title", "page cache"}},
                   {{"field", "reason"}, {"title", "why"}}});
  return json::array(
      {{{"mark", {{"type", "bar"}}},
        {"encoding",
         {{"y",
           {{"field", "median"},
            {"type", "quantitative"},
            {"title", faceted ? "GiB/s" : "throughput (GiB/s)"},
            // The top label inside the plot: panels whose scale ends on a tick would otherwise
            // reach higher than the others and lift their header out of line.
            {"axis", {{"labelFlush", true}}}}},
          {"color", multi_series(m) ? color("series", "input") : path_color(m)},
          {"opacity", cache_opacity(m)},
          {"tooltip", tooltip}}}},
       {{"mark", {{"type", "rule"}, {"color", "#333"}}},
        {"encoding",
         {{"y", {{"field", "min"}, {"type", "quantitative"}}}, {"y2", {{"field", "max"}}}}}},
       {{"mark",
         {{"type", "text"},
          {"angle", 270},
          {"align", "left"},
          {"baseline", "middle"},
          {"dy", 4},  // beside the bar's middle, where the whisker runs
          {"fontSize", 10},
          {"color", "#222"}}},
        {"encoding", {{"y", {{"value", height - 4}}}, {"text", {{"field", "note"}}}}}}});
}
}  // namespace

std::string case_series(const Model& m, const Case& c) {
  return multi_series(m) ? fmt::format("{} · {}", c.series, c.name) : c.name;
}

std::vector<Chart> throughput_charts(const Model& m) {
  if (m.cases.empty()) return {};
  std::vector<std::string> panels, xfers;
  std::size_t max_rounds = 0;
  for (const Case& c : m.cases) {
    max_rounds = std::max(max_rounds, c.rows.size());
    if (std::find(panels.begin(), panels.end(), c.setting) == panels.end())
      panels.push_back(c.setting);
    if (std::find(xfers.begin(), xfers.end(), c.xfer) == xfers.end()) xfers.push_back(c.xfer);
  }
  // Small multiples where transfer types are compared at several settings (a --compare all
  // sweep): one panel per setting, one bar per type; else one chart with a bar per case.
  const bool faceted = panels.size() > 1 && xfers.size() > 1;
  const bool multi = multi_series(m);
  // Bars across a panel: the x band holds every case name (or type), each split by input.
  std::set<std::string> names;
  for (const Case& c : m.cases) names.insert(faceted ? c.xfer : c.name);
  const std::size_t bars = names.size() * (multi ? m.labels.size() : 1);
  const BarLayout layout = bar_layout(faceted ? panels.size() : 1, bars);
  const int height = faceted ? 220 : 300;
  std::string subtitle = fmt::format("median of {} round{}; whisker: slowest to fastest round",
                                     max_rounds, max_rounds == 1 ? "" : "s");
  if (faceted) subtitle += "; each panel has its own scale";
  json spec = base("Throughput by transfer type and path", subtitle, throughput_values(m));
  // A width in pixels, not a step: with inputs side by side (xOffset) a step would be that of
  // one input's bar, and Vega-Lite adds the bands' padding on top.
  json inner = {{"width", layout.step * static_cast<int>(bars)},
                {"height", height},
                {"encoding",
                 {{"x",
                   {{"field", faceted ? "xfer" : "case"},
                    {"type", "nominal"},
                    {"sort", nullptr},
                    {"title", faceted ? nullptr : json("transfer type")},
                    {"axis", {{"labelAngle", (faceted ? xfers.size() : bars) > 3 ? -40 : 0}}}}}}},
                {"layer", throughput_layers(m, height, faceted)}};
  if (multi)
    inner["encoding"]["xOffset"] = {{"field", "series"}, {"type", "nominal"}, {"sort", nullptr}};
  if (!faceted) {
    spec.update(inner);
    return {{"chart-throughput", std::move(spec)}};
  }
  const bool bs_only = !m.varies.at("rw") && !m.varies.at("iodepth") && !m.varies.at("threads");
  spec["columns"] = layout.columns;
  spec["facet"] = {{"field", "panel"},
                   {"type", "nominal"},
                   {"sort", panels},
                   {"title", bs_only ? "block size" : "setting"},
                   {"header",
                    {{"labelFontSize", 13},
                     {"labelFontWeight", "bold"},
                     {"titleFontSize", 12},
                     {"titleFontWeight", "normal"}}}};
  spec["spec"] = std::move(inner);
  // Every panel its own y scale, and its own x axis: in a second row of panels the transfer
  // types are then named under each panel, not only under the lowest of its column.
  spec["resolve"] = {{"scale", {{"y", "independent"}}}, {"axis", {{"x", "independent"}}}};
  spec["spacing"] = {{"column", 20}, {"row", 16}};
  return {{"chart-throughput", std::move(spec)}};
}

std::vector<Chart> sweep_charts(const Model& m) {
  struct Param {
    const char* key;
    const char* title;
    const char* axis;
  };
  static constexpr Param params[] = {
      {"block_size", "block size", "block size (bytes, log scale)"},
      {"iodepth", "queue depth", "queue depth (I/Os in flight per thread, log scale)"},
      {"threads", "threads", "threads (log scale)"}};
  std::vector<Chart> out;
  for (const Param& p : params) {
    if (!m.varies.at(p.key)) continue;
    const std::string key = p.key;
    json values = json::array();
    std::set<std::uint64_t> xs;
    for (const Case& c : m.cases) {
      const std::uint64_t x = key == "block_size" ? c.block_size
                              : key == "iodepth"  ? c.iodepth
                                                  : c.threads;
      xs.insert(x);
      // The series: input label, transfer type and every other varying parameter.
      std::string series = multi_series(m) ? c.series : "";
      auto add = [&](const std::string& part) { series += (series.empty() ? "" : " · ") + part; };
      if (m.varies.at("xfer") || series.empty()) add(c.xfer);
      if (m.varies.at("rw")) add(c.rw);
      if (key != "block_size" && m.varies.at("block_size")) add(short_size(c.block_size));
      if (key != "iodepth" && m.varies.at("iodepth")) add(fmt::format("qd{}", c.iodepth));
      if (key != "threads" && m.varies.at("threads")) add(fmt::format("{}t", c.threads));
      values.push_back({{"x", x},
                        {"series", series},
                        {"median", c.median},
                        {"min", c.min},
                        {"max", c.max},
                        {"iops", c.iops_median},
                        {"path", c.path}});
    }
    json x = {{"field", "x"},
              {"type", "quantitative"},
              {"title", p.axis},
              {"scale", {{"type", "log"}, {"base", 2}}},
              {"axis", {{"values", json(std::vector<std::uint64_t>(xs.begin(), xs.end()))}}}};
    if (key == "block_size")
      x["axis"]["labelExpr"] = size_label_expr;
    else
      x["axis"]["format"] = "d";
    for (const bool iops : {false, true}) {
      json spec =
          base(fmt::format("{} vs {}", iops ? "IOPS" : "Throughput", p.title),
               iops ? "median of the rounds" : "median of the rounds; whisker: min to max", values);
      spec["width"] = 460;
      spec["height"] = 280;
      const json y = iops ? json{{"field", "iops"},
                                 {"type", "quantitative"},
                                 {"title", "IOPS (I/Os per second)"}}
                          : json{{"field", "median"},
                                 {"type", "quantitative"},
                                 {"title", "throughput (GiB/s)"}};
      spec["encoding"] = {{"x", x}, {"color", color("series", "series")}};
      spec["layer"] =
          json::array({{{"mark", {{"type", "line"}, {"point", true}, {"tooltip", true}}},
                        {"encoding", {{"y", y}}}}});
      if (!iops) {
        spec["layer"].push_back(
            {{"mark", {{"type", "rule"}}},
             {"encoding",
              {{"y", {{"field", "min"}, {"type", "quantitative"}}}, {"y2", {{"field", "max"}}}}}});
      }
      out.push_back(
          {fmt::format("chart-sweep-{}-{}", key, iops ? "iops" : "gibs"), std::move(spec)});
    }
  }
  return out;
}

std::vector<Chart> latency_charts(const Model& m) {
  json pct = json::array();
  json dist = json::array();
  std::size_t n = 0;
  for (const Case& c : m.cases) {
    if (n++ == max_chart_series) break;
    const std::string s = case_series(m, c);
    const std::pair<const char*, double> points[] = {{"p50", c.latency.p50},
                                                     {"p90", c.latency.p90},
                                                     {"p99", c.latency.p99},
                                                     {"p99.9", c.latency.p999},
                                                     {"max", c.latency.max}};
    int order = 0;
    for (auto [name, us] : points) {
      if (us > 0)
        pct.push_back({{"series", s}, {"percentile", name}, {"order", order}, {"us", us}});
      ++order;
    }
    for (const Latency::Bin& b : c.latency.bins) {
      dist.push_back({{"series", s}, {"lo", b.lo_us}, {"hi", b.hi_us}, {"share", b.share * 100}});
    }
  }
  std::vector<Chart> out;
  const std::string more = m.cases.size() > max_chart_series
                               ? fmt::format("; first {} of {} cases (the table lists all)",
                                             max_chart_series, m.cases.size())
                               : "";
  if (!pct.empty()) {
    json spec = base("Latency percentiles", "per I/O, all rounds merged" + more, std::move(pct));
    spec["width"] = 460;
    spec["height"] = 300;
    spec["mark"] = {{"type", "line"}, {"point", true}, {"tooltip", true}};
    spec["encoding"] = {{"x",
                         {{"field", "percentile"},
                          {"type", "ordinal"},
                          {"sort", {{"field", "order"}}},
                          {"title", "percentile"},
                          {"axis", {{"labelAngle", 0}}}}},
                        {"y",
                         {{"field", "us"},
                          {"type", "quantitative"},
                          {"scale", {{"type", "log"}}},
                          {"title", "latency (µs, log scale)"}}},
                        {"color", color("series", "case")}};
    out.push_back({"chart-latency-percentiles", std::move(spec)});
  }
  if (!dist.empty()) {
    json spec =
        base("Latency distribution",
             "share of I/Os per latency bin (4 bins per doubling), all rounds merged" + more,
             std::move(dist));
    spec["width"] = 460;
    spec["height"] = 300;
    spec["mark"] = {{"type", "line"}, {"interpolate", "step-after"}, {"tooltip", true}};
    spec["encoding"] = {
        {"x",
         {{"field", "lo"},
          {"type", "quantitative"},
          {"scale", {{"type", "log"}}},
          {"title", "latency (µs, log scale)"}}},
        {"y", {{"field", "share"}, {"type", "quantitative"}, {"title", "share of I/Os (%)"}}},
        {"color", color("series", "case")}};
    out.push_back({"chart-latency-distribution", std::move(spec)});
  }
  return out;
}

std::vector<Chart> timeline_charts(const Model& m) {
  json values = json::array();
  std::set<std::string> series;
  for (const Row& r : m.rows) {
    if (r.phase != "run" || !r.error.empty()) continue;
    auto it = r.j->find("samples");
    if (it == r.j->end() || !it->is_array() || it->empty()) continue;
    std::string s = fmt::format("{}{} round {}", multi_series(m) ? r.source->label + " · " : "",
                                r.xfer, r.round);
    // Appended in place: `s += " " + short_size(...)` trips GCC 12's -Wrestrict false positive
    // at -O3 (GCC bug 105329) on the temporary's memcpy.
    if (m.varies.at("block_size"))
      fmt::format_to(std::back_inserter(s), " {}", short_size(r.block_size));
    if (!series.contains(s) && series.size() == max_chart_series) continue;
    series.insert(s);
    for (const json& p : *it) {
      values.push_back({{"series", s},
                        {"t", p.value("t", 0.0)},
                        {"gib_per_s", p.value("gib_per_s", 0.0)},
                        {"iops", p.value("iops", 0.0)}});
    }
  }
  if (values.empty()) return {};
  json spec = base("Throughput over time", "time-bound runs (--time), one sample per interval",
                   std::move(values));
  spec["width"] = 700;
  spec["height"] = 280;
  spec["mark"] = {{"type", "line"}, {"point", true}, {"tooltip", true}};
  spec["encoding"] = {
      {"x",
       {{"field", "t"}, {"type", "quantitative"}, {"title", "time since the run started (s)"}}},
      {"y", {{"field", "gib_per_s"}, {"type", "quantitative"}, {"title", "throughput (GiB/s)"}}},
      {"color", color("series", "run")}};
  return {{"chart-timeline", std::move(spec)}};
}

std::vector<Chart> mpi_charts(const Model& m) {
  std::vector<Chart> out;
  for (const Row& r : m.rows) {
    if (r.phase != "run") continue;
    auto it = r.j->find("mpi");
    if (it == r.j->end() || !it->is_object() || !it->contains("ranks")) continue;
    const json& mpi = *it;
    const json slowest = mpi.value("slowest", json::object());
    const int slow_rank = slowest.value("rank", -1);
    json values = json::array();
    for (const json& rank : mpi["ranks"]) {
      const int id = rank.value("rank", -1);
      values.push_back(
          {{"rank", fmt::format("{} ({})", id, rank.value("host", "?"))},
           {"order", id},
           {"gib_per_s", rank.value("gib_per_s", 0.0)},
           {"iops", rank.value("iops", 0.0)},
           {"role", id == slow_rank ? "slowest rank" : "rank"},
           {"error", rank.contains("error") && rank["error"].is_string() ? rank["error"] : ""}});
    }
    const double med = slowest.value("median_gib_per_s", 0.0);
    json spec = base(
        fmt::format("Per-rank throughput: {}{} {} ({} ranks on {} hosts)",
                    multi_series(m) ? r.source->label + " · " : "", r.xfer,
                    short_size(r.block_size), mpi.value("world_size", 0), mpi.value("hosts", 0)),
        fmt::format("round {}; slowest rank {} is {:.1f}% below the median ({:.3f} "
                    "GiB/s, dashed line)",
                    r.round, slow_rank, slowest.value("gap_pct", 0.0), med),
        std::move(values));
    spec["width"] = std::clamp<std::size_t>(mpi["ranks"].size() * 40, 300, 1000);
    spec["height"] = 260;
    spec["layer"] = json::array(
        {{{"mark", {{"type", "bar"}, {"tooltip", true}}},
          {"encoding",
           {{"x",
             {{"field", "rank"},
              {"type", "ordinal"},
              {"sort", {{"field", "order"}}},
              {"title", "rank (host)"},
              {"axis", {{"labelAngle", -35}}}}},
            {"y",
             {{"field", "gib_per_s"}, {"type", "quantitative"}, {"title", "throughput (GiB/s)"}}},
            {"color",
             {{"field", "role"},
              {"type", "nominal"},
              {"title", ""},
              {"scale", {{"domain", {"rank", "slowest rank"}}, {"range", {"#4c78a8", "#e45756"}}}},
              {"legend", {{"orient", "bottom"}}}}}}}},
         {{"mark", {{"type", "rule"}, {"strokeDash", {6, 4}}, {"color", "#333"}}},
          {"encoding", {{"y", {{"datum", med}, {"type", "quantitative"}}}}}}});
    out.push_back({fmt::format("chart-mpi-{}", out.size()), std::move(spec)});
    if (out.size() == 8) break;  // more would not be read; the table lists every rank
  }
  return out;
}

}  // namespace sluice::report::detail
