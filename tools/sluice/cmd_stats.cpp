// sluice stats: the counters a process started with SLUICE_STATS=1 publishes, read while it runs.
// Without PID: every live publisher. --watch repeats until the process (or every process) ends.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "commands.hpp"
#include "sluice/error.hpp"
#include "sluice/stats.hpp"

namespace sluice::cli {
namespace {

struct StatsArgs {
  int pid = 0;
  std::string watch;
  bool json = false;
  bool prometheus = false;
};

double parse_interval(const std::string& t) {
  const double v = parse_seconds(t, "--watch");
  if (v <= 0) throw UsageError("--watch: the interval must be positive");
  return v;
}

const char* direction_name(Direction d) { return d == Direction::read ? "read" : "write"; }

nlohmann::json latency_json(const LatencyHistogram& h) {
  auto us = [&](double p) { return static_cast<double>(h.value_at_percentile(p)) * 1e-3; };
  return {{"count", h.count()}, {"p50", us(50)}, {"p90", us(90)}, {"p99", us(99)},
          {"p999", us(99.9)},   {"max", static_cast<double>(h.max()) * 1e-3}};
}

nlohmann::json keyed_json(const std::vector<KeyedCounters>& list, const char* label) {
  nlohmann::json out = nlohmann::json::array();
  for (const KeyedCounters& k : list) {
    for (auto d : {Direction::read, Direction::write}) {
      const PathCounters& c = k.dirs[static_cast<std::size_t>(d)];
      if (c.ops == 0) continue;
      out.push_back({{label, k.key},
                     {"direction", direction_name(d)},
                     {"bytes", c.bytes},
                     {"transfers", c.ops},
                     {"errors", c.errors},
                     {"seconds", static_cast<double>(c.nanoseconds) * 1e-9}});
    }
  }
  return out;
}

nlohmann::json to_json(const PublishedStats& s) {
  nlohmann::json paths = nlohmann::json::array();
  for (auto p : {Path::host, Path::bounce, Path::posix, Path::direct}) {
    for (auto d : {Direction::read, Direction::write}) {
      const PathCounters& c = s.snapshot.at(p, d);
      paths.push_back({{"path", to_string(p)},
                       {"direction", direction_name(d)},
                       {"bytes", c.bytes},
                       {"transfers", c.ops},
                       {"ios", c.ios},
                       {"errors", c.errors},
                       {"seconds", static_cast<double>(c.nanoseconds) * 1e-9},
                       {"latency_us", latency_json(s.snapshot.latency_of(p, d))}});
    }
  }
  nlohmann::json fallbacks = nlohmann::json::object();
  for (std::size_t f = 0; f < fallback_count; ++f) {
    fallbacks[std::string(to_string(static_cast<Fallback>(f)))] = s.snapshot.fallbacks[f];
  }
  return {{"pid", s.pid},
          {"alive", s.alive},
          {"command", s.command},
          {"start_unix_s", static_cast<double>(s.start_unix_ns) * 1e-9},
          {"updated_unix_s", static_cast<double>(s.updated_unix_ns) * 1e-9},
          {"staging_waits", s.snapshot.staging_waits},
          {"paths", paths},
          {"devices", keyed_json(s.snapshot.devices, "device")},
          {"filesystems", keyed_json(s.snapshot.filesystems, "fs")},
          {"fallbacks", fallbacks}};
}

std::string rate_column(std::uint64_t now, std::uint64_t before, double interval) {
  return fmt::format(" {:>10.3f}", static_cast<double>(now - before) / interval / (1024.0 * 1024 * 1024));
}

std::string to_text(const PublishedStats& s, const PublishedStats* before, double interval) {
  std::string out = fmt::format("pid {} ({}){}\n", s.pid, s.command,
                                s.alive ? "" : " [not running: stale segment]");
  out += fmt::format("  {:<7} {:<5} {:>14} {:>10} {:>10} {:>7} {:>10} {:>9} {:>9}{}\n", "path", "dir",
                     "bytes", "transfers", "ios", "errors", "busy s", "p50 us", "p99 us",
                     before ? "      GiB/s" : "");
  for (auto p : {Path::host, Path::bounce, Path::posix, Path::direct}) {
    for (auto d : {Direction::read, Direction::write}) {
      const PathCounters& c = s.snapshot.at(p, d);
      if (c.ops == 0) continue;
      const LatencyHistogram& h = s.snapshot.latency_of(p, d);
      out += fmt::format("  {:<7} {:<5} {:>14} {:>10} {:>10} {:>7} {:>10.3f} {:>9.1f} {:>9.1f}{}\n",
                         to_string(p), direction_name(d), c.bytes, c.ops, c.ios, c.errors,
                         static_cast<double>(c.nanoseconds) * 1e-9,
                         static_cast<double>(h.value_at_percentile(50)) * 1e-3,
                         static_cast<double>(h.value_at_percentile(99)) * 1e-3,
                         before ? rate_column(c.bytes, before->snapshot.at(p, d).bytes, interval) : "");
    }
  }
  auto keyed = [&](const char* title, const std::vector<KeyedCounters>& list,
                   std::vector<KeyedCounters> StatsSnapshot::*field) {
    for (const KeyedCounters& k : list) {
      for (auto d : {Direction::read, Direction::write}) {
        const PathCounters& c = k.dirs[static_cast<std::size_t>(d)];
        if (c.ops == 0) continue;
        std::uint64_t prev = 0;
        if (before != nullptr) {
          for (const KeyedCounters& b : before->snapshot.*field) {
            if (b.key == k.key) prev = b.dirs[static_cast<std::size_t>(d)].bytes;
          }
        }
        out += fmt::format("  {:<10} {:<14} {:<5} {:>14} bytes {:>10} transfers {:>7} errors{}\n", title,
                           k.key, direction_name(d), c.bytes, c.ops, c.errors,
                           before ? rate_column(c.bytes, prev, interval) + " GiB/s" : "");
      }
    }
  };
  keyed("device", s.snapshot.devices, &StatsSnapshot::devices);
  keyed("filesystem", s.snapshot.filesystems, &StatsSnapshot::filesystems);
  std::string falls;
  for (std::size_t f = 0; f < fallback_count; ++f) {
    if (s.snapshot.fallbacks[f] == 0) continue;
    falls += fmt::format("{}{} {}", falls.empty() ? "" : ", ", to_string(static_cast<Fallback>(f)),
                         s.snapshot.fallbacks[f]);
  }
  out += fmt::format("  fell back from direct: {}\n", falls.empty() ? "none" : falls);
  out += fmt::format("  staging waits: {}\n", s.snapshot.staging_waits);
  return out;
}

std::vector<PublishedStats> collect(const StatsArgs& a) {
  if (a.pid == 0) {
    std::vector<PublishedStats> live;
    for (auto& s : list_published()) {
      // Not this command itself, should it run with SLUICE_STATS=1 too.
      if (s.alive && s.pid != ::getpid()) live.push_back(std::move(s));
    }
    return live;
  }
  std::string error;
  auto s = read_published(a.pid, &error);
  // ESRCH: no such publisher (the detail says which of the reasons read_published found).
  if (!s) throw Error(ErrorDomain::os, ESRCH, {.op = "stats"}, error);
  return {std::move(*s)};
}

void print(const StatsArgs& a, const std::vector<PublishedStats>& now,
           const std::vector<PublishedStats>& before, double interval) {
  std::string out;
  if (a.prometheus) {
    out = to_prometheus(now);
  } else if (a.json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& s : now) j.push_back(to_json(s));
    out = (a.pid != 0 ? j.at(0) : nlohmann::json{{"processes", j}}).dump() + "\n";
  } else if (now.empty()) {
    out = "no process publishes sluice stats (start one with SLUICE_STATS=1)\n";
  } else {
    for (const auto& s : now) {
      const PublishedStats* prev = nullptr;
      for (const auto& b : before) {
        if (b.pid == s.pid) prev = &b;
      }
      out += to_text(s, prev, interval);
    }
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
}

int run_stats(const StatsArgs& a) {
  if (a.json && a.prometheus) throw UsageError("--json and --prometheus exclude each other");
  if (a.pid < 0) throw UsageError("PID must be positive");
  auto now = collect(a);
  print(a, now, {}, 0);
  if (a.watch.empty()) return 0;
  const double interval = parse_interval(a.watch);
  while (true) {
    const bool any_alive =
        std::any_of(now.begin(), now.end(), [](const auto& s) { return s.alive; });
    if (!any_alive) return 0;
    std::this_thread::sleep_for(std::chrono::duration<double>(interval));
    auto before = std::move(now);
    if (a.pid != 0) {
      std::string error;
      auto s = read_published(a.pid, &error);
      if (!s) return 0;  // the process ended and removed its segment
      now = {std::move(*s)};
    } else {
      now = collect(a);
    }
    print(a, now, before, interval);
  }
}

}  // namespace

Runner add_stats_command(CLI::App& app) {
  auto a = std::make_shared<StatsArgs>();
  auto* c = app.add_subcommand("stats",
                               "Show the live counters of processes started with SLUICE_STATS=1");
  c->add_option("PID", a->pid, "the process to read (default: every live publisher)");
  c->add_option("--watch", a->watch,
                "print again every INTERVAL (1s, 500ms) until the process ends");
  c->add_flag("--json", a->json, "one JSON object per print");
  c->add_flag("--prometheus", a->prometheus, "Prometheus text exposition format");
  return [a] { return run_stats(*a); };
}

}  // namespace sluice::cli
