// `sluice report` as a command: exit codes (2 for input that is not a readable sluice result),
// the page it writes, and that the rerun command it prints for a result is one `sluice bench`
// accepts and plans the same way.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "support/test_util.hpp"

namespace sluice::test {
namespace {

class ReportCli : public ::testing::Test {
 protected:
  CliRun sluice(const std::string& args) {
    return run_captured(SLUICE_CLI_PATH, args, dir_.path());
  }
  CleanSluiceEnv clean_;
  TempDir dir_{"/var/tmp", "sluice-report-cli-"};
};

TEST_F(ReportCli, BadInputExitsTwoWithTheReason) {
  const std::string bad = dir_.file("fio.json");
  std::ofstream(bad) << R"({"fio version": "fio-3.33", "jobs": []})";
  CliRun r = sluice("report " + shell_quote(bad) + " --out " + shell_quote(dir_.file("r.html")));
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("not a sluice bench result"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir_.file("r.html")));
  r = sluice("report " + shell_quote(dir_.file("missing.json")));
  EXPECT_EQ(r.rc, 2);
  r = sluice(fmt::format("report {}/mpi.json --label a --label b", SLUICE_REPORT_DATA));
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("2 labels for 1 files"), std::string::npos) << r.err;
}

TEST_F(ReportCli, WritesThePageAndARerunCommandBenchAccepts) {
  const std::string data = dir_.file("data.bin"), json = dir_.file("run.json"),
                    out = dir_.file("r.html");
  CliRun r =
      sluice(fmt::format("bench --file {} --size 1M --block-size 64K:128K:x2 --iodepth 2 --json {}",
                         shell_quote(data), shell_quote(json)));
  ASSERT_EQ(r.rc, 0) << r.err;
  r = sluice(fmt::format("report {} --out {} --title 'two block sizes'", shell_quote(json),
                         shell_quote(out)));
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("wrote " + out), std::string::npos) << r.out;
  std::ifstream f(out);
  const std::string page{std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
  EXPECT_NE(page.find("<title>two block sizes</title>"), std::string::npos);
  // The 128K result's rerun command, run with --print-plan, plans that one case.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      page, m, std::regex("<code>sluice bench ([^<]*--block-size 131072[^<]*)</code>")));
  r = sluice("bench " + m[1].str() + " --print-plan");
  ASSERT_EQ(r.rc, 0) << m[1].str() << "\n" << r.err;
  const auto plan = nlohmann::json::parse(r.out);
  EXPECT_EQ(plan["workload"]["block_size"], 131072);
  EXPECT_EQ(plan["workload"]["iodepth"], 2);
  EXPECT_EQ(plan["workload"]["xfer"], "cpu-only");
  // --tables-only: no script at all.
  r = sluice(fmt::format("report {} --out {} --tables-only", shell_quote(json), shell_quote(out)));
  ASSERT_EQ(r.rc, 0) << r.err;
  std::ifstream g(out);
  const std::string tables{std::istreambuf_iterator<char>(g), std::istreambuf_iterator<char>()};
  EXPECT_EQ(tables.find("<script"), std::string::npos);
  EXPECT_NE(tables.find("id=\"tables-only\""), std::string::npos);
}

TEST_F(ReportCli, BenchWritesTheSamePageWithReport) {
  const std::string data = dir_.file("data.bin"), json = dir_.file("run.json"),
                    page_path = dir_.file("bench.html");
  CliRun r = sluice(fmt::format("bench --file {} --size 1M --block-size 64K --json {} --report {}",
                                shell_quote(data), shell_quote(json), shell_quote(page_path)));
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.err.find("wrote the report " + page_path), std::string::npos) << r.err;
  std::ifstream f(page_path);
  const std::string page{std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
  EXPECT_NE(page.find("<html"), std::string::npos);
  EXPECT_NE(page.find("--block-size 65536"), std::string::npos) << "the rerun command of the run";
  // A report path that cannot be written fails the run with a message, after the JSON is saved.
  r = sluice(fmt::format("bench --file {} --size 1M --block-size 64K --json {} --report {}",
                         shell_quote(data), shell_quote(json), shell_quote(dir_.file("no/such/dir/r.html"))));
  EXPECT_EQ(r.rc, 1) << r.err;
  EXPECT_TRUE(std::filesystem::exists(json));
}

}  // namespace
}  // namespace sluice::test
