// Benchmark output: the human tables, gdsio's result line, CSV, and the JSON report (with the
// plan it came from, so --replay can rerun it).
#include <chrono>
#include <ctime>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sluice/error.hpp"
#include "sluice/tools/bench_report.hpp"
#include "sluice/version.hpp"

namespace sluice::bench {
namespace {

using nlohmann::json;

double us(std::uint64_t ns) { return static_cast<double>(ns) / 1e3; }

std::string size_label(std::uint64_t b) {
  if (b % MiB == 0) return fmt::format("{}M", b / MiB);
  if (b % KiB == 0) return fmt::format("{}K", b / KiB);
  return std::to_string(b);
}

json latency_json(const LatencyHistogram& h) {
  return {{"mean", h.mean() / 1e3},
          {"p50", us(h.value_at_percentile(50))},
          {"p90", us(h.value_at_percentile(90))},
          {"p99", us(h.value_at_percentile(99))},
          {"p999", us(h.value_at_percentile(99.9))},
          {"min", us(h.min())},
          {"max", us(h.max())}};
}

// One direction of a run (the "read" / "write" objects of a result).
json direction_json(const RunResult& r, const DirectionStats& d) {
  return {{"bytes", d.bytes},
          {"ios", d.ios},
          {"gib_per_s", r.gib_per_s(d)},
          {"gb_per_s", r.seconds > 0 ? static_cast<double>(d.bytes) / 1e9 / r.seconds : 0.0},
          {"iops", r.iops(d)},
          {"latency_us", latency_json(d.latency)},
          {"latency_histogram_ns", json::parse(d.latency.to_json())}};
}

bool mixed(RwMode m) noexcept { return does_reads(m) && does_writes(m); }

json workload_json(const Workload& w) {
  return {{"files", w.files},       {"dir", w.dir},
          {"size", w.size},         {"offset", w.offset},
          {"block_size", w.block_size}, {"rw", to_string(w.rw)},
          {"mix_read", w.mix_read}, {"threads", w.threads},
          {"iodepth", w.iodepth},   {"time_s", w.time_s},
          {"warmup_s", w.warmup_s}, {"unaligned", w.unaligned},
          {"seed", w.seed},         {"verify", w.verify},
          {"direct", w.direct},     {"cache_policy", std::string(to_string(w.cache_policy))},
          {"xfer", to_string(w.xfer)},
          {"device", w.device},
          {"memory", w.memory ? json(to_string(*w.memory)) : json(nullptr)},
          {"strict", w.strict},     {"numa_node", w.numa_node},
          {"sample_interval_s", w.sample_interval_s},
          {"submit_batch", w.submit_batch}, {"reap_batch", w.reap_batch},
          {"huge_pages", w.huge_pages}, {"via_library", w.via_library}};
}

Workload workload_from(const json& j) {
  Workload w;
  w.files = j.value("files", std::vector<std::string>{});
  w.dir = j.value("dir", "");
  w.size = j.value("size", std::uint64_t{0});
  w.offset = j.value("offset", std::uint64_t{0});
  w.block_size = j.value("block_size", MiB);
  w.rw = parse_rw(j.value("rw", "read"));
  w.mix_read = j.value("mix_read", 50U);
  w.threads = j.value("threads", 1U);
  w.iodepth = j.value("iodepth", 1U);
  w.time_s = j.value("time_s", 0.0);
  w.warmup_s = j.value("warmup_s", 0.0);
  w.unaligned = j.value("unaligned", false);
  w.seed = j.value("seed", std::uint64_t{1});
  w.verify = j.value("verify", false);
  w.direct = j.value("direct", true);
  Config policy;  // the configuration's parser, so a bad spelling gets its error
  policy.set("cache_policy", j.value("cache_policy", "bypass"));
  w.cache_policy = policy.cache_policy;
  w.xfer = parse_xfer(j.value("xfer", "cpu-only"));
  w.device = j.value("device", "auto");
  if (j.contains("memory") && j["memory"].is_string()) w.memory = parse_memory_kind(j["memory"].get<std::string>());
  w.strict = j.value("strict", false);
  w.numa_node = j.value("numa_node", -1);
  w.sample_interval_s = j.value("sample_interval_s", 1.0);
  w.submit_batch = j.value("submit_batch", 0U);
  w.reap_batch = j.value("reap_batch", 0U);
  w.huge_pages = j.value("huge_pages", true);
  w.via_library = j.value("via_library", false);
  return w;
}

json plan_json(const Plan& p) {
  json x = json::array();
  for (auto t : p.xfers) x.push_back(to_string(t));
  return {{"workload", workload_json(p.workload)},
          {"block_sizes", p.block_sizes},
          {"xfers", x},
          {"repeat", p.repeat},
          {"drop_caches", p.drop_caches},
          {"cache", to_string(p.cache)}};
}

Plan plan_from(const json& j) {
  Plan p;
  p.workload = workload_from(j.at("workload"));
  p.block_sizes = j.value("block_sizes", std::vector<std::uint64_t>{});
  for (const auto& x : j.value("xfers", std::vector<std::string>{})) p.xfers.push_back(parse_xfer(x));
  p.repeat = j.value("repeat", 1U);
  p.drop_caches = j.value("drop_caches", false);
  // Plans written before cache states existed ran on whatever the cache held: they rerun cold,
  // the like-for-like default, since "whatever it held" cannot be reproduced.
  p.cache = parse_cache_state(j.value("cache", "cold"));
  return p;
}

// The page cache state a run started in (docs/bench.md, "Cache state"); fractions are null where
// no residency probe answered.
json cache_json(const CacheRecord& c) {
  auto fraction = [&](double f) { return c.known ? json(f) : json(nullptr); };
  return {{"state", to_string(c.state)},
          {"held", c.held()},
          {"label", c.label()},
          {"resident_start", fraction(c.start_fraction())},
          {"resident_end", fraction(c.end_fraction())},
          {"pages", c.pages},
          {"rewarmed", c.rewarmed},
          {"how", c.how},
          {"error", c.error.empty() ? json(nullptr) : json(c.error)}};
}

json result_obj(const RunResult& r) {
  json paths = json::array();
  for (const auto& p : r.paths) paths.push_back({{"path", p.path}, {"reason", p.reason}, {"ios", p.ios}});
  json samples = json::array();
  for (const auto& s : r.samples) samples.push_back({{"t", s.t}, {"gib_per_s", s.gib_per_s}, {"iops", s.iops}});
  json o = {{"xfer", to_string(r.xfer)},
            {"xfer_gdsio", static_cast<int>(r.xfer) == 100 ? -1 : static_cast<int>(r.xfer)},
            {"phase", r.phase},
            {"round", r.round},
            {"path", r.path},
            {"reason", r.reason},
            {"fell_back", r.fell_back},
            {"paths", paths},
            {"rw", to_string(r.rw)},
            {"block_size", r.block_size},
            {"threads", r.threads},
            {"iodepth", r.iodepth},
            {"memory", r.memory},
            {"device", r.device},
            {"bytes", r.bytes},
            {"bytes_read", r.reads.bytes},
            {"bytes_written", r.writes.bytes},
            {"dataset_bytes", r.dataset_bytes},
            {"ios", r.ios},
            {"seconds", r.seconds},
            {"gib_per_s", r.gib_per_s()},
            {"gb_per_s", r.gb_per_s()},
            {"iops", r.iops()},
            {"latency_us", latency_json(r.latency)},
            {"latency_histogram_ns", json::parse(r.latency.to_json())},
            {"cpu_user_s", r.cpu_user_s},
            {"cpu_sys_s", r.cpu_sys_s},
            {"cpu_seconds_per_gib", r.cpu_seconds_per_gib()},
            {"verified", r.verified},
            {"samples", samples},
            {"cache", cache_json(r.cache)},
            {"error", r.error.empty() ? json(nullptr) : json(r.error)}};
  if (r.clat.count() > 0) {  // fio's clat, where the run measured it (--submit-batch N)
    o["clat_us"] = latency_json(r.clat);
    o["clat_histogram_ns"] = json::parse(r.clat.to_json());
  }
  // Each direction the mode does, on its own: a mixed run's reads and writes have their own
  // throughput and latency distribution (fio's "read" / "write" sections).
  if (does_reads(r.rw)) o["read"] = direction_json(r, r.reads);
  if (does_writes(r.rw)) o["write"] = direction_json(r, r.writes);
  return o;
}

std::string iso_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// The table's latency columns: mean, p50, p90, p99, p99.9, max in microseconds.
std::string latency_cells(const LatencyHistogram& h) {
  return fmt::format("{:>9.1f} {:>9.1f} {:>9.1f} {:>9.1f} {:>9.1f} {:>9.1f}", h.mean() / 1e3,
                     us(h.value_at_percentile(50)), us(h.value_at_percentile(90)),
                     us(h.value_at_percentile(99)), us(h.value_at_percentile(99.9)), us(h.max()));
}

// A line under a row whose run did not start in the cache state asked for, or was served from
// memory on later passes of a cold start: the figure is then not what the cache column claims.
std::string cache_warning(const RunResult& r) {
  const CacheRecord& c = r.cache;
  std::string out;
  if (!c.error.empty()) out += fmt::format("  !! cache: {}\n", c.error);
  if (!c.held()) {
    out += fmt::format(
        "  !! {} was to start {}, but the page cache held {:.0f}% of the data set ({}){}\n", to_string(r.xfer),
        to_string(c.state), 100 * c.start_fraction(), c.how,
        c.state == CacheState::cold ? ": pages another process maps or locks, or a file system that keeps "
                                      "them (tmpfs), stay cached"
                                    : ": the data set may not fit in memory");
  } else if (c.rewarmed) {
    out += fmt::format(
        "  !! {} started cold, but read the data set {:.1f} times through the page cache, which held {:.0f}% "
        "of it by the end: later passes came from memory (a size-bound run, without --time, reads it once)\n",
        to_string(r.xfer), r.dataset_bytes > 0 ? static_cast<double>(r.reads.bytes) / static_cast<double>(r.dataset_bytes) : 0.0,
        100 * c.end_fraction());
  }
  return out;
}

}  // namespace

std::string cache_note(const Plan& plan) {
  if (plan.cache == CacheState::warm) {
    return "cache: warm: each run that reads starts with its files' range read through the page cache, the\n"
           "       O_DIRECT types reading what it holds from it (cache_policy auto); column cache: the share\n"
           "       of the range cached as the run began\n";
  }
  if (plan.cache == CacheState::cold) {
    return "cache: cold: each run that reads starts with its files' range written back and dropped from the\n"
           "       page cache (fdatasync, posix_fadvise DONTNEED: fio's invalidate=1; --warm reads it in\n"
           "       instead); column cache: the share of the range cached as the run began\n";
  }
  return "cache: as it is, nothing dropped or read in; column cache: the share of the files' range cached\n"
         "       as the run began\n";
}

std::string result_table(const std::vector<RunResult>& runs, bool header) {
  std::string out;
  if (header) out = fmt::format(
      "{:<16} {:<9} {:>6} {:>3} {:>4} {:>8} {:>8} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8}  {:<13} {}\n",
      "xfer", "rw", "bs", "thr", "qd", "GiB/s", "GB/s", "IOPS", "mean us", "p50", "p90", "p99",
      "p99.9", "max", "CPUs/GiB", "cache", "path (reason)");
  for (const RunResult& r : runs) {
    std::string name(to_string(r.xfer));
    if (r.phase != "run") name += "/" + r.phase;
    out += fmt::format("{:<16} {:<9} {:>6} {:>3} {:>4} {:>8.3f} {:>8.3f} {:>10.0f} {} {:>8.3f}  {:<13} {} ({})\n",
                       name, to_string(r.rw), size_label(r.block_size), r.threads, r.iodepth,
                       r.gib_per_s(), r.gb_per_s(), r.iops(), latency_cells(r.latency),
                       r.cpu_seconds_per_gib(), r.cache.label(), r.path.empty() ? "-" : r.path, r.reason);
    if (r.clat.count() > 0) {
      out += fmt::format("{:<16} {:<9} {:>6} {:>3} {:>4} {:>8} {:>8} {:>10} {} {:>8}  {}\n", "  clat", "", "",
                         "", "", "", "", "", latency_cells(r.clat), "",
                         "(completion latency: the submitting syscall left out, as fio's clat)");
    }
    if (mixed(r.rw)) {
      for (const auto* d : {&r.reads, &r.writes}) {
        out += fmt::format("{:<16} {:<9} {:>6} {:>3} {:>4} {:>8.3f} {:>8.3f} {:>10.0f} {}\n",
                           d == &r.reads ? "  reads" : "  writes", d == &r.reads ? "read" : "write", "",
                           "", "", r.gib_per_s(*d),
                           r.seconds > 0 ? static_cast<double>(d->bytes) / 1e9 / r.seconds : 0.0,
                           r.iops(*d), latency_cells(d->latency));
      }
    }
    if (r.fell_back) {
      out += fmt::format("  !! {} did not run on the direct path: {}\n", to_string(r.xfer), r.reason);
    }
    out += cache_warning(r);
    if (!r.error.empty()) {
      out += fmt::format("  !! FAILED after {} in {:.3f} s (figures above cover that part): {}\n",
                         format_size(r.bytes), r.seconds, r.error);
    }
  }
  return out;
}

std::string summary_table(const std::vector<Summary>& summaries) {
  std::string out = fmt::format("{:<16} {:>6} {:>6} {:>9} {:>11} {:>9} {:>9} {:>9} {:>7}  {:<13} {}\n", "xfer",
                                "bs", "rounds", "GiB/s", "IOPS", "p50 us", "p99 us", "CPUs/GiB", "ratio", "cache",
                                "path");
  for (const Summary& s : summaries) {
    out += fmt::format("{:<16} {:>6} {:>6} {:>9.3f} {:>11.0f} {:>9.1f} {:>9.1f} {:>9.3f} {:>6.2f}x  {:<13} {}\n",
                       to_string(s.xfer), size_label(s.block_size), s.rounds, s.gib_per_s, s.iops,
                       s.p50_us, s.p99_us, s.cpu_seconds_per_gib, s.ratio, s.cache, s.path);
  }
  return out;
}

std::string gdsio_line(const RunResult& r) {
  static constexpr std::string_view io_types[] = {"READ", "WRITE", "RANDREAD", "RANDWRITE", "RW", "RANDRW"};
  std::string depth;
  if (r.xfer == XferType::gpu_batch || r.iodepth > 1) depth = fmt::format("IoDepth: {} ", r.iodepth);
  return fmt::format(
      "IoType: {} XferType: {} Threads: {} {}DataSetSize: {}/{}(KiB) IOSize: {}(KiB) Throughput: {:.6f} "
      "GiB/sec, Avg_Latency: {:.6f} usecs ops: {} total_time {:.6f} secs",
      io_types[static_cast<int>(r.rw)], gdsio_name(r.xfer), r.threads, depth, r.bytes / KiB,
      r.dataset_bytes / KiB, r.block_size / KiB, r.gib_per_s(), r.latency.mean() / 1e3, r.ios, r.seconds);
}

std::string csv_header() {
  std::string h =
      "xfer,phase,round,rw,block_size,threads,iodepth,memory,bytes,ios,seconds,gib_per_s,gb_per_s,iops,"
      "lat_mean_us,lat_p50_us,lat_p90_us,lat_p99_us,lat_p999_us,lat_max_us,cpu_seconds_per_gib,path,"
      "fell_back,reason,error";
  for (const char* d : {"read", "write"}) {
    h += fmt::format(",{0}_bytes,{0}_ios,{0}_gib_per_s,{0}_iops,{0}_lat_mean_us,{0}_lat_p50_us,{0}_lat_p90_us,"
                     "{0}_lat_p99_us,{0}_lat_p999_us,{0}_lat_max_us",
                     d);
  }
  // fio's clat where the run measured it (--submit-batch N), empty cells otherwise.
  h += ",clat_mean_us,clat_p50_us,clat_p90_us,clat_p99_us,clat_p999_us,clat_max_us";
  h += ",cache,cache_resident_start,cache_resident_end";
  return h + "\n";
}

std::string csv_row(const RunResult& r) {
  auto quote = [](const std::string& s) {
    std::string q = "\"";
    for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
  };
  // ",mean,p50,p90,p99,p99.9,max" in microseconds.
  auto latency = [](const LatencyHistogram& h) {
    return fmt::format(",{:.3f},{:.3f},{:.3f},{:.3f},{:.3f},{:.3f}", h.mean() / 1e3,
                       us(h.value_at_percentile(50)), us(h.value_at_percentile(90)),
                       us(h.value_at_percentile(99)), us(h.value_at_percentile(99.9)), us(h.max()));
  };
  std::string tail;
  for (const auto* d : {&r.reads, &r.writes}) {
    tail += fmt::format(",{},{},{:.6f},{:.1f}{}", d->bytes, d->ios, r.gib_per_s(*d), r.iops(*d),
                        latency(d->latency));
  }
  tail += r.clat.count() > 0 ? latency(r.clat) : std::string(",,,,,,");
  tail += r.cache.known ? fmt::format(",{},{:.4f},{:.4f}", quote(r.cache.label()), r.cache.start_fraction(),
                                      r.cache.end_fraction())
                        : fmt::format(",{},,", quote(r.cache.label()));
  return fmt::format("{},{},{},{},{},{},{},{},{},{},{:.6f},{:.6f},{:.6f},{:.1f}{},{:.6f},{},{},{},{}{}\n",
                     to_string(r.xfer), r.phase, r.round, to_string(r.rw), r.block_size, r.threads, r.iodepth,
                     r.memory, r.bytes, r.ios, r.seconds, r.gib_per_s(), r.gb_per_s(), r.iops(),
                     latency(r.latency), r.cpu_seconds_per_gib(), r.path, r.fell_back ? "true" : "false",
                     quote(r.reason), quote(r.error), tail);
}

std::string plan_to_json(const Plan& plan) { return plan_json(plan).dump(); }

Plan plan_from_json(std::string_view text) {
  try {
    return plan_from(json::parse(text));
  } catch (const json::exception& e) {
    throw_usage_error({.op = "bench"}, fmt::format("not a benchmark plan: {}", e.what()));
  }
}

Plan plan_from_report(std::string_view text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw_usage_error({.op = "replay"}, fmt::format("not JSON: {}", e.what()));
  }
  if (!j.is_object() || !j.contains("config")) {
    throw_usage_error({.op = "replay"}, "not a sluice bench report (no \"config\")");
  }
  try {
    return plan_from(j["config"]);
  } catch (const json::exception& e) {
    throw_usage_error({.op = "replay"}, fmt::format("malformed \"config\": {}", e.what()));
  }
}

std::string result_json(const RunResult& r) { return result_obj(r).dump(); }

std::string report_json(const Plan& plan, std::string_view command, const std::vector<RunResult>& runs) {
  json results = json::array();
  for (const auto& r : runs) results.push_back(result_obj(r));
  json summary = json::array();
  for (const auto& s : summarize(runs)) {
    summary.push_back({{"xfer", to_string(s.xfer)}, {"block_size", s.block_size}, {"rounds", s.rounds},
                       {"gib_per_s", s.gib_per_s}, {"iops", s.iops}, {"p50_us", s.p50_us},
                       {"p99_us", s.p99_us}, {"cpu_seconds_per_gib", s.cpu_seconds_per_gib},
                       {"ratio", s.ratio}, {"path", s.path}, {"cache", s.cache}});
  }
  json doc = {{"tool", "sluice bench"},
              {"schema", report_schema_version},
              {"version", version_string},
              {"command", command},
              {"finished", iso_now()},
              {"config", plan_json(plan)},
              {"system", json::parse(system_json(plan))},
              {"results", results},
              {"summary", summary}};
  return doc.dump(2);
}

}  // namespace sluice::bench
