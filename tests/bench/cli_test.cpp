// `sluice bench` run as a user runs it: gdsio's short options and sluice's long options resolve
// to the same plan, the JSON report has the documented keys and types, --replay reruns it,
// --compare prints medians, --gdsio-output prints gdsio's line, bad arguments exit 2 with a
// message, and a run that fails mid-way (a corrupted block under --verify) exits 1 after
// printing what it measured.
#include <gtest/gtest.h>

#include <regex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sluice/bench.hpp"
#include "sluice/config.hpp"
#include "support/test_util.hpp"

#ifndef SLUICE_CLI_PATH
#error "SLUICE_CLI_PATH must name the built sluice binary"
#endif

namespace sluice {
namespace {

using nlohmann::json;
using test::shell_quote;

struct CliRun {
  int rc = -1;
  std::string out;
  std::string err;
};

class BenchCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::make_unique<test::TempDir>("/var/tmp", "sluice-bench-cli-");
    env_.push_back(std::make_unique<test::ScopedEnv>("SLUICE_CONFIG", std::nullopt));
    for (const auto& e : Config().entries()) env_.push_back(std::make_unique<test::ScopedEnv>(e.env, std::nullopt));
    file_ = dir_->file("data.bin");
  }

  CliRun bench(const std::string& args) {
    const std::string out = dir_->file("stdout");
    const std::string err = dir_->file("stderr");
    CliRun r;
    r.rc = test::shell(fmt::format("{} bench {} </dev/null >{} 2>{}", shell_quote(SLUICE_CLI_PATH), args,
                                   shell_quote(out), shell_quote(err)));
    r.out = test::read_text(out);
    r.err = test::read_text(err);
    return r;
  }

  std::string f() const { return shell_quote(file_); }

  std::unique_ptr<test::TempDir> dir_;
  std::vector<std::unique_ptr<test::ScopedEnv>> env_;
  std::string file_;
};

TEST_F(BenchCli, GdsioAndLongOptionsMakeTheSamePlan) {
  const CliRun g = bench(fmt::format("--print-plan -f {} -w 2 -s 1M -i 64K -x 3 -I 2 -T 5 -k 7 -o 4K -V -B 4 "
                                     "-m 2 -d 1 -n 0 -O 1", f()));
  ASSERT_EQ(g.rc, 0) << g.err;
  const CliRun l = bench(fmt::format("--print-plan --file {} --threads 2 --size 1M --block-size 64K "
                                     "--xfer cpu-async-gpu --rw randread --time 5s --seed 7 --offset 4K "
                                     "--verify --iodepth 4 --memory pinned --device cuda:1 --numa-node 0 "
                                     "--buffered", f()));
  ASSERT_EQ(l.rc, 0) << l.err;
  const json a = json::parse(g.out), b = json::parse(l.out);
  EXPECT_EQ(a, b) << a.dump(1) << "\n" << b.dump(1);
  const json& w = a["workload"];
  EXPECT_EQ(w["threads"], 2);
  EXPECT_EQ(w["block_size"], 65536);
  EXPECT_EQ(w["xfer"], "cpu-async-gpu");
  EXPECT_EQ(w["rw"], "randread");
  EXPECT_EQ(w["time_s"], 5.0);
  EXPECT_EQ(w["offset"], 4096);
  EXPECT_EQ(w["direct"], false);
  EXPECT_EQ(w["device"], "cuda:1");

  const CliRun sweep = bench(fmt::format("--print-plan -f {} -i 4K:16K:4K --compare all", f()));
  ASSERT_EQ(sweep.rc, 0) << sweep.err;
  const json s = json::parse(sweep.out);
  EXPECT_EQ(s["block_sizes"].size(), 4U);
  EXPECT_EQ(s["xfers"].size(), bench::all_xfers().size());
}

