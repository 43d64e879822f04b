// `sluice stats` reading live processes: a `sluice bench` and a small program using the library,
// both started with SLUICE_STATS=1, are read while they run (JSON fields, the listing, --watch)
// and their --prometheus output passes a Prometheus text-format parser. The segment is gone once
// the process has exited.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "sluice/stats.hpp"
#include "support/test_util.hpp"

#if !defined(SLUICE_CLI_PATH) || !defined(SLUICE_STATS_PUBLISHER)
#error "SLUICE_CLI_PATH and SLUICE_STATS_PUBLISHER must name the built programs"
#endif

namespace sluice {
namespace {

using nlohmann::json;
using test::shell_quote;

// A Prometheus text exposition format (0.0.4) parser: the samples as "name{labels}" -> value,
// and what is wrong with the text (empty when it is valid).
struct Exposition {
  std::map<std::string, double> samples;
  std::vector<std::string> errors;
};

Exposition parse_prometheus(const std::string& text) {
  static const std::regex help(R"(^# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) .*$)");
  static const std::regex type(
      R"(^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$)");
  static const std::regex sample(
      R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="(\\.|[^"\\\n])*"(,[a-zA-Z_][a-zA-Z0-9_]*="(\\.|[^"\\\n])*")*,?)?\})? ([^ ]+)( -?[0-9]+)?$)");
  Exposition e;
  std::map<std::string, std::string> types;
  std::set<std::string> helped, sampled;
  std::istringstream in(text);
  std::string line;
  int n = 0;
  auto error = [&](std::string_view what) {
    e.errors.push_back(fmt::format("line {}: {}: {}", n, what, line));
  };
  while (std::getline(in, line)) {
    ++n;
    std::smatch m;
    if (line.empty()) continue;
    if (line.starts_with("#")) {
      if (std::regex_match(line, m, help)) {
        if (!helped.insert(m[1]).second) error("second HELP");
      } else if (std::regex_match(line, m, type)) {
        if (!types.emplace(m[1], m[2]).second) error("second TYPE");
        if (sampled.contains(m[1])) error("TYPE after samples");
      } else if (line.starts_with("# HELP") || line.starts_with("# TYPE")) {
        error("malformed HELP or TYPE");
      }
      continue;
    }
    if (!std::regex_match(line, m, sample)) {
      error("not a sample");
      continue;
    }
    std::string name = m[1];
    // A summary's or histogram's _sum, _count (and _bucket) samples belong to its TYPE line.
    for (const std::string_view suffix : {"_sum", "_count", "_bucket"}) {
      const std::string base = name.substr(0, name.size() - std::min(name.size(), suffix.size()));
      if (name.ends_with(suffix) && (types[base] == "summary" || types[base] == "histogram")) name = base;
    }
    sampled.insert(name);
    if (!types.contains(name) || types[name].empty()) error("sample without a TYPE line");
    const std::string v = m[7];
    double value = 0;
    if (v == "+Inf" || v == "-Inf" || v == "NaN") {
      value = v == "NaN" ? std::nan("") : (v == "+Inf" ? HUGE_VAL : -HUGE_VAL);
    } else {
      try {
        std::size_t used = 0;
        value = std::stod(v, &used);
        if (used != v.size()) error("bad value");
      } catch (const std::exception&) {
        error("bad value");
        continue;
      }
    }
    if (types[name] == "counter" && value < 0) error("negative counter");
    if (!e.samples.emplace(m[1].str() + m[2].str(), value).second) error("duplicate sample");
  }
  return e;
}

using test::CliRun;

class StatsCli : public ::testing::Test {
 protected:
  void SetUp() override {
    scratch_ = std::make_unique<test::TempDir>("/var/tmp", "sluice-stats-");
    data_ = scratch_->file("data.bin");
    test::write_file(data_, test::random_bytes(4 << 20, 11));
  }
  void TearDown() override {
    if (child_ > 0) {
      ::kill(child_, SIGKILL);
      ::waitpid(child_, nullptr, 0);
    }
  }

  CliRun sluice(const std::string& args) { return test::run_captured(SLUICE_CLI_PATH, args, scratch_->path()); }

