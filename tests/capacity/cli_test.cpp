// `sluice plan` as a user runs it: the 10,000-GPU case of docs/scale.md, --json, --measured with
// a bench report, and bad inputs exiting 2 with a message.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "support/test_util.hpp"

#ifndef SLUICE_CLI_PATH
#error "SLUICE_CLI_PATH must name the built sluice binary"
#endif

namespace sluice {
namespace {

class PlanCli : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = std::make_unique<test::TempDir>("/var/tmp", "sluice-plan-cli-"); }
  test::CliRun plan(const std::string& args) {
    return test::run_captured(SLUICE_CLI_PATH, "plan " + args, dir_->path());
  }
  std::unique_ptr<test::TempDir> dir_;
  test::CleanSluiceEnv clean_;
};

constexpr const char* scale_case =
    "--gpus 10000 --per-step 1GB --step-time 8 --server-bandwidth 25GB/s";

TEST_F(PlanCli, TenThousandGpus) {
  auto r = plan(std::string(scale_case) + " --storage-servers 40");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("1.25 TB/s in all"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("does NOT fit: storage servers needs 1.25 TB/s but carries 1 TB/s (125%)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("feed at most 8000 GPUs"), std::string::npos) << r.out;
  r = plan(std::string(scale_case) + " --storage-servers 60 --json");
  ASSERT_EQ(r.rc, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["fits"].get<bool>());
  EXPECT_EQ(j["bottleneck"]["name"], "storage servers");
  EXPECT_DOUBLE_EQ(j["total_bytes_per_s"].get<double>(), 1.25e12);
  EXPECT_EQ(j["nodes"], 1250);
}

TEST_F(PlanCli, MeasuredFromABenchReport) {
  const std::string report = dir_->file("r.json");
  std::ofstream(report)
      << R"({"results":[{"bytes_read":800000000,"bytes":800000000,"seconds":2.0,"error":null,)"
         R"("xfer":"cpu-only","rw":"read","block_size":1048576}]})";
  const auto r = plan(std::string(scale_case) + " --storage-servers 60 --measured " +
                      test::shell_quote(report));
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("does NOT fit: measured node"), std::string::npos) << r.out;
}

TEST_F(PlanCli, BadInputsExitTwo) {
  for (const std::string args :
       {"--gpus 8", "--gpus 8 --per-gpu fast", "--gpus 8 --per-gpu 1GB/s --total 8GB/s",
        "--gpus 8 --per-gpu 1GB/s --pcie-gen 2", "--gpus 8 --per-gpu 1GB/s --measured /nonexistent",
        "--gpus 8 --per-gpu 1GB/s --storage-servers 4", "--gpus 8 --per-step 1GB --step-time x",
        "--gpus 8 --per-step 1GB"}) {
    const auto r = plan(args);
    EXPECT_EQ(r.rc, 2) << args << "\n" << r.out << r.err;
    EXPECT_FALSE(r.err.empty()) << args;  // a message saying what is wrong
  }
}

}  // namespace
}  // namespace sluice
