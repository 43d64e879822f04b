// The ingest capacity model: the demand (bytes per GPU per second) multiplied up the tree from
// GPU to storage, each link compared with what it can carry. Shared links (storage servers, the
// core network) carry everything; per-node links (NICs, PCIe switch uplinks, the GPU's own
// x16 link) carry their share. Simple arithmetic on purpose: every figure can be checked by
// hand, and docs/scale.md does so.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sluice/error.hpp"
#include "sluice/tools/capacity.hpp"

namespace sluice::capacity {
namespace {

using nlohmann::json;

[[noreturn]] void bad(std::string_view what) {
  throw_usage_error({.op = "plan"}, what);
}

// A number followed by an optional unit; returns the number and the unit (spaces dropped).
std::pair<double, std::string> split_unit(std::string_view text, const char* kind) {
  std::string s;
  for (char c : text) {
    if (c != ' ') s += c;
  }
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception&) {
    bad(fmt::format("'{}' is not a {}", text, kind));
  }
  if (!(v >= 0) || !std::isfinite(v))
    bad(fmt::format("'{}': a {} must be a non-negative number", text, kind));
  return {v, s.substr(used)};
}

double unit_scale(const std::string& u, bool* bits) {
  static const std::map<std::string, double> scales = {{"", 1},
                                                       {"B", 1},
                                                       {"K", 1e3},
                                                       {"KB", 1e3},
                                                       {"M", 1e6},
                                                       {"MB", 1e6},
                                                       {"G", 1e9},
                                                       {"GB", 1e9},
                                                       {"T", 1e12},
                                                       {"TB", 1e12},
                                                       {"P", 1e15},
                                                       {"PB", 1e15},
                                                       {"KiB", 1024.0},
                                                       {"MiB", 1048576.0},
                                                       {"GiB", 1073741824.0},
                                                       {"TiB", 1099511627776.0}};
  *bits = false;
  std::string base = u;
  if (base.size() >= 2 && base.back() == 'b' && base != "b") {  // Gb, Mb, Tb: bits
    base.back() = 'B';
    *bits = true;
  }
  const auto it = scales.find(base);
  return it == scales.end() ? -1 : it->second;
}

}  // namespace

double Link::headroom() const noexcept {
  return required > 0 ? capacity / required : std::numeric_limits<double>::infinity();
}

double Result::deliverable() const noexcept {
  return links.empty() ? total : total * first_bottleneck().headroom();
}

bool Result::fits() const noexcept {
  return links.empty() || first_bottleneck().utilisation() <= 1.0;
}

double pcie_x16_bytes_per_s(unsigned gen) {
  switch (gen) {
    case 3:
      return 15.75e9;  // 8 GT/s x16, 128b/130b
    case 4:
      return 31.5e9;
    case 5:
      return 63.0e9;
    case 6:
      return 126.0e9;  // 64 GT/s PAM4, FLIT mode
    default:
      bad(fmt::format("--pcie-gen {}: PCIe generation 3, 4, 5 or 6", gen));
  }
}

double parse_rate(std::string_view text) {
  auto [v, unit] = split_unit(text, "rate");
  for (const char* suffix : {"/s", "ps"}) {
    if (unit.size() >= 2 && unit.ends_with(suffix)) unit.resize(unit.size() - 2);
  }
  bool bits = false;
  const double scale = unit_scale(unit, &bits);
  if (scale < 0)
    bad(fmt::format("'{}': unknown rate unit (try 25GB/s, 1.2TB/s, 3GiB/s, 400Gb/s)", text));
  return bits ? v * scale / 8 : v * scale;
}

double parse_bytes(std::string_view text) {
  const auto [v, unit] = split_unit(text, "size");
  bool bits = false;
  const double scale = unit_scale(unit, &bits);
  if (scale < 0 || bits) bad(fmt::format("'{}': unknown size unit (try 40GB, 1.5GiB, 100M)", text));
  return v * scale;
}

std::string format_rate(double b) {
  if (std::isinf(b)) return "unlimited";
  static constexpr std::pair<double, const char*> units[] = {
      {1e15, "PB/s"}, {1e12, "TB/s"}, {1e9, "GB/s"}, {1e6, "MB/s"}, {1e3, "KB/s"}};
  for (const auto& [scale, name] : units) {
    if (b >= scale) return fmt::format("{:.3g} {}", b / scale, name);
  }
  return fmt::format("{:.3g} B/s", b);
}

