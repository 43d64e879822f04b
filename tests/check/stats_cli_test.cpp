// `sluice stats` reading live processes: a `sluice bench` and a small program using the library,
// both started with SLUICE_STATS=1, are read while they run (JSON fields, the listing, --watch)
// and their --prometheus output passes a Prometheus text-format parser. The segment is gone once
// the process has exited.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <fstream>
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

// How long a test waits for a state of another process. Generous: on a loaded 2-CPU machine a
// process can take seconds to start; a test that passes never waits this long.
constexpr auto patience = std::chrono::seconds(60);

// Waits for `pid` to exit (at most `patience`); its wait status, or -1 when it did not exit.
int wait_exit(pid_t pid) {
  const auto deadline = std::chrono::steady_clock::now() + patience;
  int status = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return -1;
}

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class StatsCli : public ::testing::Test {
 protected:
  void SetUp() override {
    scratch_ = std::make_unique<test::TempDir>("/var/tmp", "sluice-stats-");
    data_ = scratch_->file("data.bin");
    test::write_file(data_, test::random_bytes(4 << 20, 11));
  }
  void TearDown() override {
    for (const pid_t pid : {child_, watcher_}) {
      if (pid > 0) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
      }
    }
  }

  CliRun sluice(const std::string& args) { return test::run_captured(SLUICE_CLI_PATH, args, scratch_->path()); }

  // Starts argv with its output in `log` (in the scratch folder), with SLUICE_STATS=1 when
  // `publish`; returns its pid.
  pid_t start(std::vector<std::string> argv, const std::string& log, bool publish) {
    const std::string log_path = scratch_->file(log);
    const pid_t pid = ::fork();
    if (pid == 0) {
      if (publish) ::setenv("SLUICE_STATS", "1", 1);
      if (std::freopen(log_path.c_str(), "w", stdout) == nullptr ||
          std::freopen(log_path.c_str(), "a", stderr) == nullptr) {
        ::_exit(126);
      }
      std::vector<char*> args;
      for (auto& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      ::execv(args[0], args.data());
      ::_exit(127);
    }
    EXPECT_GT(pid, 0);
    return pid;
  }

  void spawn(std::vector<std::string> argv) { child_ = start(std::move(argv), "child.log", true); }

  // Reads the child's counters until `path` (any, when empty) shows bytes read; `path` becomes
  // the path that did.
  json wait_for_bytes(std::string& path) {
    const auto deadline = std::chrono::steady_clock::now() + patience;
    while (std::chrono::steady_clock::now() < deadline) {
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

  // The counters of one running publisher, as JSON: every field, each path's transfers with
  // exactly as many latencies, and the same transfers by device and file system.
  void check_json(const json& j, std::string_view device) {
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
      // A path's row is read between updates: every transfer counted has its latency.
      EXPECT_EQ(p.at("latency_us").at("count"), p.at("transfers")) << p.dump();
      if (p.at("transfers").get<std::uint64_t>() > 0) {
        EXPECT_GT(p.at("latency_us").at("p50").get<double>(), 0) << p.dump();
      }
    }
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
  }

  // Prometheus text that a parser accepts, with at least the bytes `j` showed (counters only grow).
  void check_prometheus(const json& j, const std::string& path, std::string_view device) {
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
  }

  // The checks on a running publisher, which runs until the test stops it with `stop_signal`:
  // `sluice stats --watch` prints it twice, the signal ends it with `exit_code`, and the watch
  // then ends too, with exit 0. `device`: the device key its transfers are counted under.
  void check_live_publisher(std::string path, std::string_view device, int stop_signal, int exit_code) {
    const json j = wait_for_bytes(path);
    if (j.empty()) return;
    check_json(j, device);

    const CliRun list = sluice("stats --json");
    ASSERT_EQ(list.rc, 0) << list.err;
    bool listed = false;
    const json procs = json::parse(list.out).at("processes");
    for (const auto& p : procs) listed = listed || p.at("pid") == child_;
    EXPECT_TRUE(listed) << list.out;

    check_prometheus(j, path, device);

    watcher_ = start({SLUICE_CLI_PATH, "stats", std::to_string(child_), "--watch", "300ms"}, "watch.log", false);
    const std::string header = fmt::format("pid {} (", child_);
    const auto deadline = std::chrono::steady_clock::now() + patience;
    while (count_of(test::read_text(scratch_->file("watch.log")), header) < 2 &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_GE(count_of(test::read_text(scratch_->file("watch.log")), header), 2U)
        << test::read_text(scratch_->file("watch.log"));
    ASSERT_EQ(::kill(child_, stop_signal), 0);

    const int status = wait_exit(child_);
    const pid_t pid = child_;
    child_ = 0;
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == exit_code)
        << "status " << status << "\n" << test::read_text(scratch_->file("child.log"));
    EXPECT_NE(::access(stats_segment_path(pid).c_str(), F_OK), 0) << "segment left behind";
    const int watch_status = wait_exit(watcher_);
    watcher_ = 0;
    EXPECT_TRUE(WIFEXITED(watch_status) && WEXITSTATUS(watch_status) == 0)
        << "--watch did not end with its process: " << test::read_text(scratch_->file("watch.log"));
    const CliRun gone = sluice(fmt::format("stats {}", pid));
    EXPECT_EQ(gone.rc, 1);
    EXPECT_NE(gone.err.find("publishes no stats"), std::string::npos) << gone.err;
  }

  std::unique_ptr<test::TempDir> scratch_;
  std::string data_;
  pid_t child_ = 0;
  pid_t watcher_ = 0;
};

TEST_F(StatsCli, LiveCountersOfARunningBench) {
  // Runs until the test interrupts it (the time bound only ends it should the test die first).
  spawn({SLUICE_CLI_PATH, "bench", "--file", data_, "--size", "4M", "--block-size", "256K",
         "--xfer", "cpu-gpu", "--device", "sim", "--time", "600"});
  // cpu-gpu reads into host memory and copies: bounce or posix, depending on the buffer.
  // Ctrl-C ends a bench with what it measured, exit 130.
  check_live_publisher("", "sim", SIGINT, 128 + SIGINT);
  EXPECT_NE(test::read_text(scratch_->file("child.log")).find("stopped by SIGINT"), std::string::npos)
      << test::read_text(scratch_->file("child.log"));
}

TEST_F(StatsCli, LiveCountersOfAProgramUsingTheLibrary) {
  spawn({SLUICE_STATS_PUBLISHER, data_, "600"});
  check_live_publisher("host", "host", SIGTERM, 0);
}

// A publisher killed by SIGKILL leaves its segment; `sluice stats` calls it stale, and the next
// process that publishes removes it.
TEST_F(StatsCli, AKilledPublishersSegmentIsRemovedByTheNextPublisher) {
  spawn({SLUICE_STATS_PUBLISHER, data_, "600"});
  std::string path = "host";
  ASSERT_FALSE(wait_for_bytes(path).empty());
  const pid_t killed = child_;
  ::kill(killed, SIGKILL);
  ASSERT_EQ(wait_exit(killed), SIGKILL);  // a wait status: killed by the signal
  child_ = 0;
  ASSERT_EQ(::access(stats_segment_path(killed).c_str(), F_OK), 0) << "SIGKILL left no segment?";
  const CliRun stale = sluice(fmt::format("stats {} --json", killed));
  ASSERT_EQ(stale.rc, 0) << stale.err;
  EXPECT_FALSE(json::parse(stale.out).at("alive").get<bool>()) << stale.out;

  spawn({SLUICE_STATS_PUBLISHER, data_, "600"});
  path = "host";
  ASSERT_FALSE(wait_for_bytes(path).empty());
  EXPECT_NE(::access(stats_segment_path(killed).c_str(), F_OK), 0) << "stale segment not removed";
  ::kill(child_, SIGTERM);
  EXPECT_EQ(wait_exit(child_), 0);
  child_ = 0;
}

// Segments that are not what they claim: `sluice stats PID` refuses each with the reason, the
// listing leaves them out, and nothing crashes. The header's documented offsets: magic (u64) at
// 0, layout version (u32) at 8, size (u32) at 12, pid (i32) at 16.
TEST_F(StatsCli, CraftedAndTruncatedSegmentsAreRefused) {
  // A genuine segment to alter: a publisher's, killed so that it stays.
  spawn({SLUICE_STATS_PUBLISHER, data_, "600"});
  std::string path = "host";
  ASSERT_FALSE(wait_for_bytes(path).empty());
  ::kill(child_, SIGKILL);
  ASSERT_EQ(wait_exit(child_), SIGKILL);
  const std::string genuine = test::read_text(stats_segment_path(child_));
  ::unlink(stats_segment_path(child_).c_str());
  child_ = 0;
  ASSERT_GT(genuine.size(), 64U);

  struct Case {
    const char* what;
    std::string bytes;
    const char* error;  // nullptr: readable (a dead process's counters)
  };
  auto with = [&](std::size_t offset, auto value, int pid) {
    std::string b = genuine;
    std::memcpy(b.data() + offset, &value, sizeof(value));
    std::memcpy(b.data() + 16, &pid, sizeof(pid));
    return b;
  };
  const int base = 99999900;  // no such process: pid_max is at most 2^22
  const std::vector<Case> cases = {
      {"truncated", genuine.substr(0, 100), "too small"},
      {"empty", "", "too small"},
      {"garbage", std::string(genuine.size(), '\x5a'), "not a sluice stats segment"},
      {"bad magic", with(0, std::uint64_t{42}, base + 3), "not a sluice stats segment"},
      {"other version", with(8, std::uint32_t{99}, base + 4), "layout version 99"},
      {"other size", with(12, std::uint32_t{64}, base + 5), "layout version"},
      {"another pid's", with(16, base + 6, base + 1234), "says it is process"},
      {"a dead process's", with(16, base + 7, base + 7), nullptr},
  };
  std::vector<std::string> made;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const int pid = base + static_cast<int>(i);
    made.push_back(stats_segment_path(pid));
    std::ofstream(made.back(), std::ios::binary) << cases[i].bytes;
  }
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const CliRun r = sluice(fmt::format("stats {} --json", base + static_cast<int>(i)));
    if (cases[i].error == nullptr) {
      ASSERT_EQ(r.rc, 0) << cases[i].what << ": " << r.err;
      EXPECT_FALSE(json::parse(r.out).at("alive").get<bool>()) << cases[i].what;
    } else {
      EXPECT_EQ(r.rc, 1) << cases[i].what << ": " << r.out;
      EXPECT_NE(r.err.find(cases[i].error), std::string::npos) << cases[i].what << ": " << r.err;
    }
  }
  // Another user's segment that names a process of this user's is a forgery.
  if (::geteuid() == 0) {
    const pid_t me = ::getpid();
    const std::string mine = stats_segment_path(me);
    ASSERT_NE(::access(mine.c_str(), F_OK), 0) << "the test process publishes?";
    made.push_back(mine);
    std::ofstream(mine, std::ios::binary) << with(16, me, me);
    ASSERT_EQ(::chown(mine.c_str(), 65534, 65534), 0) << std::strerror(errno);
    const CliRun r = sluice(fmt::format("stats {}", me));
    EXPECT_EQ(r.rc, 1) << r.out;
    EXPECT_NE(r.err.find("owned by uid 65534"), std::string::npos) << r.err;
  }
  const CliRun list = sluice("stats --json");
  EXPECT_EQ(list.rc, 0) << list.err;
  const json procs = json::parse(list.out).at("processes");
  for (const auto& p : procs) EXPECT_LT(p.at("pid").get<int>(), base) << list.out;
  for (const auto& f : made) ::unlink(f.c_str());
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
