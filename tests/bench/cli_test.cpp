// `sluice bench` run as a user runs it: gdsio's short options and sluice's long options resolve
// to the same plan, the JSON report has the documented keys and types, --replay reruns it,
// --compare prints medians, --gdsio-output prints gdsio's line, bad arguments exit 2 with a
// message, and a run that fails mid-way (a corrupted block under --verify) exits 1 after
// printing what it measured.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <regex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sluice/config.hpp"
#include "sluice/tools/bench.hpp"
#include "sluice/tools/bench_report.hpp"
#include "sluice/units.hpp"
#include "support/residency_util.hpp"
#include "support/test_util.hpp"

#ifndef SLUICE_CLI_PATH
#error "SLUICE_CLI_PATH must name the built sluice binary"
#endif

namespace sluice {
namespace {

using nlohmann::json;
using test::shell_quote;

using test::CliRun;

class BenchCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::make_unique<test::TempDir>("/var/tmp", "sluice-bench-cli-");
    file_ = dir_->file("data.bin");
  }

  CliRun bench(const std::string& args) { return test::run_captured(SLUICE_CLI_PATH, "bench " + args, dir_->path()); }

  std::string f() const { return shell_quote(file_); }

  test::CleanSluiceEnv clean_env_;
  std::unique_ptr<test::TempDir> dir_;
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

  const std::string d = shell_quote(dir_->path());
  const CliRun gd = bench(fmt::format("--print-plan -D {} -w 3 -s 2M -I 1 -x 1 -B 8", d));
  ASSERT_EQ(gd.rc, 0) << gd.err;
  const CliRun ld = bench(fmt::format("--print-plan --dir {} --threads 3 --size 2M --rw write --xfer cpu-only "
                                      "--iodepth 8", d));
  ASSERT_EQ(ld.rc, 0) << ld.err;
  EXPECT_EQ(json::parse(gd.out), json::parse(ld.out));
  EXPECT_EQ(json::parse(gd.out)["workload"]["dir"], dir_->path());

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
  EXPECT_EQ(j["schema"], sluice::bench::report_schema_version);
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

// Splits one CSV line, honouring double-quoted fields ("" inside quotes is a quote).
std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
      out.back() += '"';
      ++i;
    } else if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return out;
}