namespace {

// Refuses inputs the model cannot use, naming the flag.
void validate(const Inputs& in) {
  if (in.gpus < 1 || in.gpus > 10'000'000) bad("--gpus must be between 1 and 10,000,000");
  if (in.gpus_per_node < 1) bad("--gpus-per-node must be at least 1");
  if (in.nics_per_node < 1) bad("--nics-per-node must be at least 1");
  if (!(in.nic_bits_per_s > 0)) bad("--nic-speed must be larger than 0");
  if (!(in.nic_efficiency > 0 && in.nic_efficiency <= 1)) bad("--nic-efficiency must be in (0, 1]");
  if (!(in.pcie_efficiency > 0 && in.pcie_efficiency <= 1))
    bad("--pcie-efficiency must be in (0, 1]");
  if (!(in.core_oversubscription >= 1))
    bad("--oversubscription must be at least 1 (1 = non-blocking)");
  if (in.pcie_switches_per_node > in.gpus_per_node)
    bad("--pcie-switches cannot exceed --gpus-per-node");
  if ((in.storage_servers > 0) != (in.server_bytes_per_s > 0)) {
    bad("--storage-servers and --server-bandwidth go together");
  }
  const bool per_s = in.bytes_per_gpu_per_s > 0;
  const bool per_step = in.bytes_per_gpu_per_step > 0 || in.step_s > 0;
  if (per_s == per_step)
    bad("give the demand as --per-gpu RATE, or as --per-step BYTES with --step-time SECONDS");
  if (per_step && !(in.bytes_per_gpu_per_step > 0 && in.step_s > 0)) {
    bad("--per-step and --step-time go together, both larger than 0");
  }
}

// The links between the storage and one GPU, each with the demand it carries and its capacity,
// from the storage servers down to the GPU's own PCIe link.
void add_links(Result& r, const Inputs& in, double gpus_in_node) {
  const double nic_each = in.nic_bits_per_s / 8 * in.nic_efficiency;
  const double node_nics = nic_each * in.nics_per_node;
  const double pcie = pcie_x16_bytes_per_s(in.pcie_gen) * in.pcie_efficiency;

  if (in.storage_servers > 0) {
    r.links.push_back({.name = "storage servers",
                       .what = fmt::format("{} servers x {}", in.storage_servers,
                                           format_rate(in.server_bytes_per_s)),
                       .count = 1,
                       .required = r.total,
                       .capacity = in.server_bytes_per_s * in.storage_servers});
  }
  r.links.push_back(
      {.name = "core network",
       .what = fmt::format("{} nodes x {} storage NICs / {:g}:1 oversubscription", r.nodes,
                           format_rate(node_nics), in.core_oversubscription),
       .count = 1,
       .required = r.total,
       .capacity = node_nics * static_cast<double>(r.nodes) / in.core_oversubscription});
  r.links.push_back({.name = "node NICs",
                     .what = fmt::format("{} x {:g} Gb/s x {:g} efficiency", in.nics_per_node,
                                         in.nic_bits_per_s / 1e9, in.nic_efficiency),
                     .count = r.nodes,
                     .required = r.per_node,
                     .capacity = node_nics});
  if (in.measured_node_bytes_per_s > 0) {
    r.links.push_back({.name = "measured node",
                       .what = fmt::format("sluice bench: {}", in.measured_from),
                       .count = r.nodes,
                       .required = r.per_node,
                       .capacity = in.measured_node_bytes_per_s});
  }
  if (in.pcie_switches_per_node > 0) {
    const double gpus_per_switch = std::ceil(gpus_in_node / in.pcie_switches_per_node);
    r.links.push_back({.name = "PCIe switch uplink",
                       .what = fmt::format("Gen{} x16 x {:g} efficiency, {:g} GPU(s) behind each",
                                           in.pcie_gen, in.pcie_efficiency, gpus_per_switch),
                       .count = r.nodes * in.pcie_switches_per_node,
                       .required = r.per_gpu * gpus_per_switch,
                       .capacity = pcie});
  }
  r.links.push_back(
      {.name = "GPU PCIe link",
       .what = fmt::format("Gen{} x16 x {:g} efficiency", in.pcie_gen, in.pcie_efficiency),
       .count = in.gpus,
       .required = r.per_gpu,
       .capacity = pcie});
}

}  // namespace

