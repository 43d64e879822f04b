// The report in a real browser (issue 9): headless Chromium opens pages made by the built
// `sluice report` from a block-size sweep on two back ends (disk and tmpfs, side by side), a
// `--compare all --repeat 2` time-bound run, and the MPI fixture. It fails on a script error
// (window errors, rejected promises and console.error, which the page records, and any
// "Uncaught" Chromium logs), on a chart that drew no marks, and on a missing section or chart;
// it saves a screenshot of each page under the build tree (report-screenshots/). When the build
// could not fetch the charting library it checks the tables-only page instead and says so.
// Skips without Chromium (fails under SLUICE_TEST_STRICT=1).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <set>

#include <fmt/format.h>
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

  // Opens the page, checks it, saves its screenshot. `charts`: ids the page must draw.
  void check_page(const std::string& name, const std::vector<std::string>& charts) {
    SCOPED_TRACE(name);
    const std::string page = dir_.file(name + ".html");
    const std::string dom = dir_.file(name + ".dom"), log = dir_.file(name + ".log");
    ASSERT_EQ(
        shell(browser("--enable-logging=stderr --v=0 --dump-dom", page) + " >" + dom + " 2>" + log),
        0);
    const std::string html = slurp(dom);
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
      const json status = json::parse(unescape(m[2].str()));
      EXPECT_TRUE(status["errors"].empty()) << status["errors"].dump(1);
      std::set<std::string> drawn;
      for (const json& c : status["charts"]) {
        EXPECT_GT(c["marks"].get<int>(), 0) << c["id"] << " drew nothing";
        drawn.insert(c["id"].get<std::string>());
      }
      for (const auto& id : charts) EXPECT_TRUE(drawn.contains(id)) << "missing chart " << id;
    }
    const std::string png = shots_ + "/" + name + ".png";
    std::filesystem::remove(png);
    ASSERT_EQ(shell(browser("--window-size=1280,2600 --screenshot=" + shell_quote(png), page) +
                    " >/dev/null 2>&1"),
              0);
    ASSERT_TRUE(std::filesystem::exists(png));
    EXPECT_GT(std::filesystem::file_size(png), 20000U) << "a blank screenshot?";
    std::printf("screenshot: %s\n", png.c_str());
  }

  std::string browser_;
  TempDir dir_{"/var/tmp", "sluice-report-test-"};
  std::string shots_ = std::string(SLUICE_REPORT_SHOTS);
  bool charts_built_ = false;
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
  r = sluice(fmt::format("report {}/mpi.json --out {}", SLUICE_REPORT_DATA,
                         shell_quote(dir_.file("mpi.html"))));
  ASSERT_EQ(r.rc, 0) << r.err;

  check_page("sweep",
             {"chart-throughput", "chart-sweep-block_size-gibs", "chart-sweep-block_size-iops",
              "chart-latency-percentiles", "chart-latency-distribution"});
  check_page("compare", {"chart-throughput", "chart-latency-percentiles",
                         "chart-latency-distribution", "chart-timeline"});
  check_page("mpi", {"chart-throughput", "chart-mpi-0", "chart-timeline"});
}

}  // namespace
}  // namespace sluice::test