TEST_F(BenchCli, MixedRunsReportReadsAndWritesApart) {
  const std::string report = dir_->file("mixed.json");
  const std::string csv_path = dir_->file("mixed.csv");
  const CliRun r = bench(fmt::format("--file {} --size 1M --block-size 64K --rw randrw --mix 70 --iodepth 4 "
                                     "--json {} --csv {}", f(), shell_quote(report), shell_quote(csv_path)));
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(\n  reads +read +[0-9.]+ +[0-9.]+ +[0-9]+ )"))) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(\n  writes +write +[0-9.]+ +[0-9.]+ +[0-9]+ )"))) << r.out;

  const json j = json::parse(test::read_text(report));
  ASSERT_EQ(j["results"].size(), 1U);
  const json& res = j["results"][0];
  for (const char* k : {"bytes", "ios", "gib_per_s", "iops", "latency_us", "bytes_read", "bytes_written"}) {
    EXPECT_TRUE(res.contains(k)) << k;  // the run as a whole keeps its fields
  }
  std::uint64_t ios = 0, bytes = 0;
  for (const char* d : {"read", "write"}) {
    ASSERT_TRUE(res.contains(d) && res[d].is_object()) << d << "\n" << res.dump(1);
    const json& x = res[d];
    for (const char* k : {"bytes", "ios"}) EXPECT_TRUE(x[k].is_number_unsigned()) << d << "." << k;
    for (const char* k : {"gib_per_s", "gb_per_s", "iops"}) EXPECT_TRUE(x[k].is_number()) << d << "." << k;
    for (const char* k : {"mean", "p50", "p90", "p99", "p999", "max"}) {
      EXPECT_TRUE(x["latency_us"][k].is_number()) << d << ".latency_us." << k;
    }
    EXPECT_GT(x["ios"].get<std::uint64_t>(), 0U) << d;
    EXPECT_EQ(x["latency_histogram_ns"]["count"], x["ios"]) << d;
    EXPECT_GT(x["latency_us"]["p50"].get<double>(), 0.0) << d;
    ios += x["ios"].get<std::uint64_t>();
    bytes += x["bytes"].get<std::uint64_t>();
  }
  EXPECT_EQ(ios, res["ios"].get<std::uint64_t>());
  EXPECT_EQ(bytes, res["bytes"].get<std::uint64_t>());
  EXPECT_EQ(res["read"]["bytes"], res["bytes_read"]);
  EXPECT_EQ(res["write"]["bytes"], res["bytes_written"]);

  const std::string csv = test::read_text(csv_path);
  const std::size_t nl = csv.find('\n');
  ASSERT_NE(nl, std::string::npos);
  const auto header = csv_fields(csv.substr(0, nl));
  const auto row = csv_fields(csv.substr(nl + 1, csv.find('\n', nl + 1) - nl - 1));
  ASSERT_EQ(header.size(), row.size()) << csv;
  auto col = [&](const std::string& name) {
    const auto it = std::find(header.begin(), header.end(), name);
    EXPECT_NE(it, header.end()) << name;
    return it == header.end() ? std::string() : row[static_cast<std::size_t>(it - header.begin())];
  };
  EXPECT_EQ(header.front(), "xfer");  // the columns before the per-direction ones stay in place
  EXPECT_EQ(col("ios"), std::to_string(res["ios"].get<std::uint64_t>()));
  EXPECT_EQ(col("read_ios"), std::to_string(res["read"]["ios"].get<std::uint64_t>()));
  EXPECT_EQ(col("write_ios"), std::to_string(res["write"]["ios"].get<std::uint64_t>()));
  EXPECT_EQ(col("write_bytes"), std::to_string(res["write"]["bytes"].get<std::uint64_t>()));
  EXPECT_GT(std::stod(col("read_lat_p99_us")), 0.0);
  EXPECT_GT(std::stod(col("write_lat_p50_us")), 0.0);
  EXPECT_GT(std::stod(col("write_iops")), 0.0);

  // A read-only run has the read object and no write object.
  const std::string plain = dir_->file("read.json");
  const CliRun rr = bench(fmt::format("--file {} --size 1M --block-size 64K --json {}", f(), shell_quote(plain)));
  ASSERT_EQ(rr.rc, 0) << rr.err;
  const json p = json::parse(test::read_text(plain))["results"][0];
  EXPECT_TRUE(p.contains("read"));
  EXPECT_FALSE(p.contains("write"));
  EXPECT_EQ(p["read"]["ios"], p["ios"]);
  EXPECT_EQ(rr.out.find("  writes"), std::string::npos) << rr.out;
}

// fio's clat: measured where sluice submits in syscalls of its own (--submit-batch), for every
// transfer, and never longer than the same transfer's total latency (it is the tail of that
// interval, so every percentile is at most the total's); absent in the default batched loop.
TEST_F(BenchCli, CompletionLatencyOnlyWhereSubmissionIsItsOwnSyscall) {
  std::string why;
  if (!uring_available(&why)) SLUICE_SKIP_OR_FAIL("clat is measured on io_uring only, which is unavailable: " + why);
  const std::string report = dir_->file("clat.json"), csv_path = dir_->file("clat.csv");
  const CliRun r = bench(fmt::format("--file {} --size 2M --block-size 4K --rw randread --iodepth 4 "
                                     "--submit-batch 3 --reap-batch 1 --json {} --csv {}",
                                     f(), shell_quote(report), shell_quote(csv_path)));
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(\n  clat +[0-9.]+ +[0-9.]+ )"))) << r.out;
  const json res = json::parse(test::read_text(report))["results"][0];
  ASSERT_TRUE(res.contains("clat_us")) << res.dump(1);
  EXPECT_EQ(res["clat_histogram_ns"]["count"], res["ios"]);
  EXPECT_EQ(res["ios"], 512);
  for (const char* k : {"mean", "p50", "p90", "p99", "p999", "max"}) {
    EXPECT_GT(res["clat_us"][k].get<double>(), 0.0) << k;
    EXPECT_LE(res["clat_us"][k].get<double>(), res["latency_us"][k].get<double>()) << k;
  }
  const std::string csv = test::read_text(csv_path);
  const auto header = csv_fields(csv.substr(0, csv.find('\n')));
  const auto row = csv_fields(csv.substr(csv.find('\n') + 1, csv.rfind('\n') - csv.find('\n') - 1));
  ASSERT_EQ(header.size(), row.size()) << csv;
  const auto at = std::find(header.begin(), header.end(), "clat_p99_us");
  ASSERT_NE(at, header.end()) << csv;
  EXPECT_NEAR(std::stod(row[static_cast<std::size_t>(at - header.begin())]), res["clat_us"]["p99"].get<double>(),
              0.001);

  // The default loop submits and waits in one syscall: no clat anywhere, empty CSV cells.
  const CliRun d = bench(fmt::format("--file {} --size 2M --block-size 4K --rw randread --iodepth 4 --json {} --csv {}",
                                     f(), shell_quote(report), shell_quote(csv_path)));
  ASSERT_EQ(d.rc, 0) << d.err;
  EXPECT_FALSE(json::parse(test::read_text(report))["results"][0].contains("clat_us"));
  EXPECT_EQ(d.out.find("  clat"), std::string::npos) << d.out;
  const std::string csv2 = test::read_text(csv_path);
  const auto header2 = csv_fields(csv2.substr(0, csv2.find('\n')));
  const auto row2 = csv_fields(csv2.substr(csv2.find('\n') + 1, csv2.rfind('\n') - csv2.find('\n') - 1));
  ASSERT_EQ(header2.size(), row2.size()) << csv2;
  int clat_cells = 0;
  for (std::size_t i = 0; i < header2.size(); ++i) {
    if (header2[i].rfind("clat_", 0) != 0) continue;
    ++clat_cells;
    EXPECT_EQ(row2[i], "") << header2[i] << "\n" << csv2;
  }
  EXPECT_EQ(clat_cells, 6) << csv2;
}

