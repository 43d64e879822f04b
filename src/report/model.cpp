// Reading bench documents for `sluice report`. A document is refused (usage error) rather than
// drawn wrong: it must be JSON, say "tool": "sluice bench", and carry a schema this sluice reads.
// Files written before "schema" existed have the same layout as schema 1 and are read as such.
#include "report/model.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sluice/error.hpp"
#include "sluice/histogram.hpp"
#include "sluice/tools/bench_report.hpp"
#include "sluice/version.hpp"

namespace sluice::report::detail {
namespace {

[[noreturn]] void bad_input(const std::string& path, std::string_view detail) {
  throw_usage_error({.op = "report", .path = path}, detail);
}

std::string str(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string{};
}
double num(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
}
std::uint64_t count(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? static_cast<std::uint64_t>(it->get<double>()) : 0;
}

Source parse_source(const Input& in) {
  Source s;
  s.path = in.path;
  s.label = in.label;
  try {
    s.doc = json::parse(in.json);
  } catch (const json::parse_error& e) {
    bad_input(in.path, fmt::format("not JSON, so not a sluice bench result ({})", e.what()));
  }
  const json& d = s.doc;
  if (!d.is_object() || str(d, "tool").rfind("sluice bench", 0) != 0 || !d.contains("results")) {
    bad_input(in.path,
              "not a sluice bench result (expected a JSON object with \"tool\": \"sluice bench\" "
              "and \"results\", as `sluice bench --json FILE` writes)");
  }
  if (auto it = d.find("schema"); it != d.end()) {
    if (!it->is_number_integer()) bad_input(in.path, "\"schema\" is not an integer");
    s.schema = it->get<int>();
    if (s.schema != bench::report_schema_version) {
      bad_input(
          in.path,
          fmt::format("written with report schema {} by sluice {}, but this sluice "
                      "({}) reads schema {}; open it with a {} sluice",
                      s.schema, str(d, "version"), version_string, bench::report_schema_version,
                      s.schema > bench::report_schema_version ? "newer" : "matching"));
    }
  }
  if (!d["results"].is_array()) bad_input(in.path, "\"results\" is not an array");
  s.version = str(d, "version");
  s.command = str(d, "command");
  s.finished = str(d, "finished");
  return s;
}

Row parse_row(const Source& s, const json& r) {
  Row row;
  row.source = &s;
  row.j = &r;
  if (!r.is_object()) bad_input(s.path, "an entry of \"results\" is not an object");
  row.xfer = str(r, "xfer");
  row.path = str(r, "path");
  row.reason = str(r, "reason");
  row.rw = str(r, "rw");
  row.phase = str(r, "phase");
  if (row.phase.empty()) row.phase = "run";
  row.memory = str(r, "memory");
  if (auto it = r.find("error"); it != r.end() && it->is_string())
    row.error = it->get<std::string>();
  row.fell_back = r.value("fell_back", false);
  if (auto c = r.find("cache"); c != r.end() && c->is_object()) {
    row.cache = str(*c, "label");
    row.cache_state = str(*c, "state");
    row.cache_odd = !c->value("held", true) || c->value("rewarmed", false);
  }
  row.block_size = count(r, "block_size");
  row.threads = count(r, "threads");
  row.iodepth = count(r, "iodepth");
  row.round = static_cast<int>(num(r, "round"));
  row.gib_per_s = num(r, "gib_per_s");
  row.iops = num(r, "iops");
  row.seconds = num(r, "seconds");
  return row;
}

// Every round's histogram merged; percentiles of the merged one are exact where averaging the
// rounds' percentiles would not be. Falls back to the first round's latency_us.
Latency case_latency(const Case& c) {
  Latency lat;
  LatencyHistogram merged;
  std::map<std::size_t, std::uint64_t> buckets;
  for (const Row* r : c.rows) {
    auto it = r->j->find("latency_histogram_ns");
    if (it == r->j->end() || !it->is_object()) continue;
    try {
      merged.merge(LatencyHistogram::from_json(it->dump()));
    } catch (const Error& e) {
      bad_input(r->source->path, fmt::format("bad latency_histogram_ns: {}", e.detail()));
    }
    for (const auto& b : it->value("buckets", json::array())) {
      if (b.is_array() && b.size() == 2)
        buckets[b[0].get<std::size_t>()] += b[1].get<std::uint64_t>();
    }
  }
  if (merged.count() > 0) {
    lat.from_histogram = true;
    lat.count = merged.count();
    lat.p50 = static_cast<double>(merged.value_at_percentile(50)) / 1e3;
    lat.p90 = static_cast<double>(merged.value_at_percentile(90)) / 1e3;
    lat.p99 = static_cast<double>(merged.value_at_percentile(99)) / 1e3;
    lat.p999 = static_cast<double>(merged.value_at_percentile(99.9)) / 1e3;
    lat.max = static_cast<double>(merged.max()) / 1e3;
    // 128 buckets per power of two are far finer than a chart can show: 4 per power of two.
    std::map<int, double> bins;
    double total = 0;
    for (auto [index, n] : buckets) {
      const double mid = (static_cast<double>(LatencyHistogram::lowest_in(index)) +
                          static_cast<double>(LatencyHistogram::highest_in(index))) /
                             2 +
                         0.5;
      bins[static_cast<int>(std::floor(std::log2(mid) * 4))] += static_cast<double>(n);
      total += static_cast<double>(n);
    }
    for (auto [bin, n] : bins) {
      lat.bins.push_back({std::exp2(bin / 4.0) / 1e3, std::exp2((bin + 1) / 4.0) / 1e3, n / total});
    }
  } else if (!c.rows.empty()) {
    const json l = c.rows.front()->j->value("latency_us", json::object());
    lat.p50 = num(l, "p50");
    lat.p90 = num(l, "p90");
    lat.p99 = num(l, "p99");
    lat.p999 = num(l, "p999");
    lat.max = num(l, "max");
  }
  return lat;
}

// The parameters of a row that vary in the report, without the transfer type: "read 4K qd4".
std::string setting_of(const Model& m, const Row& r) {
  std::string s;
  auto add = [&s](const std::string& part) { s += (s.empty() ? "" : " ") + part; };
  if (m.varies.at("rw")) add(r.rw);
  if (m.varies.at("block_size")) add(short_size(r.block_size));
  if (m.varies.at("iodepth")) add(fmt::format("qd{}", r.iodepth));
  if (m.varies.at("threads")) add(fmt::format("{}t", r.threads));
  return s;
}

// The successful run rounds grouped into cases, in first-seen order.
void group_cases(Model& m) {
  for (const Row& r : m.rows) {
    if (r.phase != "run" || !r.error.empty()) continue;
    auto same = [&](const Case& c) {
      return c.series == r.source->label && c.xfer == r.xfer && c.rw == r.rw &&
             c.block_size == r.block_size && c.threads == r.threads && c.iodepth == r.iodepth;
    };
    auto it = std::find_if(m.cases.begin(), m.cases.end(), same);
    if (it == m.cases.end()) {
      Case c;
      c.series = r.source->label;
      c.xfer = r.xfer;
      c.path = r.path;
      c.rw = r.rw;
      c.block_size = r.block_size;
      c.threads = r.threads;
      c.iodepth = r.iodepth;
      c.setting = setting_of(m, r);
      c.name = c.setting.empty() ? r.xfer : r.xfer + " " + c.setting;
      c.reason = r.reason;
      m.cases.push_back(std::move(c));
      it = std::prev(m.cases.end());
    }
    it->rows.push_back(&r);
    // As the summary table says it: the state the rounds share, or the first that did not hold.
    if (it->rows.size() == 1 || (r.cache_odd && it->cache == it->rows.front()->cache_state)) {
      it->cache = r.cache_odd || r.cache_state == "as-is" ? r.cache : r.cache_state;
    }
    if (r.fell_back && !it->fell_back) {
      it->fell_back = true;
      it->path = r.path;
      it->reason = r.reason;
    }
  }
}

// Each distinct (path, reason) once, fallbacks first: the page lists a reason once and refers
// to it from every case, instead of repeating a 150-character reason down a sweep.
void index_reasons(Model& m) {
  for (const bool fell_back : {true, false}) {
    for (std::size_t i = 0; i < m.cases.size(); ++i) {
      const Case& c = m.cases[i];
      if (c.fell_back != fell_back) continue;
      auto it = std::find_if(m.reasons.begin(), m.reasons.end(), [&](const Reason& r) {
        return r.fell_back == c.fell_back && r.path == c.path && r.text == c.reason;
      });
      if (it == m.reasons.end()) {
        m.reasons.push_back({c.path, c.reason, c.fell_back, {}});
        it = std::prev(m.reasons.end());
      }
      it->cases.push_back(i);
      m.cases[i].reason_id = static_cast<std::size_t>(it - m.reasons.begin());
    }
  }
}
}  // namespace

std::string short_size(std::uint64_t bytes) {
  static constexpr const char* units[] = {"", "K", "M", "G", "T"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return v == std::floor(v) ? fmt::format("{}{}", static_cast<std::uint64_t>(v), units[u])
                            : fmt::format("{:.1f}{}", v, units[u]);
}

std::string format_us(double us) {
  if (us >= 1e6) return fmt::format("{:.2f} s", us / 1e6);
  if (us >= 1e3) return fmt::format("{:.2f} ms", us / 1e3);
  return fmt::format("{:.1f} us", us);
}

Model build_model(const std::vector<Input>& inputs) {
  if (inputs.empty()) throw_usage_error({.op = "report"}, "no input files");
  Model m;
  m.sources.reserve(inputs.size());  // rows point into sources
  for (const Input& in : inputs) m.sources.push_back(parse_source(in));
  for (const Source& s : m.sources) {
    if (std::find(m.labels.begin(), m.labels.end(), s.label) == m.labels.end()) {
      m.labels.push_back(s.label);
    }
    for (const json& r : s.doc["results"]) m.rows.push_back(parse_row(s, r));
  }

  std::set<std::uint64_t> bs, qd, th;
  std::set<std::string> rw, xfer;
  for (const Row& r : m.rows) {
    if (r.phase != "run") continue;
    bs.insert(r.block_size);
    qd.insert(r.iodepth);
    th.insert(r.threads);
    rw.insert(r.rw);
    xfer.insert(r.xfer);
  }
  m.varies = {{"block_size", bs.size() > 1},
              {"iodepth", qd.size() > 1},
              {"threads", th.size() > 1},
              {"rw", rw.size() > 1},
              {"xfer", xfer.size() > 1}};

  group_cases(m);
  for (Case& c : m.cases) {
    std::vector<double> g, iops;
    for (const Row* r : c.rows) {
      g.push_back(r->gib_per_s);
      iops.push_back(r->iops);
    }
    c.median = bench::median(g);
    c.min = *std::min_element(g.begin(), g.end());
    c.max = *std::max_element(g.begin(), g.end());
    c.iops_median = bench::median(iops);
    c.latency = case_latency(c);
  }
  index_reasons(m);
  return m;
}

const Reason* reason_of(const Model& m, const std::string& path, const std::string& text) {
  for (const Reason& r : m.reasons) {
    if (r.path == path && r.text == text) return &r;
  }
  return nullptr;
}

std::vector<std::string> reason_cases(const Model& m, const Reason& r) {
  // Per transfer type (and input, with several): its settings in order.
  std::vector<std::pair<std::string, std::vector<std::string>>> groups;
  for (const std::size_t i : r.cases) {
    const Case& c = m.cases[i];
    const std::string key = m.labels.size() > 1 ? c.series + " · " + c.xfer : c.xfer;
    auto it =
        std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == key; });
    if (it == groups.end()) {
      groups.push_back({key, {}});
      it = std::prev(groups.end());
    }
    if (!c.setting.empty()) it->second.push_back(c.setting);
  }
  std::vector<std::string> out;
  for (const auto& [key, settings] : groups) {
    out.push_back(settings.empty() ? key : fmt::format("{}: {}", key, fmt::join(settings, ", ")));
  }
  return out;
}

}  // namespace sluice::report::detail
