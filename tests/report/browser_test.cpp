// The report in a real browser (issue 9): headless Chromium opens pages made by the built
// `sluice report` from a block-size sweep on two back ends (disk and tmpfs, side by side), a
// `--compare all --repeat 2` time-bound run, a `--compare all` sweep over five block sizes
// (issue 37: the first chart one panel per block size with the cache state in its legend, each
// fallback reason listed once with its cases), and the MPI fixture. It fails on a script error
// (window errors, rejected promises and console.error, which the page records, and any
// "Uncaught" Chromium logs), on a chart that drew no marks, on a missing section or chart, and on
// a page or chart that scrolls sideways in a 1400 px wide window; it saves a screenshot of each
// page under the build tree (report-screenshots/). When the build could not fetch the charting
// library it checks the tables-only page instead and says so. Skips without Chromium (fails under
// SLUICE_TEST_STRICT=1).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "support/test_util.hpp"

namespace sluice::test {
namespace {

using nlohmann::json;

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

std::string chromium() {
  for (const char* name : {"chromium", "chromium-browser", "google-chrome"}) {
    if (have_program(name)) return name;
  }
  return {};
}

std::string unescape(std::string s) {
  const std::pair<const char*, const char*> entities[] = {
      {"&quot;", "\""}, {"&lt;", "<"}, {"&gt;", ">"}, {"&amp;", "&"}};
  for (auto [from, to] : entities) {
    for (std::size_t p = 0; (p = s.find(from, p)) != std::string::npos;
         p += std::string_view(to).size()) {
      s.replace(p, std::string_view(from).size(), to);
    }
  }
  return s;
}

// "4K", "1M": block sizes as the report writes them.
std::string short_size(std::uint64_t bytes) {
  static constexpr const char* units[] = {"", "K", "M", "G"};
  int u = 0;
  while (bytes >= 1024 && bytes % 1024 == 0 && u < 3) {
    bytes /= 1024;
    ++u;
  }
  return fmt::format("{}{}", bytes, units[u]);
}

// The rows of the dumped DOM's table with this id, each a list of its cells' text (tags
// dropped, a <br> a newline, entities decoded); the heading row has no <td> and is left out.
std::vector<std::vector<std::string>> table_rows(const std::string& html, const std::string& id) {
  std::vector<std::vector<std::string>> rows;
  const std::size_t at = html.find(fmt::format("<table id=\"{}\">", id));
  if (at == std::string::npos) return rows;
  const std::string table = html.substr(at, html.find("</table>", at) - at);
  const std::regex tr("<tr[^>]*>([\\s\\S]*?)</tr>"), td("<td[^>]*>([\\s\\S]*?)</td>");
  for (std::sregex_iterator r(table.begin(), table.end(), tr), end; r != end; ++r) {
    const std::string row = (*r)[1];
    std::vector<std::string> cells;
    for (std::sregex_iterator c(row.begin(), row.end(), td); c != end; ++c) {
      std::string text = std::regex_replace((*c)[1].str(), std::regex("<br>"), "\n");
      cells.push_back(unescape(std::regex_replace(text, std::regex("<[^>]*>"), "")));
    }
    if (!cells.empty()) rows.push_back(std::move(cells));
  }
  return rows;
}

class ReportBrowser : public ::testing::Test {
 protected:
  void SetUp() override {
    browser_ = chromium();
    if (browser_.empty()) {
      const std::string why = "no chromium on PATH (Debian package chromium; make deps installs it)";
      // The marker makes CTest count the program as skipped: not where it is to fail.
      if (!strict_mode()) std::printf("SLUICE_TEST_SKIPPED: %s\n", why.c_str());
      SLUICE_SKIP_OR_FAIL(why);
    }
    std::filesystem::create_directories(shots_);
  }

  CliRun sluice(const std::string& args) {
    return run_captured(SLUICE_CLI_PATH, args, dir_.path());
  }

  // The browser flags every run shares: as root Chromium needs --no-sandbox; virtual time lets
  // the page finish its asynchronous chart rendering before the dump or the screenshot.
  std::string browser(const std::string& extra, const std::string& page) {
    return fmt::format(
        "{} --headless --no-sandbox --disable-gpu --no-first-run --hide-scrollbars "
        "--disable-extensions --mute-audio --virtual-time-budget=20000 {} {}",
        browser_, extra, shell_quote("file://" + page));
  }