TEST_F(BenchCli, LoopShapeAndBufferOptionsReachThePlan) {
  const CliRun d = bench(fmt::format("--print-plan -f {}", f()));
  ASSERT_EQ(d.rc, 0) << d.err;
  const json def = json::parse(d.out)["workload"];
  EXPECT_EQ(def["submit_batch"], 0);
  EXPECT_EQ(def["reap_batch"], 0);
  EXPECT_EQ(def["huge_pages"], true);
  const CliRun s = bench(fmt::format("--print-plan -f {} --submit-batch 1 --reap-batch 1 --no-hugepages", f()));
  ASSERT_EQ(s.rc, 0) << s.err;
  const json w = json::parse(s.out)["workload"];
  EXPECT_EQ(w["submit_batch"], 1);
  EXPECT_EQ(w["reap_batch"], 1);
  EXPECT_EQ(w["huge_pages"], false);
  // And a report made with them replays with them.
  const std::string report = dir_->file("shape.json");
  const CliRun r = bench(fmt::format("--file {} --size 1M --block-size 64K --iodepth 4 --submit-batch 1 "
                                     "--reap-batch 1 --no-hugepages --json {}", f(), shell_quote(report)));
  ASSERT_EQ(r.rc, 0) << r.err;
  const json j = json::parse(test::read_text(report));
  for (const char* k : {"submit_batch", "reap_batch", "huge_pages"}) EXPECT_EQ(j["config"]["workload"][k], w[k]) << k;
  EXPECT_NE(j["results"][0]["reason"].get<std::string>().find("4 KiB-page buffers"), std::string::npos);
  const CliRun p = bench(fmt::format("--replay {} --print-plan", shell_quote(report)));
  ASSERT_EQ(p.rc, 0) << p.err;
  EXPECT_EQ(json::parse(p.out), j["config"]);
}

