// The report page: every number as a table (readable with no script at all), the charts as
// Vega-Lite specs drawn by the inlined library. The page records script errors and, per chart,
// how many marks it drew, its panels, its legends' words and whether it (or the page) scrolls
// sideways into #sluice-status, which the browser test reads.
#include <algorithm>
#include <cerrno>
#include <fstream>
#include <set>

#include <fmt/format.h>

#include "report/assets.hpp"
#include "report/charts.hpp"
#include "report/model.hpp"
#include "report/rerun.hpp"
#include "sluice/error.hpp"
#include "sluice/tools/report.hpp"
#include "sluice/version.hpp"

namespace sluice::report {
namespace {

using detail::Case;
using detail::Chart;
using detail::json;
using detail::Model;
using detail::Row;

std::string esc(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// JSON inside <script>: '<' only occurs in strings, where \u003c means the same, so no
// "</script>" in a command line or file name can end the element early.
std::string script_json(const json& j) {
  std::string s = j.dump();
  std::string out;
  out.reserve(s.size());
  for (char c : s) out += c == '<' ? std::string("\\u003c") : std::string(1, c);
  return out;
}

std::string text_of(const json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_null()) return "";
  return j.dump();
}

constexpr const char* style = R"(
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;max-width:1200px;padding:0 24px 48px;color:#222}
h1{font-size:24px;margin:24px 0 4px}h2{font-size:19px;margin:32px 0 8px;border-bottom:1px solid #ddd;padding-bottom:4px}
h3{font-size:15px;margin:20px 0 6px}
table{border-collapse:collapse;margin:8px 0 16px;font-size:12.5px}th,td{border:1px solid #ddd;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f4f4f4}td.n{text-align:right;font-variant-numeric:tabular-nums}
code,pre{font:12px ui-monospace,Menlo,Consolas,monospace;background:#f6f6f6}code{padding:1px 3px;word-break:break-all}
pre{padding:8px;overflow:auto;max-height:320px}
.note{color:#555}.warn{background:#fff4e5;border-left:4px solid #f0a020;padding:8px 12px}
.fb{color:#b8420f;font-weight:600}.err{color:#c00}.slow{background:#fde8e8}
.charts{display:flex;flex-wrap:wrap;gap:24px}.chart{min-height:40px;max-width:100%;overflow-x:auto}
#reasons td:nth-child(3){max-width:560px}#reasons tr:target{background:#fff4e5}
nav a{margin-right:14px}
)";

// The page's only own script: hooks first (so that a failing library is recorded too), then the
// charts, then the status the browser test reads.
constexpr const char* hook_script = R"(
window.__sluiceErrors = [];
window.addEventListener('error', function (e) { window.__sluiceErrors.push(String(e.message || e)); });
window.addEventListener('unhandledrejection', function (e) { window.__sluiceErrors.push('unhandled rejection: ' + String(e.reason)); });
(function () {
  var original = console.error;
  console.error = function () {
    window.__sluiceErrors.push(Array.prototype.map.call(arguments, String).join(' '));
    return original.apply(console, arguments);
  };
})();
)";

constexpr const char* embed_script = R"(
(function () {
  var status = document.getElementById('sluice-status');
  var specs = JSON.parse(document.getElementById('sluice-specs').textContent);
  // Data marks drawn (bars, points, line segments...), not axes or legends.
  function countMarks(node) {
    var n = 0;
    if (!node) return 0;
    var items = node.items || [];
    if (node.marktype && node.marktype !== 'group' && node.role === 'mark') n += items.length;
    items.forEach(function (item) { (item.items || []).forEach(function (child) { n += countMarks(child); }); });
    return n;
  }
  // How the chart sits in this window: whether it scrolls sideways, its panels, its legends.
  function layout(id) {
    var el = document.getElementById(id);
    return {scrollWidth: el.scrollWidth, clientWidth: el.clientWidth,
            panels: el.querySelectorAll('g.role-scope.cell > g').length,
            legend: Array.prototype.map.call(el.querySelectorAll('.role-legend text'),
                                             function (t) { return t.textContent; })};
  }
  var results = [];
  Promise.all(specs.map(function (s) {
    return vegaEmbed('#' + s.id, s.spec, {actions: false, renderer: 'svg', mode: 'vega-lite'})
      .then(function (r) {
        var chart = layout(s.id);
        chart.id = s.id;
        chart.marks = countMarks(r.view.scenegraph().root);
        results.push(chart);
      })
      .catch(function (e) { window.__sluiceErrors.push(s.id + ': ' + e); results.push({id: s.id, marks: 0}); });
  })).then(function () {
    var page = document.scrollingElement;
    status.textContent = JSON.stringify({charts: results, errors: window.__sluiceErrors,
      page: {scrollWidth: page.scrollWidth, clientWidth: page.clientWidth}});
    status.setAttribute('data-state', 'done');
  });
})();
)";

class Page {
 public:
  explicit Page(bool charts) : charts_(charts) {}

  void section(const char* id, const char* title) {
    if (open_) out_ += "</section>\n";
    out_ += fmt::format("<section id=\"{}\">\n<h2>{}</h2>\n", id, title);
    open_ = true;
  }
  void html(std::string_view s) { out_ += s; }
  void note(std::string_view s) { out_ += fmt::format("<p class=\"note\">{}</p>\n", esc(s)); }
  void charts(std::vector<Chart> list) {
    if (list.empty()) return;
    out_ += "<div class=\"charts\">";
    for (Chart& c : list) {
      if (charts_) out_ += fmt::format("<div class=\"chart\" id=\"{}\"></div>", c.id);
      specs_.push_back({{"id", c.id}, {"spec", std::move(c.spec)}});
    }
    out_ += "</div>\n";
  }
  void table(const std::vector<std::string>& head,
             const std::vector<std::vector<std::string>>& rows,
             const std::vector<bool>& highlight = {}, const std::string& id = "") {
    out_ += id.empty() ? "<table><tr>" : fmt::format("<table id=\"{}\"><tr>", id);
    for (const auto& h : head) out_ += "<th>" + esc(h) + "</th>";
    out_ += "</tr>\n";
    for (std::size_t i = 0; i < rows.size(); ++i) {
      out_ += i < highlight.size() && highlight[i] ? "<tr class=\"slow\">" : "<tr>";
      for (const auto& cell : rows[i]) {
        // Cells starting with \x01 are trusted HTML built here; numbers align right.
        if (!cell.empty() && cell[0] == '\x01')
          out_ += "<td>" + cell.substr(1) + "</td>";
        else if (!cell.empty() && cell.find_first_not_of("0123456789., -+%e") == std::string::npos)
          out_ += "<td class=\"n\">" + esc(cell) + "</td>";
        else
          out_ += "<td>" + esc(cell) + "</td>";
      }
      out_ += "</tr>\n";
    }
    out_ += "</table>\n";
  }
  [[nodiscard]] std::size_t chart_count() const { return specs_.size(); }
  std::string finish() {
    if (open_) out_ += "</section>\n";
    return std::move(out_);
  }
  [[nodiscard]] const json& specs() const { return specs_; }

 private:
  bool charts_;
  std::string out_;
  json specs_ = json::array();
  bool open_ = false;
};

std::string f3(double v) {
  return fmt::format("{:.3f}", v);
}
std::string f0(double v) {
  return fmt::format("{:.0f}", v);
}
std::string f1(double v) {
  return fmt::format("{:.1f}", v);
}
std::string code(const std::string& s) {
  return "\x01<code>" + esc(s) + "</code>";
}

// "R1": the reference to a reason of the reasons table, linked to its row.
std::string reason_link(const Model& m, const detail::Reason& r) {
  const auto n = static_cast<std::size_t>(&r - m.reasons.data()) + 1;
  return fmt::format("<a href=\"#reason-{}\">R{}</a>", n, n);
}

// Each distinct reason once, with the cases that share it.
void reasons_table(Page& p, const Model& m) {
  p.html(
      "<h3>Why each path</h3>\n<table id=\"reasons\"><tr><th></th><th>path</th><th>reason"
      "</th><th>cases</th></tr>\n");
  for (std::size_t i = 0; i < m.reasons.size(); ++i) {
    const detail::Reason& r = m.reasons[i];
    std::string cases;
    for (const std::string& line : detail::reason_cases(m, r))
      cases += (cases.empty() ? "" : "<br>") + esc(line);
    p.html(fmt::format(
        "<tr id=\"reason-{}\"><td>R{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n", i + 1, i + 1,
        r.fell_back ? fmt::format("<span class=\"fb\">{} (fell back)</span>", esc(r.path))
                    : esc(r.path),
        esc(r.text), cases));
  }
  p.html("</table>\n");
}

void throughput_section(Page& p, const Model& m) {
  p.section("throughput", "Throughput by transfer type and path");
  if (m.cases.empty()) {
    p.note("No successful runs in these inputs (see the results table for errors).");
    return;
  }
  p.charts(detail::throughput_charts(m));
  std::vector<std::vector<std::string>> rows;
  for (const Case& c : m.cases) {
    const std::string path =
        c.fell_back ? fmt::format("<span class=\"fb\">{} (fell back)</span>", esc(c.path))
                    : esc(c.path);
    rows.push_back({c.series, c.name, std::to_string(c.rows.size()), f3(c.median), f3(c.min),
                    f3(c.max), f0(c.iops_median), c.cache.empty() ? "-" : c.cache, "\x01" + path,
                    "\x01" + reason_link(m, m.reasons[c.reason_id])});
  }
  p.table({"input", "case", "rounds", "GiB/s median", "GiB/s min", "GiB/s max", "IOPS", "cache",
           "path taken", "why"},
          rows, {}, "cases");
  reasons_table(p, m);
}

void sweep_section(Page& p, const Model& m) {
  p.section("sweeps", "Sweeps: block size, queue depth, threads");
  auto charts = detail::sweep_charts(m);
  if (charts.empty()) {
    p.note(
        "No sweep: every result has the same block size, queue depth and thread count. "
        "Make one with --block-size 4K:1M:x4, or give several files (one per --iodepth or "
        "--threads) the same --label.");
    return;
  }
  p.charts(std::move(charts));
  p.note("One line per input and transfer type; the throughput table above has every point.");
}

void latency_section(Page& p, const Model& m) {
  p.section("latency", "Latency");
  if (m.cases.empty()) return p.note("No successful runs.");
  p.charts(detail::latency_charts(m));
  std::vector<std::vector<std::string>> rows;
  for (const Case& c : m.cases) {
    const auto& l = c.latency;
    rows.push_back({c.series, c.name, f1(l.p50), f1(l.p90), f1(l.p99), f1(l.p999), f1(l.max),
                    l.from_histogram ? std::to_string(l.count) : "(no histogram)"});
  }
  p.table({"input", "case", "p50 µs", "p90 µs", "p99 µs", "p99.9 µs", "max µs", "I/Os"}, rows);
}

void timeline_section(Page& p, const Model& m) {
  p.section("timeline", "Throughput over time");
  auto charts = detail::timeline_charts(m);
  if (charts.empty()) return p.note("No time-bound runs (--time) in these inputs, so no samples.");
  p.charts(std::move(charts));
  std::vector<std::vector<std::string>> rows;
  for (const Row& r : m.rows) {
    auto it = r.j->find("samples");
    if (r.phase != "run" || it == r.j->end() || !it->is_array() || it->empty()) continue;
    double lo = 1e300, hi = 0;
    for (const json& s : *it) {
      lo = std::min(lo, s.value("gib_per_s", 0.0));
      hi = std::max(hi, s.value("gib_per_s", 0.0));
    }
    rows.push_back({r.source->label, r.xfer, std::to_string(r.round), std::to_string(it->size()),
                    f3(lo), f3(hi)});
  }
  p.table({"input", "xfer", "round", "samples", "slowest GiB/s", "fastest GiB/s"}, rows);
}

void mpi_section(Page& p, const Model& m) {
  p.section("mpi", "MPI ranks");
  auto charts = detail::mpi_charts(m);
  if (charts.empty()) return p.note("No MPI runs in these inputs.");
  p.charts(std::move(charts));
  for (const Row& r : m.rows) {
    auto it = r.j->find("mpi");
    if (r.phase != "run" || it == r.j->end() || !it->is_object()) continue;
    const json& mpi = *it;
    const json win = mpi.value("window", json::object());
    const json slow = mpi.value("slowest", json::object());
    p.html(fmt::format("<h3>{} · {} {} round {}: {} ranks on {} hosts</h3>\n", esc(r.source->label),
                       esc(r.xfer), detail::short_size(r.block_size), r.round,
                       mpi.value("world_size", 0), mpi.value("hosts", 0)));
    std::string line = fmt::format(
        "Window {:.3f} s (first start to last end); aggregate {:.3f} GiB/s. "
        "Slowest rank {} on {}: {:.3f} GiB/s, {:.1f}% below the median {:.3f}.",
        win.value("seconds", 0.0), r.gib_per_s, slow.value("rank", -1), slow.value("host", "?"),
        slow.value("gib_per_s", 0.0), slow.value("gap_pct", 0.0),
        slow.value("median_gib_per_s", 0.0));
    if (const auto sw = mpi.find("stonewall"); sw != mpi.end() && sw->is_object()) {
      line += fmt::format(
          " Stonewall ({}) at {:.3f} s: {:.3f} GiB/s when the first rank finished, "
          "{:.3f} GiB/s for everything.",
          sw->value("mode", "?"), sw->value("seconds", 0.0),
          sw->value("stonewalled_gib_per_s", 0.0), sw->value("completed_gib_per_s", 0.0));
    }
    p.note(line);
    std::vector<std::vector<std::string>> rows;
    std::vector<bool> slowest;
    for (const json& k : mpi.value("ranks", json::array())) {
      const json lat = k.value("latency_us", json::object());
      rows.push_back({std::to_string(k.value("rank", -1)), text_of(k.value("host", json())),
                      std::to_string(k.value("local_rank", -1)), text_of(k.value("device", json())),
                      f3(k.value("gib_per_s", 0.0)), f0(k.value("iops", 0.0)),
                      f3(k.value("seconds", 0.0)), f1(lat.value("p50", 0.0)),
                      f1(lat.value("p99", 0.0)), f1(lat.value("max", 0.0)),
                      text_of(k.value("error", json()))});
      slowest.push_back(k.value("rank", -2) == slow.value("rank", -1));
    }
    p.table({"rank", "host", "local rank", "device", "GiB/s", "IOPS", "seconds", "p50 µs", "p99 µs",
             "max µs", "error"},
            rows, slowest);
  }
}

void results_section(Page& p, const Model& m) {
  p.section("results", "Every result, and the command that reruns it");
  std::vector<std::vector<std::string>> rows;
  for (const Row& r : m.rows) {
    const json lat = r.j->value("latency_us", json::object());
    std::string path = esc(r.path);
    const detail::Reason* why = detail::reason_of(m, r.path, r.reason);
    const std::string reason = why ? reason_link(m, *why) : esc(r.reason);
    if (r.fell_back) path = fmt::format("<span class=\"fb\">{} (fell back)</span>", esc(r.path));
    if (r.fell_back || why) path += ": " + reason;
    if (!r.error.empty())
      path += fmt::format("<br><span class=\"err\">error: {}</span>", esc(r.error));
    rows.push_back({r.source->label, r.xfer, r.phase, std::to_string(r.round), r.rw,
                    detail::short_size(r.block_size), std::to_string(r.threads),
                    std::to_string(r.iodepth), f3(r.gib_per_s), f0(r.iops),
                    f1(lat.value("p50", 0.0)), f1(lat.value("p99", 0.0)),
                    r.cache.empty() ? "-" : r.cache, "\x01" + path, code(detail::rerun_command(r))});
  }
  p.table({"input", "xfer", "phase", "round", "rw", "bs", "threads", "qd", "GiB/s", "IOPS",
           "p50 µs", "p99 µs", "cache", "path", "rerun"},
          rows);
}

void kv_table(Page& p, const json& obj) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& [k, v] : obj.items()) rows.push_back({k, text_of(v)});
  p.table({"field", "value"}, rows);
}

void system_section(Page& p, const Model& m) {
  p.section("system", "System, configuration and version");
  for (const detail::Source& s : m.sources) {
    const json sys = s.doc.value("system", json::object());
    const json cfg = s.doc.value("config", json::object());
    p.html(
        fmt::format("<h3>{} <span class=\"note\">({})</span></h3>\n", esc(s.label), esc(s.path)));
    p.table({"", ""},
            {{"sluice version", s.version.empty() ? "?" : s.version},
             {"finished", s.finished},
             {"report schema", s.schema == 0 ? "(before schema 1)" : std::to_string(s.schema)},
             {"command", code(s.command)},
             {"rerun all of it", code("sluice bench --replay " + detail::shell_quote(s.path))}});
    const json cpu = sys.value("cpu", json::object());
    p.table({"host", "kernel", "CPU", "logical CPUs", "governor", "memory"},
            {{text_of(sys.value("hostname", json())), text_of(sys.value("kernel", json())),
              text_of(cpu.value("model", json())), text_of(cpu.value("logical_cpus", json())),
              text_of(cpu.value("governor", json())),
              text_of(sys.value("memory", json::object()).value("total", json()))}});
    std::vector<std::vector<std::string>> files;
    for (const json& f : sys.value("files", json::array())) {
      const json bd = f.value("block_device", json::object());
      const json link = bd.value("pcie_link", json::object());
      files.push_back(
          {text_of(f.value("path", json())), text_of(f.value("fs_type", json())),
           text_of(f.value("mount_point", json())), text_of(f.value("mount_options", json())),
           text_of(f.value("source", json())),
           text_of(bd.value("name", json())) + " " + text_of(bd.value("model", json())),
           link.empty()
               ? ""
               : text_of(link.value("speed", json())) + " x" + text_of(link.value("width", json())),
           text_of(bd.value("queue_scheduler", json()))});
    }
    if (!files.empty()) {
      p.table(
          {"file", "fs", "mount", "options", "source", "block device", "PCIe link", "scheduler"},
          files);
    }
    std::vector<std::vector<std::string>> gpus;
    for (const json& g : sys.value("gpus", json::array())) {
      gpus.push_back({text_of(g.value("spec", json())), text_of(g.value("name", json())),
                      text_of(g.value("pci_bus_id", json())), text_of(g.value("driver", json())),
                      text_of(g.value("selection", json()))});
    }
    if (!gpus.empty()) p.table({"GPU", "name", "PCI", "driver", "selection"}, gpus);
    if (const json mpi = s.doc.value("mpi", json()); mpi.is_object()) {
      p.html("<p>MPI:</p>");
      kv_table(p, mpi);
    }
    p.html("<details><summary>configuration (the workload; --replay reruns it)</summary>\n");
    kv_table(p, cfg.value("workload", json::object()));
    json rest = cfg;
    rest.erase("workload");
    kv_table(p, rest);
    std::vector<std::vector<std::string>> conf;
    for (const json& c : sys.value("sluice_config", json::array())) {
      conf.push_back({text_of(c.value("name", json())), text_of(c.value("value", json())),
                      text_of(c.value("source", json())), text_of(c.value("env", json()))});
    }
    if (!conf.empty()) p.table({"sluice setting", "value", "from", "environment"}, conf);
    p.html("</details>\n");
  }
}

}  // namespace

ChartLibrary chart_library() {
  const auto& a = detail::chart_assets;
  return {a.available, std::string(a.versions), std::string(a.missing)};
}

std::string render_html(const std::vector<Input>& inputs, const Options& options) {
  const Model m = detail::build_model(inputs);
  const ChartLibrary lib = chart_library();
  const bool charts = options.charts && lib.available;
  Page p(charts);

  p.section("summary", "Inputs");
  std::vector<std::vector<std::string>> in;
  for (const detail::Source& s : m.sources) {
    in.push_back({s.label, s.path, s.version, s.finished, std::to_string(s.doc["results"].size())});
  }
  p.table({"label", "file", "sluice", "finished", "results"}, in);
  if (charts) {
    p.note(
        fmt::format("Charts drawn by {} (inlined: this page needs no network). Hover for values; "
                    "every number is also in the tables.",
                    lib.versions));
  } else {
    p.html(fmt::format(
        "<p class=\"warn\" id=\"tables-only\">Tables only: {}. The numbers are all here{}.</p>\n",
        esc(options.charts ? lib.missing
                           : "charts were switched off for this report (--tables-only)"),
        options.charts ? "; rebuild sluice where npm can reach its registry to get charts" : ""));
  }
  throughput_section(p, m);
  sweep_section(p, m);
  latency_section(p, m);
  timeline_section(p, m);
  mpi_section(p, m);
  results_section(p, m);
  system_section(p, m);
  const std::size_t n_charts = p.chart_count();
  const json specs = p.specs();
  std::string body = p.finish();

  std::string page = fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta name=\"generator\" content=\"sluice {}\">\n<title>{}</title>\n<style>{}</style>\n",
      version_string, esc(options.title), style);
  if (charts) {
    page += fmt::format("<script>{}</script>\n", hook_script);
    for (std::string_view js : detail::chart_assets.scripts) {
      page += "<script>";
      page += js;
      page += "</script>\n";
    }
  }
  page += fmt::format(
      "</head>\n<body>\n<h1>{}</h1>\n<p class=\"note\">Made by sluice {} from {} "
      "file{}.</p>\n<nav><a href=\"#throughput\">throughput</a><a href=\"#sweeps\">"
      "sweeps</a><a href=\"#latency\">latency</a><a href=\"#timeline\">over time</a>"
      "<a href=\"#mpi\">MPI ranks</a><a href=\"#results\">all results</a><a "
      "href=\"#system\">system</a></nav>\n",
      esc(options.title), version_string, m.sources.size(), m.sources.size() == 1 ? "" : "s");
  page += body;
  if (charts) {
    page += fmt::format(
        "<pre id=\"sluice-status\" hidden data-state=\"pending\" data-charts=\"{}\"></pre>\n",
        n_charts);
    page += "<script type=\"application/json\" id=\"sluice-specs\">" + script_json(specs) +
            "</script>\n";
    page += fmt::format("<script>{}</script>\n", embed_script);
  } else {
    page +=
        "<pre id=\"sluice-status\" hidden data-state=\"tables-only\" data-charts=\"0\"></pre>\n";
  }
  page += "</body>\n</html>\n";
  return page;
}