  // Opens the page in a window `width` px wide, checks it and saves its screenshot; keeps the
  // DOM after the charts ran in dom_. `charts`: ids the page must draw.
  void check_page(const std::string& name, const std::vector<std::string>& charts) {
    SCOPED_TRACE(name);
    const std::string page = dir_.file(name + ".html");
    const std::string dom = dir_.file(name + ".dom"), log = dir_.file(name + ".log");
    ASSERT_EQ(shell(browser(fmt::format("--window-size={},900 --enable-logging=stderr --v=0 "
                                        "--dump-dom",
                                        width),
                            page) +
                    " >" + dom + " 2>" + log),
              0);
    dom_ = slurp(dom);
    const std::string& html = dom_;
    for (const char* id :
         {"summary", "throughput", "sweeps", "latency", "timeline", "mpi", "results", "system"}) {
      EXPECT_NE(html.find(fmt::format("<section id=\"{}\">", id)), std::string::npos)
          << "section " << id;
    }
    // Errors thrown before the page's hooks ran (say, in the inlined library) only reach the log.
    std::string line;
    std::ifstream logf(log);
    while (std::getline(logf, line)) {
      EXPECT_EQ(line.find("Uncaught"), std::string::npos) << line;
    }
    std::smatch m;
    ASSERT_TRUE(std::regex_search(
        html, m,
        std::regex("<pre id=\"sluice-status\"[^>]*data-state=\"([a-z-]+)\"[^>]*>([^<]*)</pre>")))
        << "no #sluice-status in the page";
    if (!charts_built_) {
      EXPECT_EQ(m[1].str(), "tables-only");
      EXPECT_NE(html.find("id=\"tables-only\""), std::string::npos)
          << "the page must say it has no charts";
    } else {
      ASSERT_EQ(m[1].str(), "done") << "the charts did not finish within the virtual time budget";
      status_ = json::parse(unescape(m[2].str()));
      EXPECT_TRUE(status_["errors"].empty()) << status_["errors"].dump(1);
      std::set<std::string> drawn;
      for (const json& c : status_["charts"]) {
        EXPECT_GT(c["marks"].get<int>(), 0) << c["id"] << " drew nothing";
        drawn.insert(c["id"].get<std::string>());
        // Nothing scrolls sideways at this width: not a chart in its box...
        EXPECT_LE(c.value("scrollWidth", 1 << 30), c.value("clientWidth", 0))
            << c["id"] << " scrolls sideways at " << width << " px";
      }
      for (const auto& id : charts) EXPECT_TRUE(drawn.contains(id)) << "missing chart " << id;
      // ...nor the page.
      EXPECT_LE(status_["page"].value("scrollWidth", 1 << 30),
                status_["page"].value("clientWidth", 0))
          << "the page scrolls sideways at " << width << " px";
    }
    const std::string png = shots_ + "/" + name + ".png";
    std::filesystem::remove(png);
    ASSERT_EQ(
        shell(browser(fmt::format("--window-size={},2600 --screenshot={}", width, shell_quote(png)),
                      page) +
              " >/dev/null 2>&1"),
        0);
    ASSERT_TRUE(std::filesystem::exists(png));
    EXPECT_GT(std::filesystem::file_size(png), 20000U) << "a blank screenshot?";
    std::printf("screenshot: %s\n", png.c_str());
  }

  // The --compare all sweep's first chart and reasons (issue 37): one panel per block size, the
  // cache state in the legend, and each distinct reason once with every case that has it.
  void check_compare_sweep(const std::string& json_path) {
    const json doc = json::parse(slurp(json_path));
    std::vector<std::string> sizes;
    std::set<std::string> caches;
    // reason -> transfer type -> its block sizes with that reason, in order
    std::map<std::string, std::map<std::string, std::vector<std::string>>> reasons;
    for (const json& r : doc["results"]) {
      if (r.value("phase", "run") != "run" || !r["error"].is_null()) continue;
      const std::string bs = short_size(r["block_size"].get<std::uint64_t>());
      if (std::find(sizes.begin(), sizes.end(), bs) == sizes.end()) sizes.push_back(bs);
      caches.insert(r["cache"]["state"].get<std::string>());
      reasons[r["reason"].get<std::string>()][r["xfer"].get<std::string>()].push_back(bs);
    }
    ASSERT_EQ(sizes.size(), 5U);
    ASSERT_EQ(caches, std::set<std::string>{"cold"}) << "sluice bench runs cold by default";
    if (charts_built_) {
      const auto chart = std::find_if(status_["charts"].begin(), status_["charts"].end(),
                                      [](const json& c) { return c["id"] == "chart-throughput"; });
      ASSERT_NE(chart, status_["charts"].end());
      EXPECT_EQ((*chart)["panels"], 5) << "one panel per block size";
      const std::string legend = (*chart)["legend"].dump();
      EXPECT_NE(legend.find("page cache"), std::string::npos) << legend;
      EXPECT_NE(legend.find("cold"), std::string::npos) << "the cache state is not in " << legend;
    }
    // The cases table refers to reasons; the reasons table holds each once, with its cases.
    const auto cases = table_rows(dom_, "cases");
    EXPECT_EQ(cases.size(), 35U);
    const auto listed = table_rows(dom_, "reasons");
    EXPECT_EQ(listed.size(), reasons.size());
    bool shared = false;
    for (const auto& [reason, xfers] : reasons) {
      SCOPED_TRACE(reason);
      for (const auto& row : cases) {
        for (const auto& cell : row) EXPECT_EQ(cell.find(reason), std::string::npos) << cell;
      }
      int found = 0;
      for (const auto& row : listed) {
        ASSERT_EQ(row.size(), 4U);
        if (row[2] != reason) continue;
        ++found;
        std::set<std::string> lines, want;
        std::istringstream in(row[3]);
        for (std::string line; std::getline(in, line);) lines.insert(line);
        for (const auto& [xfer, bs] : xfers) {
          want.insert(fmt::format("{}: {}", xfer, fmt::join(bs, ", ")));
          shared = shared || bs.size() > 1;
        }
        EXPECT_EQ(lines, want) << "the cases that share the reason, one line per transfer type";
      }
      EXPECT_EQ(found, 1) << "each distinct reason once in the reasons table";
    }
    EXPECT_TRUE(shared) << "no reason shared by several block sizes: nothing was merged";
  }