// --cache-policy: bypass by default (a storage measurement), auto reads the blocks the page cache
// holds through it and reports those I/Os under their own reason, use reads them all buffered.
TEST_F(BenchCli, CachePolicyReachesThePlanAndTheReport) {
  const CliRun d = bench(fmt::format("--print-plan -f {}", f()));
  ASSERT_EQ(d.rc, 0) << d.err;
  EXPECT_EQ(json::parse(d.out)["workload"]["cache_policy"], "bypass");
  // Written buffered just now, so the page cache holds all of it.
  test::write_file(file_, test::random_bytes(4 * MiB, 5));
  auto reasons = [&](const std::string& extra) {
    const std::string report = dir_->file("cache.json");
    const CliRun r = bench(fmt::format("--file {} --size 4M --block-size 64K --iodepth 4 --json {} {}", f(),
                                       shell_quote(report), extra));
    EXPECT_EQ(r.rc, 0) << r.err;
    const json j = json::parse(test::read_text(report));
    EXPECT_EQ(j["config"]["workload"]["cache_policy"], extra.empty() ? "bypass" : extra.substr(extra.rfind(' ') + 1));
    std::map<std::string, std::uint64_t> out;
    for (const auto& p : j["results"][0]["paths"]) out[p["reason"]] += p["ios"].get<std::uint64_t>();
    return out;
  };
  const auto bypass = reasons("");
  ASSERT_EQ(bypass.size(), 1U);
  EXPECT_NE(bypass.begin()->first.find("O_DIRECT"), std::string::npos) << bypass.begin()->first;
  // Cold by default (fio's invalidate=1): a warm file is a warm run's.
  const auto cached = reasons("--warm --cache-policy auto");
  ASSERT_EQ(cached.size(), 1U) << "every block of a file read in first is cached";
  EXPECT_NE(cached.begin()->first.find("the page cache held the block"), std::string::npos) << cached.begin()->first;
  EXPECT_EQ(cached.begin()->second, 64U);
  const auto use = reasons("--cache-policy use");
  ASSERT_EQ(use.size(), 1U);
  EXPECT_NE(use.begin()->first.find("--cache-policy use"), std::string::npos) << use.begin()->first;
  // Contradictions are usage errors.
  for (const char* bad : {"--direct --cache-policy auto", "--buffered --cache-policy auto", "--cache-policy never"}) {
    const CliRun r = bench(fmt::format("--file {} {}", f(), bad));
    EXPECT_EQ(r.rc, 2) << bad << "\n" << r.err;
    EXPECT_NE(r.err.find("cache-policy"), std::string::npos) << bad << "\n" << r.err;
  }
}

// Issue 37: the comparison a newcomer sees first compares like with like. Every run that reads
// starts with the file dropped from the page cache, the buffered types too, which a moment
// before read it into the cache; --warm starts every run with it cached instead. The table,
// the summary, the JSON and the CSV say which state each row had, as measured.
TEST_F(BenchCli, ColdByDefaultWarmOnRequestAndEveryRowSaysWhich) {
  const CliRun d = bench(fmt::format("--print-plan -f {}", f()));
  ASSERT_EQ(d.rc, 0) << d.err;
  EXPECT_EQ(json::parse(d.out)["cache"], "cold");
  const CliRun w = bench(fmt::format("--print-plan -f {} --warm", f()));
  ASSERT_EQ(w.rc, 0) << w.err;
  EXPECT_EQ(json::parse(w.out)["cache"], "warm");
  EXPECT_EQ(json::parse(w.out)["workload"]["cache_policy"], "auto") << "O_DIRECT types read the cache warm";
  const CliRun bad = bench(fmt::format("-f {} --warm --drop-caches", f()));
  EXPECT_EQ(bad.rc, 2) << bad.err;

  test::write_file(file_, test::random_bytes(4 * MiB, 6));
  if (!test::drop_cache(file_)) GTEST_SKIP() << "this folder's file system keeps its pages cached";
  test::make_resident(file_, 0, 4 * MiB);  // what the first cold run has to drop
  // One bench run in `state`; true where every row held it. Each row's cache object, label and
  // CSV cell are checked against what it measured either way.
  auto run = [&](const std::string& state) {
    const std::string report = dir_->file("states.json"), csv_path = dir_->file("states.csv");
    const CliRun r = bench(fmt::format("--file {} --block-size 256K --iodepth 2 --compare cpu-gpu,cpu-only,"
                                       "cpu-cached-gpu --repeat 2 --device sim --json {} --csv {} {}",
                                       f(), shell_quote(report), shell_quote(csv_path), state == "warm" ? "--warm" : ""));
    EXPECT_EQ(r.rc, 0) << r.err << r.out;
    EXPECT_NE(r.out.find("cache: " + state + ":"), std::string::npos) << r.out;
    const json j = json::parse(test::read_text(report));
    EXPECT_EQ(j["results"].size(), 6U);
    bool held = true;
    for (const json& res : j["results"]) {
      const json& c = res["cache"];
      EXPECT_EQ(c["state"], state) << c.dump();
      if (c["resident_start"].is_null()) continue;  // no residency probe here: nothing to hold
      const double at_start = c["resident_start"].get<double>();
      EXPECT_EQ(c["held"].get<bool>(), state == "cold" ? at_start <= 0.01 : at_start >= 0.99) << c.dump();
      EXPECT_TRUE(c["resident_end"].is_number());
      EXPECT_FALSE(c["how"].get<std::string>().empty());
      EXPECT_NE(r.out.find(c["label"].get<std::string>()), std::string::npos) << r.out;
      held = held && c["held"].get<bool>();
    }
    for (const json& sm : j["summary"]) {
      if (held) {
        EXPECT_EQ(sm["cache"], state) << sm.dump();
      }
    }
    const std::string csv = test::read_text(csv_path);
    const auto header = csv_fields(csv.substr(0, csv.find('\n')));
    const std::size_t eol = csv.find('\n', csv.find('\n') + 1);
    const auto first = csv_fields(csv.substr(csv.find('\n') + 1, eol - csv.find('\n') - 1));
    const auto col = static_cast<std::size_t>(std::find(header.begin(), header.end(), "cache") - header.begin());
    EXPECT_LT(col, first.size()) << csv;
    if (col < first.size()) {
      EXPECT_EQ(first[col], j["results"][0]["cache"]["label"]) << csv;
    }
    return held;
  };
  // Cold holds whatever else the machine does; warm pages may be dropped by something beside the
  // test between the read-in and the probe (tests/README.md): the row says so, and a retry finds
  // a run it left alone.
  EXPECT_TRUE(run("cold"));
  bool warm = false;
  for (int attempt = 0; attempt < 3 && !warm; ++attempt) warm = run("warm");
  EXPECT_TRUE(warm) << "no --warm run started warm in 3 tries";
}