std::vector<Input> read_inputs(const std::vector<std::string>& paths,
                               const std::vector<std::string>& labels) {
  if (labels.size() > paths.size()) {
    throw_usage_error({.op = "report"},
                      fmt::format("{} labels for {} files", labels.size(), paths.size()));
  }
  std::vector<Input> out;
  for (std::size_t i = 0; i < paths.size(); ++i) {
    std::ifstream f(paths[i], std::ios::binary);
    if (!f) throw_usage_error({.op = "report", .path = paths[i]}, "cannot open the file");
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::string label =
        i < labels.size() ? labels[i] : std::filesystem::path(paths[i]).stem().string();
    out.push_back({paths[i], std::move(label), std::move(text)});
  }
  return out;
}

void write_html(const std::filesystem::path& out, const std::vector<Input>& inputs,
                const Options& options) {
  const std::string page = render_html(inputs, options);
  const std::filesystem::path tmp = out.string() + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw_os_error(errno, {.op = "write", .path = tmp.string()});
    f << page;
    if (!f.flush()) throw_os_error(errno, {.op = "write", .path = tmp.string()});
  }
  std::error_code ec;
  std::filesystem::rename(tmp, out, ec);
  if (ec) throw_os_error(ec.value(), {.op = "rename", .path = out.string()});
}

}  // namespace sluice::report
