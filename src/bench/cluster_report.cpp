// Combining the ranks' results of a phase (IOR's aggregate over the common window, exact
// histogram merges, the slowest rank) and printing them: per-rank table, CSV, the JSON report.
#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sluice/error.hpp"
#include "sluice/tools/bench_cluster.hpp"
#include "sluice/tools/bench_report.hpp"
#include "worker.hpp"

namespace sluice::bench {
namespace {

using nlohmann::json;

double ns_to_us(std::uint64_t ns) {
  return static_cast<double>(ns) / 1e3;
}

json direction_wire(const DirectionStats& d) {
  return {{"bytes", d.bytes}, {"ios", d.ios}, {"hist", json::parse(d.latency.to_json())}};
}

DirectionStats direction_from(const json& j) {
  DirectionStats d;
  d.bytes = j.at("bytes");
  d.ios = j.at("ios");
  d.latency = LatencyHistogram::from_json(j.at("hist").dump());
  return d;
}

double gibps(std::uint64_t bytes, double s) {
  return s > 0 ? static_cast<double>(bytes) / static_cast<double>(GiB) / s : 0.0;
}

}  // namespace

std::string rank_run_to_wire(const RankRun& rr) {
  const RunResult& r = rr.result;
  json paths = json::array();
  for (const auto& p : r.paths) paths.push_back({p.path, p.reason, p.ios});
  json j = {{"rank", rr.rank},
            {"host", rr.host},
            {"local_rank", rr.local_rank},
            {"numa_node", rr.numa_node},
            {"xfer", to_string(r.xfer)},
            {"rw", to_string(r.rw)},
            {"phase", r.phase},
            {"round", r.round},
            {"block_size", r.block_size},
            {"threads", r.threads},
            {"iodepth", r.iodepth},
            {"bytes", r.bytes},
            {"ios", r.ios},
            {"dataset_bytes", r.dataset_bytes},
            {"seconds", r.seconds},
            {"start", r.start_unix},
            {"end", r.end_unix},
            {"cpu_user_s", r.cpu_user_s},
            {"cpu_sys_s", r.cpu_sys_s},
            {"hist", json::parse(r.latency.to_json())},
            {"clat", json::parse(r.clat.to_json())},
            {"reads", direction_wire(r.reads)},
            {"writes", direction_wire(r.writes)},
            {"path", r.path},
            {"reason", r.reason},
            {"fell_back", r.fell_back},
            {"paths", paths},
            {"memory", r.memory},
            {"device", r.device},
            {"verified", r.verified},
            {"error", r.error},
            {"stopped_bytes", r.stopped_bytes ? json(*r.stopped_bytes) : json(nullptr)},
            {"stopped_s", r.stopped_s},
            {"cache", {to_string(r.cache.state), r.cache.pages, r.cache.cached_start, r.cache.cached_end,
                       r.cache.known, r.cache.rewarmed, r.cache.how, r.cache.error}}};
  return j.dump();
}

RankRun rank_run_from_wire(std::string_view text) {
  try {
    const json j = json::parse(text);
    RankRun rr;
    rr.rank = j.at("rank");
    rr.host = j.at("host");
    rr.local_rank = j.at("local_rank");
    rr.numa_node = j.at("numa_node");
    RunResult& r = rr.result;
    r.xfer = parse_xfer(j.at("xfer").get<std::string>());
    r.rw = parse_rw(j.at("rw").get<std::string>());
    r.phase = j.at("phase");
    r.round = j.at("round");
    r.block_size = j.at("block_size");
    r.threads = j.at("threads");
    r.iodepth = j.at("iodepth");
    r.bytes = j.at("bytes");
    r.ios = j.at("ios");
    r.dataset_bytes = j.at("dataset_bytes");
    r.seconds = j.at("seconds");
    r.start_unix = j.at("start");
    r.end_unix = j.at("end");
    r.cpu_user_s = j.at("cpu_user_s");
    r.cpu_sys_s = j.at("cpu_sys_s");
    r.latency = LatencyHistogram::from_json(j.at("hist").dump());
    r.clat = LatencyHistogram::from_json(j.at("clat").dump());
    r.reads = direction_from(j.at("reads"));
    r.writes = direction_from(j.at("writes"));
    r.path = j.at("path");
    r.reason = j.at("reason");
    r.fell_back = j.at("fell_back");
    for (const auto& p : j.at("paths")) r.paths.push_back({p.at(0), p.at(1), p.at(2)});
    r.memory = j.at("memory");
    r.device = j.at("device");
    r.verified = j.at("verified");
    r.error = j.at("error");
    if (!j.at("stopped_bytes").is_null())
      r.stopped_bytes = j.at("stopped_bytes").get<std::uint64_t>();
    r.stopped_s = j.at("stopped_s");
    const json& c = j.at("cache");
    r.cache = {.state = parse_cache_state(c.at(0).get<std::string>()), .pages = c.at(1), .cached_start = c.at(2),
               .cached_end = c.at(3), .known = c.at(4), .rewarmed = c.at(5), .how = c.at(6), .error = c.at(7)};
    return rr;
  } catch (const json::exception& e) {
    throw_usage_error({.op = "bench"}, fmt::format("malformed rank result: {}", e.what()));
  }
}

namespace {

// The aggregate's description of the phase, from the first rank's (every rank ran the same).
RunResult aggregate_header(const RunResult& first) {
  RunResult a;
  a.xfer = first.xfer;
  a.rw = first.rw;
  a.phase = first.phase;
  a.round = first.round;
  a.block_size = first.block_size;
  a.threads = first.threads;
  a.iodepth = first.iodepth;
  a.memory = first.memory;
  a.verified = true;
  a.cache.state = first.cache.state;
  a.cache.known = true;  // until a rank's probe did not answer
  a.cache.how = first.cache.how;
  return a;
}

RankRow row_of(const RankRun& rr) {
  const RunResult& r = rr.result;
  return {.rank = rr.rank,
          .host = rr.host,
          .local_rank = rr.local_rank,
          .device = r.device,
          .bytes = r.bytes,
          .ios = r.ios,
          .start = r.start_unix,
          .end = r.end_unix,
          .seconds = r.seconds,
          .gib_per_s = r.gib_per_s(),
          .iops = r.iops(),
          .p50_us = ns_to_us(r.latency.value_at_percentile(50)),
          .p99_us = ns_to_us(r.latency.value_at_percentile(99)),
          .max_us = ns_to_us(r.latency.max()),
          .error = r.error};
}

// Sums and merges one rank's result into the aggregate; the first failure names its rank.
void add_to_aggregate(RunResult& a, const RankRun& rr, detail::PathCounts& paths) {
  const RunResult& r = rr.result;
  a.bytes += r.bytes;
  a.ios += r.ios;
  a.dataset_bytes += r.dataset_bytes;
  a.cpu_user_s += r.cpu_user_s;
  a.cpu_sys_s += r.cpu_sys_s;
  a.latency.merge(r.latency);
  a.clat.merge(r.clat);
  a.reads.merge(r.reads);
  a.writes.merge(r.writes);
  a.fell_back = a.fell_back || r.fell_back;
  a.verified = a.verified && r.verified;
  // Every rank's pages together: the aggregate's cache state is the job's data set's.
  a.cache.pages += r.cache.pages;
  a.cache.cached_start += r.cache.cached_start;
  a.cache.cached_end += r.cache.cached_end;
  a.cache.known = a.cache.known && r.cache.known;
  a.cache.rewarmed = a.cache.rewarmed || r.cache.rewarmed;
  if (a.cache.error.empty() && !r.cache.error.empty()) a.cache.error = fmt::format("rank {}: {}", rr.rank, r.cache.error);
  for (const auto& p : r.paths) paths[{p.path, p.reason}] += p.ios;
  if (!r.error.empty() && a.error.empty()) {
    a.error = fmt::format("rank {} on {}: {}", rr.rank, rr.host, r.error);
  }
}

Slowest slowest_of(const std::vector<RankRow>& rows) {
  std::vector<double> rates;
  for (const RankRow& row : rows) rates.push_back(row.gib_per_s);
  const auto slow = std::min_element(
      rows.begin(), rows.end(),
      [](const RankRow& x, const RankRow& y) { return x.gib_per_s < y.gib_per_s; });
  Slowest s;
  s.rank = slow->rank;
  s.host = slow->host;
  s.gib_per_s = slow->gib_per_s;
  s.median_gib_per_s = median(rates);
  s.gap_pct = s.median_gib_per_s > 0 ? 100 * (s.median_gib_per_s - slow->gib_per_s) / s.median_gib_per_s : 0;
  return s;
}

StonewallFigures stonewall_of(const std::vector<RankRun>& ranks, const ClusterRun& c,
                              const std::string& mode) {
  StonewallFigures s;
  s.mode = mode;
  double stop = c.window_start;
  for (const RankRun& rr : ranks) {
    const RunResult& r = rr.result;
    // A rank that finished before the stonewall counts whole.
    s.stonewalled_bytes += r.stopped_bytes.value_or(r.bytes);
    stop = std::max(stop, r.stopped_bytes ? r.start_unix + r.stopped_s : r.end_unix);
  }
  s.seconds = stop - c.window_start;
  s.stonewalled_gib_per_s = gibps(s.stonewalled_bytes, s.seconds);
  s.completed_bytes = c.aggregate.bytes;
  s.completed_gib_per_s = gibps(c.aggregate.bytes, c.aggregate.seconds);
  return s;
}

}  // namespace

ClusterRun aggregate_ranks(const std::vector<RankRun>& ranks, const std::string& stonewall_mode) {
  if (ranks.empty()) throw_usage_error({.op = "bench"}, "no rank results to combine");
  ClusterRun c;
  c.world_size = static_cast<int>(ranks.size());
  const RunResult& first = ranks.front().result;
  c.aggregate = aggregate_header(first);
  RunResult& a = c.aggregate;
  c.window_start = first.start_unix;
  c.window_end = first.end_unix;
  std::set<std::string> hosts, devices;
  detail::PathCounts paths;
  for (const RankRun& rr : ranks) {
    hosts.insert(rr.host);
    if (!rr.result.device.empty()) devices.insert(rr.result.device);
    c.window_start = std::min(c.window_start, rr.result.start_unix);
    c.window_end = std::max(c.window_end, rr.result.end_unix);
    add_to_aggregate(a, rr, paths);
    c.ranks.push_back(row_of(rr));
    c.rank_results.push_back(rr.result);
  }
  c.hosts = static_cast<int>(hosts.size());
  a.seconds = c.window_end - c.window_start;
  a.start_unix = c.window_start;
  a.end_unix = c.window_end;
  detail::set_paths(a, paths);
  if (a.fell_back) a.reason = fmt::format("FELL BACK on some ranks: {}", a.reason);
  for (const auto& d : devices) a.device += (a.device.empty() ? "" : ", ") + d;
  c.slowest = slowest_of(c.ranks);
  if (!stonewall_mode.empty()) c.stonewall = stonewall_of(ranks, c, stonewall_mode);
  return c;
}

std::string rank_table(const ClusterRun& c) {
  std::string out = fmt::format(
      "  {} ranks on {} host(s); aggregate = {} bytes / {:.3f} s (latest end - "
      "earliest start) = {:.3f} GiB/s\n",
      c.world_size, c.hosts, c.aggregate.bytes, c.aggregate.seconds, c.aggregate.gib_per_s());
  if (c.stonewall) {
    const StonewallFigures& s = *c.stonewall;
    out += fmt::format(
        "  stonewall ({}): {} bytes in {:.3f} s = {:.3f} GiB/s; completed: {} bytes = {:.3f} "
        "GiB/s\n",
        s.mode, s.stonewalled_bytes, s.seconds, s.stonewalled_gib_per_s, s.completed_bytes,
        s.completed_gib_per_s);
  }
  out +=
      fmt::format("  {:>5} {:<16} {:>5} {:<14} {:>12} {:>8} {:>8} {:>9} {:>9} {:>9} {:>9} {:>8}\n",
                  "rank", "host", "local", "device", "bytes", "start+s", "seconds", "GiB/s", "IOPS",
                  "p50 us", "p99 us", "error");
  for (const RankRow& r : c.ranks) {
    out += fmt::format(
        "  {:>5} {:<16} {:>5} {:<14} {:>12} {:>8.3f} {:>8.3f} {:>9.3f} {:>9.0f} {:>9.1f} {:>9.1f} "
        "{:>8}\n",
        r.rank, r.host, r.local_rank, r.device.empty() ? "-" : r.device, r.bytes,
        r.start - c.window_start, r.seconds, r.gib_per_s, r.iops, r.p50_us, r.p99_us,
        r.error.empty() ? "-" : "FAILED");
  }
  out +=
      fmt::format("  slowest: rank {} on {}, {:.3f} GiB/s, {:.1f}% below the median {:.3f} GiB/s\n",
                  c.slowest.rank, c.slowest.host, c.slowest.gib_per_s, c.slowest.gap_pct,
                  c.slowest.median_gib_per_s);
  return out;
}

std::string cluster_csv(const std::vector<ClusterRun>& runs) {
  auto quote = [](const std::string& s) {
    std::string q = "\"";
    for (char ch : s) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
    return q + "\"";
  };
  std::string out = "rank,host," + csv_header();
  for (const ClusterRun& c : runs) {
    out += "all,," + csv_row(c.aggregate);
    for (std::size_t i = 0; i < c.ranks.size(); ++i) {
      out += fmt::format("{},{},", c.ranks[i].rank, quote(c.ranks[i].host)) +
             csv_row(c.rank_results[i]);
    }
  }
  return out;
}

std::string cluster_report_json(const Plan& plan, std::string_view command,
                                const std::vector<ClusterRun>& runs, const ClusterInfo& info) {
  std::vector<RunResult> aggregates;
  for (const auto& c : runs) aggregates.push_back(c.aggregate);
  json doc = json::parse(report_json(plan, command, aggregates));
  doc["mpi"] = {{"world_size", info.world_size},
                {"hosts", info.hosts},
                {"launcher", info.launcher},
                {"rotate", info.rotate},
                {"stonewall_s", info.stonewall_s > 0 ? json(info.stonewall_s) : json(nullptr)},
                {"stonewall_first_done", info.stonewall_first_done}};
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const ClusterRun& c = runs[i];
    json ranks = json::array();
    for (const RankRow& r : c.ranks) {
      ranks.push_back({{"rank", r.rank},
                       {"host", r.host},
                       {"local_rank", r.local_rank},
                       {"device", r.device},
                       {"bytes", r.bytes},
                       {"ios", r.ios},
                       {"start", r.start},
                       {"end", r.end},
                       {"seconds", r.seconds},
                       {"gib_per_s", r.gib_per_s},
                       {"iops", r.iops},
                       {"latency_us", {{"p50", r.p50_us}, {"p99", r.p99_us}, {"max", r.max_us}}},
                       {"error", r.error.empty() ? json(nullptr) : json(r.error)}});
    }
    json stonewall = nullptr;
    if (c.stonewall) {
      const StonewallFigures& s = *c.stonewall;
      stonewall = {{"seconds", s.seconds},
                   {"mode", s.mode},
                   {"stonewalled_bytes", s.stonewalled_bytes},
                   {"stonewalled_gib_per_s", s.stonewalled_gib_per_s},
                   {"completed_bytes", s.completed_bytes},
                   {"completed_gib_per_s", s.completed_gib_per_s}};
    }
    doc["results"][i]["mpi"] = {{"world_size", c.world_size},
                                {"hosts", c.hosts},
                                {"window",
                                 {{"start", c.window_start},
                                  {"end", c.window_end},
                                  {"seconds", c.window_end - c.window_start}}},
                                {"stonewall", stonewall},
                                {"slowest",
                                 {{"rank", c.slowest.rank},
                                  {"host", c.slowest.host},
                                  {"gib_per_s", c.slowest.gib_per_s},
                                  {"median_gib_per_s", c.slowest.median_gib_per_s},
                                  {"gap_pct", c.slowest.gap_pct}}},
                                {"ranks", ranks}};
  }
  return doc.dump(2);
}

}  // namespace sluice::bench