TEST_F(BenchCli, ProgressLineOnlyOnATerminal) {
  const std::string args = fmt::format("--file {} --size 4M --block-size 64K --rw randread --time 3", f());
  const CliRun plain = bench(args);  // stderr is a file here
  ASSERT_EQ(plain.rc, 0) << plain.err;
  EXPECT_EQ(plain.err.find('\r'), std::string::npos) << plain.err;
  EXPECT_EQ(plain.err.find("GiB/s"), std::string::npos) << plain.err;

  if (!test::have_program("script")) SLUICE_SKIP_OR_FAIL("no script(1) to provide a terminal (bsdutils)");
  const std::string out = dir_->file("tty.out"), report = dir_->file("tty.json");
  const std::string cmd = fmt::format("{} bench {} --json {}", shell_quote(SLUICE_CLI_PATH), args, shell_quote(report));
  const int rc = test::shell(fmt::format("script -qec {} /dev/null </dev/null >{} 2>&1", shell_quote(cmd),
                                         shell_quote(out)));
  ASSERT_EQ(rc, 0) << test::read_text(out);
  const std::string tty = test::read_text(out);
  const json res = json::parse(test::read_text(report))["results"][0];
  const double seconds = res["seconds"].get<double>();
  const auto bytes = res["bytes"].get<std::uint64_t>();
  // "\r\033[K  1.0 s  12.0 MiB  0.012 GiB/s   33%": redrawn every half second of the run's clock
  // from the first second on, then erased before the result. Held to the run's own figures: the
  // i-th line no sooner than (i+1)/2 s in, lines in order, bytes never past what the run reports
  // it moved (to the rounding of the printed figure), the percentage the elapsed part of --time 3.
  const std::regex line("\r\x1b\\[K  ([0-9.]+) s  ([0-9]+)\\.?([0-9]*) ([KMG]?i?B)  [0-9.]+ GiB/s +([0-9]+)%");
  double last_s = 0, last_b = 0;
  int lines = 0;
  for (auto it = std::sregex_iterator(tty.begin(), tty.end(), line); it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    SCOPED_TRACE(m.str(0).substr(4));
    const double at = std::stod(m[1].str());
    const double unit = m[4] == "B" ? 1 : m[4] == "KiB" ? KiB : m[4] == "MiB" ? MiB : static_cast<double>(GiB);
    const double b = std::stod(m[2].str() + "." + m[3].str() + "0") * unit;
    const double rounding = 0.5 * std::pow(10.0, -static_cast<double>(m[3].length())) * unit;
    EXPECT_GE(at, std::max(1.0, 0.5 * (lines + 1)) - 0.05);  // printed to a tenth
    EXPECT_GT(at, last_s);
    EXPECT_GE(b + rounding, last_b);
    EXPECT_LE(b - rounding, static_cast<double>(bytes)) << "more than the run moved";
    EXPECT_NEAR(std::stod(m[5].str()), 100 * at / 3, 2.5);
    last_s = at;
    last_b = b - rounding;
    ++lines;
  }
  EXPECT_GE(lines, 1) << tty;
  EXPECT_GE(seconds, 3.0);
  const std::size_t last = tty.rfind("\x1b[K  ");
  ASSERT_NE(last, std::string::npos) << tty;
  EXPECT_NE(tty.find("\r\x1b[K", last + 1), std::string::npos) << "the last progress line was not erased";
}