Result model(const Inputs& in) {
  validate(in);
  const bool per_s = in.bytes_per_gpu_per_s > 0;
  Result r;
  r.inputs = in;
  r.per_gpu = per_s ? in.bytes_per_gpu_per_s : in.bytes_per_gpu_per_step / in.step_s;
  r.nodes = (in.gpus + in.gpus_per_node - 1) / in.gpus_per_node;
  const double gpus_in_node =
      static_cast<double>(std::min<std::uint64_t>(in.gpus, in.gpus_per_node));
  r.per_node = r.per_gpu * gpus_in_node;
  r.total = r.per_gpu * static_cast<double>(in.gpus);
  add_links(r, in, gpus_in_node);
  // The highest utilisation. On a tie the link nearer the GPU wins: a non-blocking core is the
  // sum of the node NICs, so when both are full it is the NICs that limit.
  for (std::size_t i = 1; i < r.links.size(); ++i) {
    if (r.links[i].utilisation() >= r.links[r.bottleneck].utilisation() * (1 - 1e-9))
      r.bottleneck = i;
  }
  // Shared links bound the GPU count at this per-GPU demand (per-node links do not: more nodes
  // bring more of them).
  double shared = std::numeric_limits<double>::infinity();
  for (const Link& l : r.links) {
    if (l.name == "storage servers") shared = std::min(shared, l.capacity);
  }
  if (!std::isinf(shared) && r.per_gpu > 0) {
    const auto g = static_cast<std::uint64_t>(shared / r.per_gpu);
    r.max_gpus = g / in.gpus_per_node * in.gpus_per_node;
  }
  return r;
}

void use_bench_report(Inputs& in, std::string_view text, std::string_view source) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {
    bad(fmt::format("--measured {}: not JSON: {}", source, e.what()));
  }
  if (!doc.is_object() || !doc.contains("results"))
    bad(fmt::format("--measured {}: not a sluice bench report", source));
  double best = 0;
  std::string how;
  for (const json& r : doc["results"]) {
    const std::uint64_t read = r.value("bytes_read", std::uint64_t{0});
    if (read == 0 || !r.value("error", json(nullptr)).is_null()) continue;
    double node = 0;
    std::string note;
    if (r.contains("mpi") && r["mpi"].is_object()) {
      // Each host's bytes over the common window; the slowest host stands for a node.
      std::map<std::string, std::uint64_t> per_host;
      for (const json& k : r["mpi"]["ranks"])
        per_host[k.value("host", "")] += k.value("bytes", std::uint64_t{0});
      const double window = r["mpi"]["window"].value("seconds", 0.0);
      if (window <= 0 || per_host.empty()) continue;
      node = std::numeric_limits<double>::infinity();
      for (const auto& [host, bytes] : per_host) {
        const double rate = static_cast<double>(bytes) / window;
        if (rate < node) {
          node = rate;
          note = fmt::format("{} ranks, slowest host {}", r["mpi"].value("world_size", 0), host);
        }
      }
    } else {
      const double s = r.value("seconds", 0.0);
      if (s <= 0) continue;
      node = static_cast<double>(r.value("bytes", std::uint64_t{0})) / s;
      note = "one process";
    }
    if (node > best) {
      best = node;
      how = fmt::format("{} ({}, {} {} bs {}, {})", source, note, r.value("xfer", "?"),
                        r.value("rw", "?"), r.value("block_size", 0), format_rate(node));
    }
  }
  if (best <= 0)
    bad(fmt::format("--measured {}: the report has no successful read result", source));
  in.measured_node_bytes_per_s = best;
  in.measured_from = how;
}