  std::string browser_;
  TempDir dir_{"/var/tmp", "sluice-report-test-"};
  std::string shots_ = std::string(SLUICE_REPORT_SHOTS);
  bool charts_built_ = false;
  int width = 1400;  ///< the window's width: a common laptop screen
  std::string dom_;  ///< the last page's DOM after its scripts ran
  json status_;      ///< the last page's #sluice-status
};

TEST_F(ReportBrowser, SweepCompareAndMpiReportsDrawEveryChart) {
  CleanSluiceEnv clean;
  // Two back ends for the sweep: this folder (a disk filesystem) and tmpfs.
  std::vector<std::string> files = {dir_.file("data.bin")};
  std::string why;
  TempDir* tmpfs = nullptr;
  std::optional<TempDir> shm;
  if (auto root = folder_root(Folder::tmpfs, &why)) {
    shm.emplace(*root, "sluice-report-test-");
    tmpfs = &*shm;
    files.push_back(tmpfs->file("data.bin"));
  }
  std::vector<std::string> sweeps;
  for (const auto& f : files) {
    const std::string out = f + ".json";
    const CliRun r =
        sluice(fmt::format("bench --file {} --size 8M --block-size 4K:1M:x4 --iodepth 4 --json {}",
                           shell_quote(f), shell_quote(out)));
    ASSERT_EQ(r.rc, 0) << r.err;
    sweeps.push_back(out);
  }
  const std::string compare = dir_.file("compare.json");
  CliRun r = sluice(
      fmt::format("bench --file {} --size 8M --compare all --block-size 1M --iodepth 4 --time 0.3 "
                  "--sample-interval 0.1 --repeat 2 --device sim --json {}",
                  shell_quote(files[0]), shell_quote(compare)));
  ASSERT_EQ(r.rc, 0) << r.err;

  // Every transfer type at five block sizes, as `make demo` and users run it: the first chart
  // must stay readable (issue 37).
  const std::string compare_sweep = dir_.file("compare-sweep.json");
  r =
      sluice(fmt::format("bench --file {} --size 4M --compare all --block-size 4K:1M:x4 "
                         "--iodepth 4 --device sim --json {}",
                         shell_quote(files[0]), shell_quote(compare_sweep)));
  ASSERT_EQ(r.rc, 0) << r.err;

  std::string sweep_args = fmt::format("report {} --label disk", shell_quote(sweeps[0]));
  if (sweeps.size() > 1) sweep_args += fmt::format(" {} --label tmpfs", shell_quote(sweeps[1]));
  r = sluice(sweep_args + " --out " + shell_quote(dir_.file("sweep.html")));
  ASSERT_EQ(r.rc, 0) << r.err;
  charts_built_ = r.out.find("charts and tables") != std::string::npos;
  if (!charts_built_) {
    std::printf(
        "NOTE: this sluice was built without the charting library (%s): checking the "
        "tables-only report instead\n",
        r.out.c_str());
  }
  r = sluice("report " + shell_quote(compare) + " --out " + shell_quote(dir_.file("compare.html")));
  ASSERT_EQ(r.rc, 0) << r.err;
  r = sluice("report " + shell_quote(compare_sweep) + " --out " +
             shell_quote(dir_.file("compare-sweep.html")));
  ASSERT_EQ(r.rc, 0) << r.err;
  r = sluice(fmt::format("report {}/mpi.json --out {}", SLUICE_REPORT_DATA,
                         shell_quote(dir_.file("mpi.html"))));
  ASSERT_EQ(r.rc, 0) << r.err;

  check_page("sweep",
             {"chart-throughput", "chart-sweep-block_size-gibs", "chart-sweep-block_size-iops",
              "chart-latency-percentiles", "chart-latency-distribution"});
  check_page("compare", {"chart-throughput", "chart-latency-percentiles",
                         "chart-latency-distribution", "chart-timeline"});
  check_page("mpi", {"chart-throughput", "chart-mpi-0", "chart-timeline"});
  check_page("compare-sweep",
             {"chart-throughput", "chart-sweep-block_size-gibs", "chart-sweep-block_size-iops"});
  check_compare_sweep(compare_sweep);
}

}  // namespace
}  // namespace sluice::test