TEST_F(BenchCli, CompareOnTheSimDevicePrintsMediansAndRatios) {
  const std::string report = dir_->file("compare.json");
  const CliRun r = bench(fmt::format("--file {} --size 1M --block-size 128K --iodepth 2 --device sim "
                                     "--compare cpu-only,cpu-async-gpu,gpu-direct --repeat 2 --json {}",
                                     f(), shell_quote(report)));
  ASSERT_EQ(r.rc, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("medians over 2 round(s)"), std::string::npos) << r.out;
  if (r.out.find("FELL BACK") != std::string::npos) {
    EXPECT_NE(r.out.find("!! gpu-direct did not run on the direct path"), std::string::npos) << r.out;
  }
  // Each summary row against the results it summarizes: the median (mean of two) of its rounds'
  // throughput, and the ratio of that to cpu-only's, as the table prints them.
  const json doc = json::parse(test::read_text(report));
  std::map<std::string, std::vector<double>> rounds;
  for (const json& x : doc["results"]) rounds[x["xfer"].get<std::string>()].push_back(x["gib_per_s"].get<double>());
  const json& summary = doc["summary"];
  ASSERT_EQ(summary.size(), 3U) << summary.dump(1);
  auto median2 = [&](const std::string& xfer) {
    const auto& v = rounds[xfer];
    EXPECT_EQ(v.size(), 2U) << xfer;
    return v.size() == 2 ? (v[0] + v[1]) / 2 : 0.0;
  };
  const double base = median2("cpu-only");
  ASSERT_GT(base, 0.0);
  const char* order[] = {"cpu-only", "cpu-async-gpu", "gpu-direct"};
  for (std::size_t i = 0; i < 3; ++i) {
    const json& row = summary[i];
    SCOPED_TRACE(order[i]);
    EXPECT_EQ(row["xfer"], order[i]);
    EXPECT_EQ(row["rounds"], 2);
    const double gib = median2(order[i]);
    EXPECT_NEAR(row["gib_per_s"].get<double>(), gib, 1e-9 * gib);
    EXPECT_NEAR(row["ratio"].get<double>(), gib / base, 1e-9);
    const std::regex printed(fmt::format("\n{} +128K +2 +{:.3f} .* {:.2f}x  ", order[i], gib, gib / base));
    EXPECT_TRUE(std::regex_search(r.out, printed)) << r.out;
  }
}

// Every duration option takes the one duration syntax (units.hpp) and --memory the one set of
// memory names (device.hpp), with load's "host" for pageable.
TEST_F(BenchCli, DurationsAndMemoryNamesAsEveryCommandSpellsThem) {
  struct Case {
    std::string args;
    double time_s, warmup_s, sample_s;
    const char* memory;
  };
  const Case cases[] = {
      {"--time 500ms --warmup 250ms --sample-interval 100ms --memory host", 0.5, 0.25, 0.1, "pageable host"},
      {"--time 2m --warmup 1.5 --sample-interval 2s --memory pageable", 120, 1.5, 2, "pageable host"},
      {"--time 1h --warmup 0.5min --sample-interval 500us --memory pinned", 3600, 30, 500e-6, "pinned host"},
      {"--time 10 --memory gpu", 10, 0, 1, "device"},
  };
  for (const Case& c : cases) {
    const CliRun r = bench(fmt::format("--print-plan --file {} --size 1M --xfer cpu-gpu {}", f(), c.args));
    ASSERT_EQ(r.rc, 0) << c.args << ": " << r.err;
    const json w = json::parse(r.out)["workload"];
    EXPECT_DOUBLE_EQ(w["time_s"].get<double>(), c.time_s) << c.args;
    EXPECT_DOUBLE_EQ(w["warmup_s"].get<double>(), c.warmup_s) << c.args;
    EXPECT_DOUBLE_EQ(w["sample_interval_s"].get<double>(), c.sample_s) << c.args;
    EXPECT_EQ(w["memory"], c.memory) << c.args;
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
      {fmt::format("--file {} --time 5x", f()), "--time: '5x' is not a duration"},
      {fmt::format("--file {} --time=-3s", f()), "--time: a duration cannot be negative"},
      {fmt::format("--file {} --warmup 2days", f()), "--warmup: '2days' is not a duration"},
      {fmt::format("--file {} --sample-interval 1x", f()), "--sample-interval: '1x' is not a duration"},
      {fmt::format("--file {} --memory nowhere", f()), "--memory: unknown memory 'nowhere'"},
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
