// sluice report as a library: what it refuses, what every page holds, and what the charts show
// (series per input, fallbacks, the slowest MPI rank), from small documents built here.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "report/charts.hpp"
#include "report/model.hpp"
#include "report/rerun.hpp"
#include "sluice/error.hpp"
#include "sluice/histogram.hpp"
#include "sluice/tools/bench_report.hpp"
#include "sluice/tools/report.hpp"
#include "support/test_util.hpp"

namespace sluice::report {
namespace {

using nlohmann::json;

json histogram(std::uint64_t base_ns, int n) {
  LatencyHistogram h;
  for (int i = 0; i < n; ++i) h.record(base_ns + static_cast<std::uint64_t>(i) * 1000);
  return json::parse(h.to_json());
}

json result(const std::string& xfer, std::uint64_t bs, double gib, int round,
            const std::string& path = "host", bool fell_back = false) {
  return {{"xfer", xfer},
          {"phase", "run"},
          {"round", round},
          {"path", path},
          {"reason",
           fell_back ? "auto: direct unavailable: libcufile.so.0 not found" : "cpu-only: O_DIRECT"},
          {"fell_back", fell_back},
          {"rw", "read"},
          {"block_size", bs},
          {"threads", 1},
          {"iodepth", 4},
          {"gib_per_s", gib},
          {"iops", gib * 1024},
          {"seconds", 1.0},
          {"error", nullptr},
          {"latency_us", {{"p50", 100}, {"p90", 200}, {"p99", 300}, {"p999", 400}, {"max", 500}}},
          {"latency_histogram_ns", histogram(50000, 100)},
          {"samples", json::array({{{"t", 0.5}, {"gib_per_s", gib}, {"iops", 1}},
                                   {{"t", 1.0}, {"gib_per_s", gib}, {"iops", 1}}})}};
}

json document(json results) {
  return {
      {"tool", "sluice bench"},
      {"schema", bench::report_schema_version},
      {"version", "0.1.0"},
      {"command", "sluice bench --file /mnt/x --compare all"},
      {"finished", "2026-01-01T00:00:00Z"},
      {"config",
       {{"workload",
         {{"files", {"/mnt/x"}},
          {"seed", 1},
          {"direct", true},
          {"time_s", 1.0},
          {"device", "sim"},
          {"memory", nullptr}}},
        {"repeat", 2}}},
      {"system",
       {{"hostname", "h1"}, {"files", json::array({{{"path", "/mnt/x"}, {"fs_type", "ext4"}}})}}},
      {"results", std::move(results)}};
}

Input input(const json& doc, const std::string& label = "a") {
  return {label + ".json", label, doc.dump()};
}

std::string usage_error(const std::string& text) {
  auto e = test::error_of([&] { (void)render_html({{"bad.json", "bad", text}}); });
  if (!e) return {};
  EXPECT_EQ(e->domain(), ErrorDomain::usage);
  EXPECT_NE(std::string(e->what()).find("bad.json"), std::string::npos) << e->what();
  return e->what();
}

std::string fixture(const std::string& name) {
  std::ifstream f(std::string(SLUICE_REPORT_DATA) + "/" + name);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

TEST(Report, RefusesWhatIsNotASluiceResult) {
  EXPECT_NE(usage_error("{ not json").find("not JSON"), std::string::npos);
  EXPECT_NE(usage_error(R"({"fio version": "3.33", "jobs": []})").find("not a sluice bench result"),
            std::string::npos);
  EXPECT_NE(usage_error(R"({"tool": "sluice bench", "results": {}})").find("not an array"),
            std::string::npos);
  EXPECT_NE(usage_error("[1, 2]").find("not a sluice bench result"), std::string::npos);
  auto e = test::error_of([] { (void)render_html({}); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->domain(), ErrorDomain::usage);
}

TEST(Report, RefusesAnotherSchemaAndSaysWhich) {
  json doc = document(json::array({result("cpu-only", 1 << 20, 1.0, 1)}));
  doc["schema"] = bench::report_schema_version + 1;
  const std::string msg = usage_error(doc.dump());
  EXPECT_NE(msg.find(fmt::format("schema {}", bench::report_schema_version + 1)), std::string::npos)
      << msg;
  EXPECT_NE(msg.find(fmt::format("reads schema {}", bench::report_schema_version)),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("newer"), std::string::npos) << msg;
  doc["schema"] = "1";
  EXPECT_NE(usage_error(doc.dump()).find("not an integer"), std::string::npos);
  // Written before "schema" existed: the same layout, read into the page the same document
  // with the schema makes, but for the line that names the schema.
  doc["schema"] = bench::report_schema_version;
  const std::string with_schema = render_html({input(doc)}, {.title = "t", .charts = false});
  doc.erase("schema");
  const std::string page = render_html({input(doc)}, {.title = "t", .charts = false});
  // The page without its "report schema" row, and that row.
  auto split = [](const std::string& p) {
    const std::size_t at = p.find("<tr><td>report schema</td>");
    const std::size_t end = p.find('\n', at);
    EXPECT_NE(at, std::string::npos) << "no report schema row";
    if (at == std::string::npos || end == std::string::npos) return std::pair{p, std::string()};
    return std::pair{p.substr(0, at) + p.substr(end), p.substr(at, end - at)};
  };
  const auto [rest, row] = split(page);
  EXPECT_NE(row.find("(before schema 1)"), std::string::npos) << row;
  EXPECT_EQ(rest, split(with_schema).first);
  EXPECT_NE(page.find("<section id=\"results\">"), std::string::npos);
  EXPECT_NE(page.find("sluice bench --file /mnt/x --xfer cpu-only --rw read --block-size 1048576"),
            std::string::npos);
}

TEST(Report, EveryPageHasEverySectionAndSaysWhetherItHasCharts) {
  const json doc = document(
      json::array({result("cpu-only", 1 << 20, 2.0, 1), result("cpu-only", 1 << 20, 2.4, 2),
                   result("gpu-direct", 1 << 20, 1.5, 1, "bounce", true)}));
  for (const bool charts : {true, false}) {
    const std::string page = render_html({input(doc)}, {.title = "t", .charts = charts});
    for (const char* id :
         {"summary", "throughput", "sweeps", "latency", "timeline", "mpi", "results", "system"}) {
      EXPECT_NE(page.find(fmt::format("<section id=\"{}\">", id)), std::string::npos) << id;
    }
    // The fallback and its reason are on the page, with the command that reruns each result.
    EXPECT_NE(page.find("bounce (fell back)"), std::string::npos);
    EXPECT_NE(page.find("libcufile.so.0 not found"), std::string::npos);
    EXPECT_NE(
        page.find("sluice bench --file /mnt/x --xfer gpu-direct --rw read --block-size 1048576"),
        std::string::npos);
    const bool drawn = charts && chart_library().available;
    EXPECT_EQ(page.find("id=\"tables-only\"") == std::string::npos, drawn);
    EXPECT_EQ(page.find("vegaEmbed(") != std::string::npos, drawn);
    EXPECT_EQ(page.find("data-state=\"tables-only\"") != std::string::npos, !drawn);
  }
  if (!chart_library().available) {
    EXPECT_FALSE(chart_library().missing.empty());
  }
}

TEST(Report, MarkupInTheInputCannotBreakThePage) {
  json doc = document(json::array({result("cpu-only", 4096, 1.0, 1)}));
  doc["command"] = "sluice bench --file '</script><script>alert(1)</script>'";
  const std::string page = render_html({input(doc, "<b>x</b>")});
  EXPECT_EQ(page.find("<script>alert(1)"), std::string::npos);
  EXPECT_EQ(page.find("<b>x</b>"), std::string::npos);
}

TEST(Report, RepeatsGiveMedianAndSpreadAndMergedLatency) {
  const json doc =
      document(json::array({result("cpu-only", 4096, 1.0, 1), result("cpu-only", 4096, 3.0, 2),
                            result("cpu-only", 4096, 2.0, 3)}));
  const detail::Model m = detail::build_model({input(doc)});
  ASSERT_EQ(m.cases.size(), 1U);
  EXPECT_DOUBLE_EQ(m.cases[0].median, 2.0);
  EXPECT_DOUBLE_EQ(m.cases[0].min, 1.0);
  EXPECT_DOUBLE_EQ(m.cases[0].max, 3.0);
  EXPECT_TRUE(m.cases[0].latency.from_histogram);
  EXPECT_EQ(m.cases[0].latency.count, 300U);
  double share = 0;
  for (const auto& b : m.cases[0].latency.bins) share += b.share;
  EXPECT_NEAR(share, 1.0, 1e-9);
  // 50..149 us recorded: the median is near 100 us.
  EXPECT_NEAR(m.cases[0].latency.p50, 100, 2);
}

TEST(Report, TwoBackEndsSitSideBySideInEveryChart) {
  json a = json::array(), b = json::array();
  for (std::uint64_t bs : {4096U, 65536U, 1048576U}) {
    a.push_back(result("cpu-only", bs, 1.0, 1));
    b.push_back(result("cpu-only", bs, 0.5, 1));
  }
  const detail::Model m =
      detail::build_model({input(document(a), "nvme"), input(document(b), "nfs")});
  std::vector<detail::Chart> all = detail::throughput_charts(m);
  for (auto* make : {&detail::sweep_charts, &detail::latency_charts, &detail::timeline_charts}) {
    for (auto& c : make(m)) all.push_back(std::move(c));
  }
  ASSERT_EQ(all.size(), 6U);  // throughput, 2 sweep, 2 latency, timeline
  for (const auto& c : all) {
    bool nvme = false, nfs = false;
    for (const json& v : c.spec["data"]["values"]) {
      const std::string s = v["series"];
      nvme = nvme || s.find("nvme") != std::string::npos;
      nfs = nfs || s.find("nfs") != std::string::npos;
    }
    EXPECT_TRUE(nvme && nfs) << c.id;
    EXPECT_TRUE(c.spec.contains("title")) << c.id;
  }
  EXPECT_EQ(all[1].id, "chart-sweep-block_size-gibs");
  EXPECT_EQ(all[1].spec["encoding"]["x"]["title"], "block size (bytes, log scale)");
}

TEST(Report, TimelineSeriesNameTheBlockSizeWhereItVaries) {
  const json runs =
      json::array({result("cpu-only", 4096, 1.0, 1), result("cpu-only", 1048576, 1.0, 2)});
  const auto charts = detail::timeline_charts(detail::build_model({input(document(runs))}));
  ASSERT_EQ(charts.size(), 1U);
  std::set<std::string> series;
  for (const json& v : charts[0].spec["data"]["values"]) series.insert(v["series"]);
  EXPECT_EQ(series, (std::set<std::string>{"cpu-only round 1 4K", "cpu-only round 2 1M"}));
}

TEST(Report, NoSweepWithoutAVaryingParameter) {
  const detail::Model m =
      detail::build_model({input(document(json::array({result("cpu-only", 4096, 1.0, 1)})))});
  EXPECT_TRUE(detail::sweep_charts(m).empty());
  EXPECT_TRUE(detail::mpi_charts(m).empty());
}

TEST(Report, FilesSharingALabelFormOneSeries) {
  json one = document(json::array({result("cpu-only", 65536, 1.0, 1)}));
  json four = one;
  four["results"][0]["iodepth"] = 16;
  const detail::Model m = detail::build_model({input(one, "tmpfs"), input(four, "tmpfs")});
  const auto sweeps = detail::sweep_charts(m);
  ASSERT_EQ(sweeps.size(), 2U);
  EXPECT_EQ(sweeps[0].id, "chart-sweep-iodepth-gibs");
  const auto& v = sweeps[0].spec["data"]["values"];
  ASSERT_EQ(v.size(), 2U);
  EXPECT_EQ(v[0]["series"], v[1]["series"]);
}

TEST(Report, MpiRanksWithTheSlowestMarked) {
  const std::string text = fixture("mpi.json");
  ASSERT_FALSE(text.empty());
  const detail::Model m = detail::build_model({{"mpi.json", "mpi", text}});
  const auto charts = detail::mpi_charts(m);
  ASSERT_EQ(charts.size(), 1U);
  int slowest = 0;
  for (const json& v : charts[0].spec["data"]["values"]) {
    if (v["role"] == "slowest rank") {
      ++slowest;
      EXPECT_EQ(v["order"], 5);
    }
  }
  EXPECT_EQ(slowest, 1);
  const std::string page = render_html({{"mpi.json", "mpi", text}});
  EXPECT_NE(page.find("<tr class=\"slow\"><td class=\"n\">5</td>"), std::string::npos);
  EXPECT_NE(page.find("Stonewall (first-done)"), std::string::npos);
}

TEST(Report, ReadInputsLabelsFilesByName) {
  test::TempDir dir("/tmp");
  const std::string path = dir.file("ext4-run.json");
  std::ofstream(path) << document(json::array()).dump();
  const auto in = read_inputs({path});
  ASSERT_EQ(in.size(), 1U);
  EXPECT_EQ(in[0].label, "ext4-run");
  EXPECT_EQ(read_inputs({path}, {"nvme"})[0].label, "nvme");
  auto e = test::error_of([&] { (void)read_inputs({path}, {"a", "b"}); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->domain(), ErrorDomain::usage);
  e = test::error_of([&] { (void)read_inputs({dir.file("missing.json")}); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->domain(), ErrorDomain::usage);
}

TEST(Report, WriteHtmlLeavesTheWholePage) {
  test::TempDir dir("/tmp");
  const std::string out = dir.file("r.html");
  write_html(out, {input(document(json::array({result("cpu-only", 4096, 1.0, 1)})))});
  std::ifstream f(out);
  const std::string page{std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
  EXPECT_EQ(page.rfind("</html>\n"), page.size() - 8);
  EXPECT_FALSE(std::filesystem::exists(out + ".tmp"));
}

// Issue 37: the page cache state each row started in, as sluice bench measured it; a case says
// the state its rounds share, or the first round that did not hold it.
TEST(Report, EachRowAndCaseSaysItsCacheState) {
  auto with_cache = [](json r, const std::string& state, bool held, const std::string& label) {
    r["cache"] = {{"state", state}, {"held", held}, {"label", label}, {"rewarmed", false}};
    return r;
  };
  json doc = document(json::array({with_cache(result("cpu-gpu", 1 << 20, 2.0, 1), "cold", true, "cold 0%"),
                                    with_cache(result("cpu-only", 1 << 20, 3.0, 1), "cold", true, "cold 0%"),
                                    with_cache(result("cpu-gpu", 1 << 20, 9.0, 2), "cold", false, "NOT cold 37%"),
                                    with_cache(result("cpu-only", 1 << 20, 3.1, 2), "cold", true, "cold 1%")}));
  doc["config"]["cache"] = "warm";
  const std::vector<Input> in{input(doc)};
  const detail::Model m = detail::build_model(in);
  ASSERT_EQ(m.cases.size(), 2U);
  EXPECT_EQ(m.cases[0].cache, "NOT cold 37%");
  EXPECT_EQ(m.cases[1].cache, "cold");
  EXPECT_NE(detail::rerun_command(m.rows[0]).find(" --warm"), std::string::npos);
  const std::string page = render_html(in, {.title = "t", .charts = false});
  for (const char* cell : {"<td>NOT cold 37%</td>", "<td>cold 0%</td>", "<td>cold 1%</td>", "<td>cold</td>"}) {
    EXPECT_NE(page.find(cell), std::string::npos) << cell;
  }
  // Written before rows carried it: no state claimed.
  const std::vector<Input> old{input(document(json::array({result("cpu-only", 1 << 20, 1.0, 1)})))};
  const detail::Model om = detail::build_model(old);
  EXPECT_EQ(om.cases[0].cache, "");
  EXPECT_EQ(detail::rerun_command(om.rows[0]).find("--warm"), std::string::npos);
}

// Issue 37: a --compare all sweep draws one panel per block size (not 35 bars in a row that
// scrolls sideways), says the cache state in a legend, and lists each reason once with the
// cases that share it.
TEST(Report, ACompareSweepIsOnePanelPerBlockSizeAndEachReasonOnce) {
  json results = json::array();
  for (std::uint64_t bs : {4096U, 65536U, 1048576U}) {
    for (const char* xfer : {"cpu-only", "gpu-direct", "cpu-gpu"}) {
      json r = result(xfer, bs, 1.0, 1, xfer == std::string("gpu-direct") ? "bounce" : "host",
                      xfer == std::string("gpu-direct"));
      r["cache"] = {{"state", "cold"}, {"held", true}, {"label", "cold 0%"}, {"rewarmed", false}};
      results.push_back(std::move(r));
    }
  }
  const std::vector<Input> in{input(document(results))};
  const detail::Model m = detail::build_model(in);
  const auto charts = detail::throughput_charts(m);
  ASSERT_EQ(charts.size(), 1U);
  const json& spec = charts[0].spec;
  ASSERT_TRUE(spec.contains("facet")) << spec.dump(1);
  EXPECT_EQ(spec["facet"]["field"], "panel");
  EXPECT_EQ(spec["facet"]["sort"], json({"4K", "64K", "1M"}));
  EXPECT_EQ(spec["facet"]["title"], "block size");
  // Within the page's 1200 px with room for each panel's axis.
  EXPECT_LE(spec["columns"].get<int>() * (spec["spec"]["width"].get<int>() + 70), 1200);
  EXPECT_EQ(spec["spec"]["encoding"]["x"]["field"], "xfer");
  const json& bar = spec["spec"]["layer"][0]["encoding"];
  EXPECT_EQ(bar["color"]["field"], "path");
  EXPECT_EQ(bar["opacity"]["title"], "page cache at the start of each run");
  ASSERT_EQ(bar["opacity"]["scale"]["domain"].size(), 1U);
  EXPECT_EQ(bar["opacity"]["scale"]["domain"][0].get<std::string>().rfind("cold", 0), 0U);

  // One reason per (path, reason): the fallback first, with every block size it happened at.
  ASSERT_EQ(m.reasons.size(), 2U);
  EXPECT_TRUE(m.reasons[0].fell_back);
  EXPECT_EQ(detail::reason_cases(m, m.reasons[0]),
            std::vector<std::string>{"gpu-direct: 4K, 64K, 1M"});
  EXPECT_EQ(detail::reason_cases(m, m.reasons[1]),
            (std::vector<std::string>{"cpu-only: 4K, 64K, 1M", "cpu-gpu: 4K, 64K, 1M"}));
  const std::string page = render_html(in, {.title = "t", .charts = false});
  const std::string why = "auto: direct unavailable: libcufile.so.0 not found";
  EXPECT_EQ(page.find(why), page.rfind(why)) << "the reason more than once on the page";
  EXPECT_NE(page.find(fmt::format("<tr id=\"reason-1\"><td>R1</td><td><span class=\"fb\">bounce "
                                  "(fell back)</span></td><td>{}</td><td>gpu-direct: 4K, 64K, "
                                  "1M</td></tr>",
                                  why)),
            std::string::npos);
  EXPECT_NE(page.find("<td><a href=\"#reason-1\">R1</a></td>"), std::string::npos);
}

// One setting: no panels, one bar per transfer type; a cold and a warm input told apart.
TEST(Report, OneSettingIsOneChartAndMixedCacheStatesEachHaveAnEntry) {
  json cold =
      document(json::array({result("cpu-only", 4096, 1.0, 1), result("cpu-gpu", 4096, 2.0, 1)}));
  json warm = cold;
  for (json& r : cold["results"])
    r["cache"] = {{"state", "cold"}, {"held", true}, {"label", "cold 0%"}};
  for (json& r : warm["results"])
    r["cache"] = {{"state", "warm"}, {"held", true}, {"label", "warm 100%"}};
  const detail::Model m = detail::build_model({input(cold, "cold"), input(warm, "warm")});
  const auto charts = detail::throughput_charts(m);
  ASSERT_EQ(charts.size(), 1U);
  EXPECT_FALSE(charts[0].spec.contains("facet"));
  EXPECT_EQ(charts[0].spec["encoding"]["x"]["field"], "case");
  const json& opacity = charts[0].spec["layer"][0]["encoding"]["opacity"];
  ASSERT_EQ(opacity["scale"]["domain"].size(), 2U);
  EXPECT_EQ(opacity["scale"]["range"], json({1.0, 0.5}));
}

TEST(Report, ShellQuote) {
  EXPECT_EQ(detail::shell_quote("/mnt/a.bin"), "/mnt/a.bin");
  EXPECT_EQ(detail::shell_quote("a b"), "'a b'");
  EXPECT_EQ(detail::shell_quote("it's"), "'it'\\''s'");
}

}  // namespace
}  // namespace sluice::report
