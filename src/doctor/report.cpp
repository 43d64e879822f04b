// The doctor's report as JSON (docs/doctor.md lists the fields) and as human text.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "sluice/tools/bench_report.hpp"
#include "sluice/tools/doctor.hpp"

namespace sluice::doctor {
namespace {

using nlohmann::json;

std::string rate(double gib_s) {
  if (gib_s < 1) return fmt::format("{:.0f} MiB/s", gib_s * 1024);
  return fmt::format("{:.2f} GiB/s", gib_s);
}

json workload_json(const bench::Workload& w) {
  bench::Plan p;
  p.workload = w;
  json j = json::parse(bench::plan_to_json(p));
  return j.contains("workload") ? j.at("workload") : j;
}

json probe_json(const Probe& p) {
  const bench::Workload& w = p.workload;
  return {{"name", p.name},
          {"change", p.change},
          {"gib_s", p.gib_s},
          {"seconds", p.seconds},
          {"cpu_cores", p.cpu_cores},
          {"system_busy", p.system_busy},
          {"cold_cache", p.cold_cache},
          {"path", p.path},
          {"error", p.error},
          {"block_size", w.block_size},
          {"iodepth", w.iodepth},
          {"threads", w.threads},
          {"direct", w.direct},
          {"unaligned", w.unaligned},
          {"offset", w.offset},
          {"xfer", bench::to_string(w.xfer)},
          {"numa_node", w.numa_node},
          {"via_library", w.via_library},
          {"rounds", p.rounds},
          {"others_read_share", p.others_read_share},
          {"engine_loop", bench::runs_engine_loop(w)}};
}

}  // namespace

std::string to_json(const Report& r) {
  const Evidence& e = r.evidence;
  const Diagnosis& d = r.diagnosis;
  json findings = json::array();
  for (const auto& f : d.findings) {
    findings.push_back(
        {{"cause", to_string(f.cause)},
         {"evidence", f.evidence},
         {"recommendation", f.recommendation},
         {"expected_gib_s", f.expected_gib_s ? json(*f.expected_gib_s) : json(nullptr)},
         {"measured", f.measured}});
  }
  json probes = json::array();
  probes.push_back(probe_json(e.baseline));
  for (const auto& p : e.trials) probes.push_back(probe_json(p));
  json throttles = json::array();
  for (const auto& t : e.throttles) {
    throttles.push_back({{"file", t.file},
                         {"devno", t.devno},
                         {"read_bps", t.read_bps},
                         {"write_bps", t.write_bps},
                         {"read_iops", t.read_iops},
                         {"write_iops", t.write_iops}});
  }
  json links = json::array();
  for (const auto& l : e.links) {
    links.push_back({{"what", l.what},
                     {"speed", l.speed},
                     {"width", l.width},
                     {"max_speed", l.max_speed},
                     {"max_width", l.max_width},
                     {"gib_s", l.gib_s},
                     {"max_gib_s", l.max_gib_s}});
  }
  json facts = {{"cpus", e.cpus},
                {"cached_before", e.cached_before},
                {"fs_type", e.fs_type},
                {"devno", e.devno},
                {"memory_fs", e.memory_fs},
                {"o_direct", e.o_direct},
                {"dio_align", e.dio_align},
                {"throttles", throttles},
                {"links", links},
                {"numa_nodes", e.numa_nodes},
                {"device_numa_node", e.device_numa_node},
                {"iommu", e.iommu},
                {"iommu_cmdline", e.iommu_cmdline},
                {"memory_gib_s", e.memory_gib_s},
                {"h2d_gib_s", e.h2d_gib_s}};
  json j = {{"achieved_gib_s", d.achieved_gib_s},
            {"ceiling_gib_s", d.ceiling_gib_s},
            {"near_ceiling", d.near_ceiling},
            {"summary", d.summary},
            {"findings", findings},
            {"notes", d.notes},
            {"confidence",
             {{"low", d.confidence.low},
              {"reason", d.confidence.reason},
              {"few_rounds", d.confidence.few_rounds},
              {"device_shared", d.confidence.device_shared}}},
            {"workload", workload_json(e.workload)},
            {"probes", probes},
            {"skipped", r.skipped},
            {"facts", facts},
            {"budget_s", r.budget_s},
            {"elapsed_s", r.elapsed_s}};
  return j.dump(2);
}

std::string to_text(const Report& r) {
  const Evidence& e = r.evidence;
  const Diagnosis& d = r.diagnosis;
  const bench::Workload& w = e.workload;
  std::string out;
  out += fmt::format("Workload: {} {} bs={} iodepth={} threads={} {}{} on {}{}\n",
                     bench::to_string(w.xfer), bench::to_string(w.rw), w.block_size, w.iodepth,
                     w.threads,
                     !w.direct    ? "buffered"
                     : e.o_direct ? "O_DIRECT"
                                  : "O_DIRECT (unavailable here: buffered)",
                     w.unaligned ? " unaligned" : "",
                     w.files.empty() ? w.dir : fmt::format("{}", fmt::join(w.files, ",")),
                     e.fs_type.empty() ? std::string{} : fmt::format(" ({})", e.fs_type));
  out += fmt::format("Achieved: {}   ceiling (best measured): {}{}\n", rate(d.achieved_gib_s),
                     rate(d.ceiling_gib_s), d.near_ceiling ? "   near the ceiling" : "");
  out += d.summary + "\n";
  if (d.confidence.low) out += fmt::format("Low confidence: {}\n", d.confidence.reason);
  if (!d.findings.empty()) {
    out += "\nFindings, most recovered first:\n";
    int i = 1;
    for (const auto& f : d.findings) {
      out += fmt::format("{}. {}{}\n", i++, to_string(f.cause),
                         f.expected_gib_s ? fmt::format(" (expected {}{})", rate(*f.expected_gib_s),
                                                        f.measured ? ", measured" : ", estimated")
                                          : std::string{});
      out += fmt::format("   evidence: {}\n   change:   {}\n", f.evidence, f.recommendation);
    }
  }
  if (!d.notes.empty()) {
    out += "\nNotes:\n";
    for (const auto& n : d.notes) out += fmt::format("  - {}\n", n);
  }
  out += "\nProbes:\n";
  auto line = [&](const Probe& p) {
    out += fmt::format("  {:<11} {:>11}  {:>5.2f} CPUs  {:>6.2f} s in {} round{}{}  {}{}\n", p.name,
                       rate(p.gib_s), p.cpu_cores, p.seconds, p.rounds, p.rounds == 1 ? " " : "s",
                       p.cold_cache ? " cold" : "     ", p.change.empty() ? "(as given)" : p.change,
                       p.error.empty() ? std::string{} : fmt::format("  error: {}", p.error));
  };
  line(e.baseline);
  for (const auto& p : e.trials) line(p);
  for (const auto& s : r.skipped) out += fmt::format("  skipped: {}\n", s);
  out += fmt::format(
      "\nFacts: {} CPUs, {} NUMA node(s), page cache held {} of the files before the run, "
      "memcpy {}{}{}\n",
      e.cpus, e.numa_nodes,
      e.cached_before < 0 ? std::string("(unknown)")
                          : fmt::format("{:.0f}%", e.cached_before * 100),
      rate(e.memory_gib_s),
      e.h2d_gib_s > 0 ? fmt::format(", host-to-device {}", rate(e.h2d_gib_s)) : "",
      e.throttles.empty() ? ", no cgroup I/O limit" : ", cgroup I/O limit present");
  out += fmt::format("Took {:.1f} s of a {:.0f} s budget.\n", r.elapsed_s, r.budget_s);
  return out;
}

}  // namespace sluice::doctor