TEST_F(BenchCli, JsonReportSchemaAndReplay) {
  const std::string report = dir_->file("report.json");
  const CliRun r = bench(fmt::format("--file {} --size 1M --block-size 64K --iodepth 4 --xfer cpu-only "
                                     "--json {} --csv {} --gdsio-output", f(), shell_quote(report),
                                     shell_quote(dir_->file("out.csv"))));
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("cpu-only"), std::string::npos) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(
      R"(IoType: READ XferType: CPUONLY Threads: 1 IoDepth: 4 DataSetSize: 1024/1024\(KiB\) IOSize: 64\(KiB\) Throughput: [0-9.]+ GiB/sec, Avg_Latency: [0-9.]+ usecs ops: 16 total_time [0-9.]+ secs)")))
      << r.out;
  const json j = json::parse(test::read_text(report));
  for (const char* k : {"version", "command", "config", "system", "results", "summary"}) {
    EXPECT_TRUE(j.contains(k)) << k;
  }
  EXPECT_TRUE(j["version"].is_string());
  EXPECT_NE(j["command"].get<std::string>().find("bench"), std::string::npos);
  const json& sys = j["system"];
  for (const char* k : {"kernel", "cpu", "memory", "gpus", "files", "sluice_config"}) EXPECT_TRUE(sys.contains(k)) << k;
  ASSERT_EQ(sys["files"].size(), 1U);
  EXPECT_TRUE(sys["files"][0]["fs_type"].is_string());
  EXPECT_TRUE(sys["files"][0]["mount_options"].is_string());
  ASSERT_EQ(j["results"].size(), 1U);
  const json& res = j["results"][0];
  for (const char* k : {"xfer", "path", "reason", "rw", "memory"}) EXPECT_TRUE(res[k].is_string()) << k;
  for (const char* k : {"block_size", "threads", "iodepth", "bytes", "ios"}) {
    EXPECT_TRUE(res[k].is_number_unsigned()) << k;
  }
  for (const char* k : {"seconds", "gib_per_s", "gb_per_s", "iops", "cpu_seconds_per_gib"}) {
    EXPECT_TRUE(res[k].is_number()) << k;
  }
  for (const char* k : {"mean", "p50", "p90", "p99", "p999", "max"}) {
    EXPECT_TRUE(res["latency_us"][k].is_number()) << k;
  }
  EXPECT_EQ(res["bytes"], 1048576);
  EXPECT_EQ(res["xfer"], "cpu-only");
  EXPECT_EQ(res["path"], "host");
  EXPECT_EQ(res["latency_histogram_ns"]["count"], 16);
  EXPECT_TRUE(res["error"].is_null());
  const std::string csv = test::read_text(dir_->file("out.csv"));
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 2) << csv;

  const std::string again = dir_->file("again.json");
  const CliRun rr = bench(fmt::format("--replay {} --json {}", shell_quote(report), shell_quote(again)));
  ASSERT_EQ(rr.rc, 0) << rr.err;
  const json j2 = json::parse(test::read_text(again));
  EXPECT_EQ(j2["config"], j["config"]);
  EXPECT_EQ(j2["results"][0]["bytes"], 1048576);
}

TEST_F(BenchCli, CompareOnTheSimDevicePrintsMediansAndRatios) {
  const CliRun r = bench(fmt::format("--file {} --size 1M --block-size 128K --iodepth 2 --device sim "
                                     "--compare cpu-only,cpu-async-gpu,gpu-direct --repeat 2", f()));
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("medians over 2 round(s)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cpu-async-gpu"), std::string::npos);
  EXPECT_NE(r.out.find("1.00x"), std::string::npos);
  if (r.out.find("FELL BACK") != std::string::npos) {
    EXPECT_NE(r.out.find("!! gpu-direct did not run on the direct path"), std::string::npos) << r.out;
  }
}

TEST_F(BenchCli, BadArgumentsExitTwoWithAMessage) {
  test::write_file(file_, test::random_bytes(64 * 1024, 3));
  struct Case {
    std::string args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {fmt::format("--file {} --xfer warp-drive", f()), "unknown transfer type"},
      {fmt::format("--file {} -x 7", f()), "not supported"},
      {fmt::format("--file {} --block-size 1M", f()), "larger than the file"},
      {fmt::format("--file {} --rw randwrite --verify --time 2", f()), "--verify with --time"},
      {fmt::format("--dir {} --size 1M", shell_quote(dir_->file("nowhere"))), "no such directory"},
      {fmt::format("--file {} --rw sideways", f()), "unknown I/O type"},
      {fmt::format("--file {} --block-size 4K:1K", f()), "ends below its start"},
      {"--size 1M", "give --file or --dir"},
      {fmt::format("--replay {}", f()), "not JSON"},
  };
  for (const auto& c : cases) {
    const CliRun r = bench(c.args);
    EXPECT_EQ(r.rc, 2) << c.args << "\n" << r.err << r.out;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << "\nstderr: " << r.err;
  }
}

TEST_F(BenchCli, CorruptedBlockFailsVerifyAndReportsWhatRan) {
  const CliRun w = bench(fmt::format("--file {} --size 1M --block-size 64K --rw write --verify", f()));
  ASSERT_EQ(w.rc, 0) << w.err << w.out;
  EXPECT_NE(w.out.find("cpu-only/verify"), std::string::npos) << w.out;
  auto b = test::pread_file(file_, 700000, 1);
  b[0] ^= std::byte{1};
  test::pwrite_file(file_, b, 700000);
  const std::string report = dir_->file("failed.json");
  const CliRun r = bench(fmt::format("--file {} --size 1M --block-size 64K --verify --json {}", f(),
                                     shell_quote(report)));
  EXPECT_EQ(r.rc, 1) << r.err << r.out;
  EXPECT_NE(r.err.find("verify failed"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("700000"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("FAILED"), std::string::npos) << r.out;
  const json j = json::parse(test::read_text(report));  // the report is written even so
  EXPECT_TRUE(j["results"][0]["error"].is_string());
}

}  // namespace
}  // namespace sluice