std::string report_text(const Result& r) {
  const Inputs& in = r.inputs;
  std::string out = fmt::format(
      "demand: {} GPUs ({} nodes x {}) x {} per GPU = {} per node, {} in all\n\n", in.gpus, r.nodes,
      in.gpus_per_node, format_rate(r.per_gpu), format_rate(r.per_node), format_rate(r.total));
  out += fmt::format("{:<20} {:>9} {:>13} {:>13} {:>7} {:>9}  {}\n", "link", "count", "required",
                     "capacity", "use", "headroom", "capacity from");
  for (std::size_t i = 0; i < r.links.size(); ++i) {
    const Link& l = r.links[i];
    out += fmt::format("{:<20} {:>9} {:>13} {:>13} {:>6.0f}% {:>8.2f}x  {}{}\n", l.name, l.count,
                       format_rate(l.required), format_rate(l.capacity), 100 * l.utilisation(),
                       l.headroom(), l.what, i == r.bottleneck ? "   <- first bottleneck" : "");
  }
  const Link& b = r.first_bottleneck();
  out += "\n";
  if (r.fits()) {
    out += fmt::format(
        "fits: the first bottleneck is {} at {:.0f}% ({:.2f}x headroom); the fabric carries up to "
        "{} "
        "({} per GPU)\n",
        b.name, 100 * b.utilisation(), b.headroom(), format_rate(r.deliverable()),
        format_rate(r.per_gpu * b.headroom()));
  } else {
    out += fmt::format(
        "does NOT fit: {} needs {} but carries {} ({:.0f}%); the cluster gets at most {} ({} per "
        "GPU, "
        "{:.0f}% of the demand)\n",
        b.name, format_rate(b.required), format_rate(b.capacity), 100 * b.utilisation(),
        format_rate(r.deliverable()), format_rate(r.per_gpu * b.headroom()), 100 * b.headroom());
  }
  if (r.max_gpus > 0) {
    out += fmt::format("at {} per GPU the storage servers feed at most {} GPUs\n",
                       format_rate(r.per_gpu), r.max_gpus);
  }
  return out;
}

std::string report_json(const Result& r) {
  const Inputs& in = r.inputs;
  json links = json::array();
  for (const Link& l : r.links) {
    links.push_back({{"name", l.name},
                     {"what", l.what},
                     {"count", l.count},
                     {"required_bytes_per_s", l.required},
                     {"capacity_bytes_per_s", l.capacity},
                     {"utilisation", l.utilisation()},
                     {"headroom", std::isinf(l.headroom()) ? json(nullptr) : json(l.headroom())}});
  }
  const Link& b = r.first_bottleneck();
  json inputs = {{"gpus", in.gpus},
                 {"gpus_per_node", in.gpus_per_node},
                 {"nics_per_node", in.nics_per_node},
                 {"nic_bits_per_s", in.nic_bits_per_s},
                 {"nic_efficiency", in.nic_efficiency},
                 {"pcie_gen", in.pcie_gen},
                 {"pcie_switches_per_node", in.pcie_switches_per_node},
                 {"pcie_efficiency", in.pcie_efficiency},
                 {"core_oversubscription", in.core_oversubscription},
                 {"storage_servers", in.storage_servers},
                 {"server_bytes_per_s", in.server_bytes_per_s},
                 {"bytes_per_gpu_per_s", in.bytes_per_gpu_per_s},
                 {"bytes_per_gpu_per_step", in.bytes_per_gpu_per_step},
                 {"step_s", in.step_s},
                 {"measured_node_bytes_per_s", in.measured_node_bytes_per_s},
                 {"measured_from", in.measured_from}};
  json doc = {{"tool", "sluice plan"},
              {"inputs", inputs},
              {"nodes", r.nodes},
              {"per_gpu_bytes_per_s", r.per_gpu},
              {"per_node_bytes_per_s", r.per_node},
              {"total_bytes_per_s", r.total},
              {"links", links},
              {"bottleneck",
               {{"name", b.name},
                {"utilisation", b.utilisation()},
                {"headroom", std::isinf(b.headroom()) ? json(nullptr) : json(b.headroom())}}},
              {"fits", r.fits()},
              {"deliverable_bytes_per_s",
               std::isinf(r.deliverable()) ? json(nullptr) : json(r.deliverable())},
              {"max_gpus", r.max_gpus == 0 ? json(nullptr) : json(r.max_gpus)}};
  return doc.dump(2);
}

}  // namespace sluice::capacity