  // Starts argv with SLUICE_STATS=1 (its output into the scratch folder).
  void spawn(std::vector<std::string> argv) {
    child_ = ::fork();
    ASSERT_GE(child_, 0);
    if (child_ == 0) {
      ::setenv("SLUICE_STATS", "1", 1);
      const std::string log = scratch_->file("child.log");
      if (std::freopen(log.c_str(), "w", stdout) == nullptr ||
          std::freopen(log.c_str(), "a", stderr) == nullptr) {
        ::_exit(126);
      }
      std::vector<char*> args;
      for (auto& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      ::execv(args[0], args.data());
      ::_exit(127);
    }
  }

  // Reads the child's counters until `path` (any, when empty) shows bytes read (at most 10 s);
  // `path` becomes the path that did.
  json wait_for_bytes(std::string& path) {
    for (int i = 0; i < 100; ++i) {
      const CliRun r = sluice(fmt::format("stats {} --json", child_));
      if (r.rc == 0) {
        json j = json::parse(r.out);
        for (const auto& p : j.at("paths")) {
          if ((path.empty() || p.at("path") == path) && p.at("direction") == "read" &&
              p.at("bytes").get<std::uint64_t>() > 0) {
            path = p.at("path").get<std::string>();
            return j;
          }
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ADD_FAILURE() << "no " << path << " bytes published by pid " << child_
                  << "; child log: " << test::read_text(scratch_->file("child.log"));
    return {};
  }

  // The common checks on a running publisher, then waits for it to end.
  // `device`: the device key its transfers are counted under ("host", "sim").
  void check_live_publisher(std::string path, std::string_view device) {
    const json j = wait_for_bytes(path);
    if (j.empty()) return;
    EXPECT_EQ(j.at("pid"), child_);
    EXPECT_TRUE(j.at("alive").get<bool>());
    EXPECT_TRUE(j.at("command").is_string());
    EXPECT_GT(j.at("updated_unix_s").get<double>(), 0);
    EXPECT_TRUE(j.at("staging_waits").is_number_unsigned());
    ASSERT_EQ(j.at("paths").size(), 8U);  // 4 paths x 2 directions
    for (const auto& p : j["paths"]) {
      for (const char* k : {"bytes", "transfers", "ios", "errors"})
        EXPECT_TRUE(p.at(k).is_number_unsigned()) << k;
      EXPECT_TRUE(p.at("seconds").is_number());
      EXPECT_TRUE(p.at("latency_us").at("count").is_number_unsigned());
    }
    // The same transfers by device and by file system, and the fallback counters.
    std::uint64_t device_transfers = 0, fs_transfers = 0;
    for (const auto& dv : j.at("devices")) {
      if (dv.at("device") == device) device_transfers += dv.at("transfers").get<std::uint64_t>();
    }
    for (const auto& fs : j.at("filesystems")) {
      EXPECT_FALSE(fs.at("fs").get<std::string>().empty());
      fs_transfers += fs.at("transfers").get<std::uint64_t>();
    }
    EXPECT_GT(device_transfers, 0U) << j.dump();
    EXPECT_GT(fs_transfers, 0U) << j.dump();
    ASSERT_EQ(j.at("fallbacks").size(), fallback_count);
    EXPECT_TRUE(j.at("fallbacks").at("no_cufile").is_number_unsigned());
    for (const auto& p : j["paths"]) {
      if (p.at("transfers").get<std::uint64_t>() == 0) continue;
      // Read while transfers finish, so the histogram may hold a few more than `transfers`.
      EXPECT_GE(p.at("latency_us").at("count"), p.at("transfers")) << p.dump();
      EXPECT_GT(p.at("latency_us").at("p50").get<double>(), 0) << p.dump();
    }

    // The listing names it.
    const CliRun list = sluice("stats --json");
    ASSERT_EQ(list.rc, 0) << list.err;
    bool listed = false;
    const json procs = json::parse(list.out).at("processes");
    for (const auto& p : procs) listed = listed || p.at("pid") == child_;
    EXPECT_TRUE(listed) << list.out;

    // Prometheus text that a parser accepts, with the bytes just seen (counters only grow).
    const CliRun prom = sluice(fmt::format("stats {} --prometheus", child_));
    ASSERT_EQ(prom.rc, 0) << prom.err;
    const Exposition exp = parse_prometheus(prom.out);
    EXPECT_TRUE(exp.errors.empty()) << fmt::format("{}", fmt::join(exp.errors, "\n")) << "\n"
                                    << prom.out;
    const auto& samples = exp.samples;
    const std::string key = fmt::format(
        "sluice_bytes_total{{pid=\"{}\",path=\"{}\",direction=\"read\"}}", child_, path);
    ASSERT_TRUE(samples.contains(key)) << prom.out;
    std::uint64_t seen = 0;
    for (const auto& p : j["paths"]) {
      if (p["path"] == path && p["direction"] == "read") seen = p["bytes"].get<std::uint64_t>();
    }
    EXPECT_GE(samples.at(key), static_cast<double>(seen));
    const std::string device_key = fmt::format(
        "sluice_device_bytes_total{{pid=\"{}\",device=\"{}\",direction=\"read\"}}", child_, device);
    ASSERT_TRUE(samples.contains(device_key)) << prom.out;
    EXPECT_GT(samples.at(device_key), 0) << prom.out;
    const std::string count_key = fmt::format(
        "sluice_transfer_latency_seconds_count{{pid=\"{}\",path=\"{}\",direction=\"read\"}}",
        child_, path);
    EXPECT_TRUE(samples.contains(count_key)) << prom.out;

    // --watch prints until the process ends, then exits 0.
    const CliRun watch = sluice(fmt::format("stats {} --watch 300ms", child_));
    EXPECT_EQ(watch.rc, 0) << watch.err;
    EXPECT_GE(std::count(watch.out.begin(), watch.out.end(), '\n'), 4) << watch.out;
    EXPECT_NE(watch.out.find(fmt::format("pid {} (", child_)), std::string::npos) << watch.out;

    int status = 0;
    ASSERT_EQ(::waitpid(child_, &status, 0), child_);
    const pid_t pid = child_;
    child_ = 0;
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << test::read_text(scratch_->file("child.log"));
    EXPECT_NE(::access(stats_segment_path(pid).c_str(), F_OK), 0) << "segment left behind";
    const CliRun gone = sluice(fmt::format("stats {}", pid));
    EXPECT_EQ(gone.rc, 1);
    EXPECT_NE(gone.err.find("publishes no stats"), std::string::npos) << gone.err;
  }

  std::unique_ptr<test::TempDir> scratch_;
  std::string data_;
  pid_t child_ = 0;
};

TEST_F(StatsCli, LiveCountersOfARunningBench) {
  spawn({SLUICE_CLI_PATH, "bench", "--file", data_, "--size", "4M", "--block-size", "256K",
         "--xfer", "cpu-gpu", "--device", "sim", "--time", "3"});
  // cpu-gpu reads into host memory and copies: bounce or posix, depending on the buffer.
  check_live_publisher("", "sim");
}

TEST_F(StatsCli, LiveCountersOfAProgramUsingTheLibrary) {
  spawn({SLUICE_STATS_PUBLISHER, data_, "3"});
  check_live_publisher("host", "host");
}

TEST_F(StatsCli, PrometheusParserRejectsMalformedText) {
  // The validator itself must catch what it is there to catch.
  EXPECT_FALSE(
      parse_prometheus("# TYPE a counter\na{path=bounce} 1\n").errors.empty());  // unquoted label
  EXPECT_FALSE(parse_prometheus("b 1\n").errors.empty());                        // no TYPE
  EXPECT_FALSE(parse_prometheus("# TYPE 9c counter\n9c 1\n").errors.empty());    // bad name
  EXPECT_FALSE(parse_prometheus("# TYPE d counter\nd{x=\"1\"} one\n").errors.empty());  // bad value
  EXPECT_FALSE(
      parse_prometheus("# TYPE e counter\ne 1\n# TYPE e counter\n").errors.empty());  // second TYPE
  const Exposition ok = parse_prometheus(to_prometheus({PublishedStats{}}));
  EXPECT_TRUE(ok.errors.empty()) << fmt::format("{}", fmt::join(ok.errors, "\n"));
  EXPECT_TRUE(
      ok.samples.contains("sluice_bytes_total{pid=\"0\",path=\"direct\",direction=\"write\"}"));
  EXPECT_EQ(ok.samples.size(), 5U * 8U + fallback_count + 2U);
}

TEST_F(StatsCli, UnknownPidAndBadOptionsFail) {
  const CliRun r = sluice("stats 999999999");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("SLUICE_STATS=1"), std::string::npos) << r.err;
  EXPECT_EQ(sluice("stats --json --prometheus").rc, 2);
  EXPECT_EQ(sluice("stats --watch fast").rc, 2);
}

}  // namespace
}  // namespace sluice
