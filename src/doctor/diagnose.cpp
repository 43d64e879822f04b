// The judgement half of `sluice doctor`: evidence in, ranked findings out, no I/O. Each cause is
// named only on evidence: a measured variant that beats the baseline by the noise margin, a limit
// that the throughput sits at, or a platform fact (a link trained low, a cgroup limit) that the
// figures are consistent with. What is seen but explains nothing goes to notes, not findings.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "sluice/tools/doctor.hpp"
#include "sluice/units.hpp"

namespace sluice::doctor {
namespace {

// Ranking tiers (see diagnose() in the header).
enum Tier : int {
  binding_limit = 0,
  cache_effect = 1,
  gain = 2,
  pattern_change = 3,
  unmeasured = 4
};

struct Ranked {
  Finding f;
  int tier = gain;
  double gain_gib_s = 0;
};

Ranked ranked(int tier, double gain_gib_s = 0) {
  Ranked r;
  r.tier = tier;
  r.gain_gib_s = gain_gib_s;
  return r;
}

std::string rate(double gib_s) {
  if (gib_s <= 0) return "0 MiB/s";
  if (gib_s < 1) return fmt::format("{:.0f} MiB/s", gib_s * 1024);
  return fmt::format("{:.2f} GiB/s", gib_s);
}

std::string bytes(std::uint64_t b) {
  if (b >= MiB && b % MiB == 0) return fmt::format("{} MiB", b / MiB);
  if (b >= KiB && b % KiB == 0) return fmt::format("{} KiB", b / KiB);
  return fmt::format("{} B", b);
}

// As the --block-size option takes it: "1M", "4K", "1000".
std::string option_size(std::uint64_t b) {
  if (b >= MiB && b % MiB == 0) return fmt::format("{}M", b / MiB);
  if (b >= KiB && b % KiB == 0) return fmt::format("{}K", b / KiB);
  return std::to_string(b);
}

const Probe* find_trial(const Evidence& e, std::string_view name) {
  for (const auto& t : e.trials) {
    if (t.name == name && t.error.empty() && t.gib_s > 0) return &t;
  }
  return nullptr;
}

bool beats(const Probe* t, double base) {
  return t != nullptr && t->gib_s >= base * significant_gain;
}

// A figure a person or a policy would pick: 1, 1.5, 2, 2.5, 3, 4, 5, 6, 7.5, 8 x 10^k MiB/s or
// MB/s, or a power of two in MiB/s, within 1.5%. A flat result at such a figure smells of a
// configured limit.
bool round_figure(double gib_s) {
  auto near_round = [](double v) {
    if (v < 1) return false;
    const double k = std::pow(10.0, std::floor(std::log10(v)));
    for (double m : {1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 7.5, 8.0, 10.0}) {
      if (std::abs(v - m * k) / v < 0.015) return true;
    }
    const double p2 = std::pow(2.0, std::round(std::log2(v)));
    return std::abs(v - p2) / v < 0.015;
  };
  return near_round(gib_s * 1024) || near_round(gib_s * GiB / 1e6);
}

// The throughput a cgroup limit allows this workload, 0 for none.
double limit_gib_s(const Throttle& t, const bench::Workload& w) {
  double lim = 0;
  auto take = [&](double v) {
    if (v > 0 && (lim == 0 || v < lim)) lim = v;
  };
  if (bench::does_reads(w.rw)) {
    take(static_cast<double>(t.read_bps) / GiB);
    take(static_cast<double>(t.read_iops) * static_cast<double>(w.block_size) / GiB);
  }
  if (bench::does_writes(w.rw)) {
    take(static_cast<double>(t.write_bps) / GiB);
    take(static_cast<double>(t.write_iops) * static_cast<double>(w.block_size) / GiB);
  }
  return lim;
}

std::string limit_text(const Throttle& t) {
  std::string s;
  auto add = [&](const char* what, std::uint64_t v, bool is_bytes) {
    if (v == 0) return;
    if (!s.empty()) s += ", ";
    s += is_bytes ? fmt::format("{} {} ({})", what, v, rate(static_cast<double>(v) / GiB))
                  : fmt::format("{} {}", what, v);
  };
  add("read_bps", t.read_bps, true);
  add("write_bps", t.write_bps, true);
  add("read_iops", t.read_iops, false);
  add("write_iops", t.write_iops, false);
  return s;
}

bool gpu_direct_type(bench::XferType x) {
  return x == bench::XferType::gpu_direct || x == bench::XferType::gpu_direct_async ||
         x == bench::XferType::gpu_batch;
}

void add_throttle(const Evidence& e, double achieved, double ceiling, std::vector<Ranked>& out,
                  std::vector<std::string>& notes) {
  const auto& w = e.workload;
  bool found = false;
  for (const auto& t : e.throttles) {
    const double lim = limit_gib_s(t, w);
    if (lim <= 0) continue;
    found = true;
    if (achieved >= 0.6 * lim) {
      Ranked r = ranked(binding_limit);
      r.f.cause = Cause::throttled;
      r.f.measured = false;
      r.f.evidence = fmt::format(
          "cgroup I/O limit on device {}: {} in {}; the workload reached {} and the best of every "
          "variant tried {}: all of them stop at the limit",
          t.devno, limit_text(t), t.file, rate(achieved), rate(ceiling));
      const bool v2 = t.file.ends_with("io.max");
      r.f.recommendation = fmt::format(
          "raise or remove the limit (write '{} {}' to {}) or run outside this cgroup; no workload "
          "change can pass it",
          t.devno, v2 ? "rbps=max wbps=max riops=max wiops=max" : "0", t.file);
      out.push_back(std::move(r));
    } else {
      notes.push_back(
          fmt::format("cgroup I/O limit on device {} ({} in {}) is not reached ({} achieved)",
                      t.devno, limit_text(t), t.file, rate(achieved)));
    }
  }
  if (found) return;
  // No configured limit found: a result flat across queue depth and block size at a round
  // figure still suggests one (a hypervisor, a network filesystem, a device QoS setting).
  std::vector<const Probe*> knobs;
  for (const char* n : {"iodepth", "block_size"}) {
    if (const Probe* p = find_trial(e, n)) knobs.push_back(p);
  }
  if (knobs.size() < 2 || achieved <= 0) return;
  const bool flat = std::all_of(knobs.begin(), knobs.end(), [&](const Probe* p) {
    return p->gib_s >= 0.9 * achieved && p->gib_s <= 1.1 * achieved;
  });
  if (flat && round_figure(achieved)) {
    Ranked r = ranked(binding_limit);
    r.f.cause = Cause::throttled;
    r.f.measured = false;
    r.f.evidence = fmt::format(
        "throughput stays at {} whatever the queue depth ({}) and block size ({}), a round figure; "
        "no cgroup limit was found on this process, so the limit is elsewhere (suspected: a "
        "hypervisor or storage QoS limit, a network share)",
        rate(achieved), rate(knobs[0]->gib_s), rate(knobs[1]->gib_s));
    r.f.recommendation =
        "find the limit (virtual disk QoS, cloud volume tier, storage server) and raise it";
    out.push_back(std::move(r));
  }
}

void add_cache_and_buffered(const Evidence& e, double achieved, std::vector<Ranked>& out,
                            std::vector<std::string>& notes) {
  const auto& w = e.workload;
  const bool buffered = !w.direct || !e.o_direct;
  const Probe* direct = find_trial(e, "direct");
  const int pct = e.cached_before >= 0 ? static_cast<int>(std::lround(e.cached_before * 100)) : -1;
  if (buffered && !e.memory_fs && bench::does_reads(w.rw) && e.cached_before >= 0.5) {
    if (direct != nullptr && achieved > 1.5 * direct->gib_s) {
      Ranked r = ranked(cache_effect);
      r.f.cause = Cause::page_cache;
      r.f.expected_gib_s = direct->gib_s;
      r.f.evidence = fmt::format(
          "{}% of the file was in the page cache before the run: buffered reads reached {}, "
          "O_DIRECT "
          "reads of the same file {}; the result measures memory, not the device",
          pct, rate(achieved), rate(direct->gib_s));
      r.f.recommendation =
          "measure the device with --direct (or --drop-caches before each run); count on the "
          "buffered figure only if the data really stays cached in production";
      out.push_back(std::move(r));
      return;
    }
    notes.push_back(fmt::format("{}% of the file was in the page cache before the run", pct));
  }
  if (!w.direct && beats(direct, achieved)) {
    Ranked r = ranked(gain, direct->gib_s - achieved);
    r.f.cause = Cause::buffered_io;
    r.f.expected_gib_s = direct->gib_s;
    r.f.evidence = fmt::format(
        "buffered I/O{}: {}; O_DIRECT on the same file: {} measured (the page cache copies every "
        "byte once more and reads ahead in small pieces)",
        pct >= 0 ? fmt::format(" of a file {}% in the page cache", pct) : std::string{},
        rate(achieved), rate(direct->gib_s));
    r.f.recommendation = fmt::format("use O_DIRECT (--direct, Sluice's default): {} -> {} measured",
                                     rate(achieved), rate(direct->gib_s));
    out.push_back(std::move(r));
  }
}

// `recommendation` reads "<change>: <before> -> <after> measured (<option>)".
void add_knob(Cause cause, const Probe* t, double achieved, int tier, std::string evidence,
              std::string recommendation, std::string_view option, std::vector<Ranked>& out) {
  Ranked r = ranked(tier, t->gib_s - achieved);
  r.f.cause = cause;
  r.f.expected_gib_s = t->gib_s;
  r.f.evidence = std::move(evidence);
  r.f.recommendation =
      fmt::format("{}: {} -> {} measured{}", recommendation, rate(achieved), rate(t->gib_s),
                  option.empty() ? std::string{} : fmt::format(" ({})", option));
  out.push_back(std::move(r));
}

void add_knobs(const Evidence& e, double achieved, std::vector<Ranked>& out) {
  const auto& w = e.workload;
  if (const Probe* t = find_trial(e, "iodepth"); beats(t, achieved)) {
    add_knob(Cause::queue_depth, t, achieved, gain,
             fmt::format("{} I/O(s) of {} in flight per thread ({} thread(s)): {}; iodepth {}: {} "
                         "(throughput = I/Os in flight x size / latency)",
                         w.iodepth, bytes(w.block_size), w.threads, rate(achieved),
                         t->workload.iodepth, rate(t->gib_s)),
             fmt::format("raise iodepth from {} to {}", w.iodepth, t->workload.iodepth),
             fmt::format("--iodepth {}", t->workload.iodepth), out);
  }
  if (const Probe* t = find_trial(e, "block_size"); beats(t, achieved)) {
    const bool random = bench::is_random(w.rw);
    add_knob(Cause::block_size, t, achieved, random ? pattern_change : gain,
             fmt::format("{} I/Os: {}; {} I/Os: {}{}", bytes(w.block_size), rate(achieved),
                         bytes(t->workload.block_size), rate(t->gib_s),
                         random ? " (changes the access pattern: only if the application can read "
                                  "larger pieces)"
                                : ""),
             fmt::format("raise the block size from {} to {}", bytes(w.block_size),
                         bytes(t->workload.block_size)),
             fmt::format("--block-size {}", option_size(t->workload.block_size)), out);
  }
  if (const Probe* t = find_trial(e, "aligned"); beats(t, achieved)) {
    const std::uint32_t a = e.dio_align != 0 ? e.dio_align : 4096;
    add_knob(
        Cause::alignment, t, achieved, gain,
        fmt::format(
            "{} not multiples of the O_DIRECT alignment ({} bytes){}: {}; aligned: {} "
            "(unaligned pieces are read through a staging buffer, or buffered)",
            w.unaligned ? "random offsets at any byte (--unaligned) are"
                        : "offset or block size are",
            a,
            w.unaligned ? "" : fmt::format(" (offset {}, block size {})", w.offset, w.block_size),
            rate(achieved), rate(t->gib_s)),
        fmt::format("align offsets and sizes to {} bytes (4 KiB for cuFile)", a),
        w.unaligned ? "drop --unaligned" : "", out);
  }
  if (const Probe* t = find_trial(e, "async_copy"); beats(t, achieved)) {
    add_knob(Cause::copy_not_overlapped, t, achieved, gain,
             fmt::format("{} reads, then copies to the device synchronously: {}; pipelined pinned "
                         "staging with async copies (cpu-async-gpu): {}",
                         bench::to_string(w.xfer), rate(achieved), rate(t->gib_s)),
             "overlap reads and copies (Sluice's bounce path)", "--xfer cpu-async-gpu", out);
  }
  if (const Probe* t = find_trial(e, "numa"); beats(t, achieved)) {
    add_knob(Cause::numa_placement, t, achieved, gain,
             fmt::format(
                 "the device is on NUMA node {} and the threads ran {}: {}; on node {}: {}",
                 e.device_numa_node,
                 w.numa_node < 0 ? std::string("unpinned") : fmt::format("on node {}", w.numa_node),
                 rate(achieved), t->workload.numa_node, rate(t->gib_s)),
             fmt::format("run the threads and buffers on node {}", t->workload.numa_node),
             fmt::format("--numa-node {}", t->workload.numa_node), out);
  }
}

void add_cpu(const Evidence& e, double achieved, std::vector<Ranked>& out) {
  const auto& w = e.workload;
  const double cores = e.baseline.cpu_cores;
  const double per_thread = cores / std::max(1U, w.threads);
  const Probe* t = find_trial(e, "threads");
  if (beats(t, achieved)) {
    add_knob(
        Cause::threads, t, achieved, gain,
        fmt::format("{} thread(s) used {:.2f} CPU cores ({:.2f} per thread{}): {}; {} threads: {}",
                    w.threads, cores, per_thread, per_thread >= 0.7 ? ", CPU-bound" : "",
                    rate(achieved), t->workload.threads, rate(t->gib_s)),
        fmt::format("use {} threads", t->workload.threads),
        fmt::format("--threads {}", t->workload.threads), out);
    return;
  }
  // Other processes holding the CPUs while this workload's threads need CPU (40% of a core each
  // or more: not mostly waiting for I/O): more threads of this one cannot get more of them.
  const double busy = e.baseline.system_busy;
  const double others = busy >= 0 ? busy * e.cpus - cores : 0;
  if (busy >= 0.9 && others >= 0.5 && per_thread >= 0.4) {
    Ranked r = ranked(unmeasured);
    r.f.cause = Cause::cpu_bound;
    r.f.measured = false;
    r.f.evidence = fmt::format(
        "the CPUs were {:.0f}% busy during the run: this workload got {:.2f} of {} CPUs, other "
        "processes "
        "{:.2f}{}",
        busy * 100, cores, e.cpus, others,
        t != nullptr
            ? fmt::format("; {} threads did not help ({})", t->workload.threads, rate(t->gib_s))
            : std::string{});
    r.f.recommendation =
        "give the workload CPUs of its own (idle machine, cpuset, taskset) or spend less CPU per "
        "byte "
        "(O_DIRECT, larger blocks, no --verify)";
    out.push_back(std::move(r));
    return;
  }
  if (cores >= 0.8 * e.cpus || (t == nullptr && per_thread >= 0.85 && w.threads >= e.cpus)) {
    Ranked r = ranked(unmeasured);
    r.f.cause = Cause::cpu_bound;
    r.f.measured = false;
    r.f.evidence = fmt::format("the run kept {:.2f} of {} CPUs busy{}", cores, e.cpus,
                               t != nullptr ? fmt::format("; {} threads did not help ({})",
                                                          t->workload.threads, rate(t->gib_s))
                                            : std::string{});
    r.f.recommendation =
        "spend less CPU per byte (O_DIRECT instead of buffered, larger blocks, no --verify, "
        "io_uring "
        "batching: --submit-batch 0 --reap-batch 0) or run on more CPUs";
    out.push_back(std::move(r));
  }
}

void add_platform(const Evidence& e, double achieved, double ceiling, bool near,
                  std::vector<Ranked>& out, std::vector<std::string>& notes) {
  const auto& w = e.workload;
  for (const auto& l : e.links) {
    if (l.gib_s <= 0 || l.max_gib_s <= l.gib_s * 1.05) continue;
    const std::string trained =
        fmt::format("{} is trained at {} x{} ({}), capable of {} x{} ({})", l.what, l.speed,
                    l.width, rate(l.gib_s), l.max_speed, l.max_width, rate(l.max_gib_s));
    if (achieved >= 0.6 * l.gib_s) {
      const double est = std::min(l.max_gib_s, achieved * l.max_gib_s / l.gib_s);
      Ranked r = ranked(gain, est - achieved);
      r.f.cause = Cause::pcie_link;
      r.f.measured = false;
      r.f.expected_gib_s = est;
      r.f.evidence = fmt::format("{}; the workload reached {} of its {}", trained, rate(achieved),
                                 rate(l.gib_s));
      r.f.recommendation =
          "reseat the card or move it to a slot wired for the full width, check BIOS link settings "
          "(lspci -vv: LnkCap vs LnkSta); estimated, not measured";
      out.push_back(std::move(r));
    } else {
      notes.push_back(trained + "; not the limit at this throughput");
    }
  }
  if (e.numa_nodes > 1 && e.device_numa_node >= 0 && w.numa_node != e.device_numa_node &&
      find_trial(e, "numa") == nullptr) {
    notes.push_back(
        fmt::format("the device is on NUMA node {}; the threads were {}", e.device_numa_node,
                    w.numa_node < 0 ? "not pinned" : fmt::format("on node {}", w.numa_node)));
  }
  if (e.iommu) {
    const bool pt = e.iommu_cmdline.find("iommu=pt") != std::string::npos ||
                    e.iommu_cmdline.find("iommu.passthrough=1") != std::string::npos;
    if (gpu_direct_type(w.xfer) && !pt) {
      Ranked r = ranked(unmeasured);
      r.f.cause = Cause::iommu;
      r.f.measured = false;
      r.f.evidence = fmt::format(
          "the IOMMU is on (kernel parameters: '{}') and the workload uses GPUDirect: "
          "peer DMA is translated or redirected through the root complex",
          e.iommu_cmdline);
      r.f.recommendation =
          "boot with iommu=pt (or the IOMMU off on x86, as NVIDIA's GDS guide advises) and "
          "disable PCIe ACS redirect on the switches between disk and GPU";
      out.push_back(std::move(r));
    } else {
      notes.push_back(fmt::format("the IOMMU is on (kernel parameters: '{}')", e.iommu_cmdline));
    }
  }
  if (near && !e.trials.empty()) {
    // What the path could carry, to tell whether the device itself is what stops it.
    double bound = 0;
    std::string what;
    for (const auto& l : e.links) {
      if (l.gib_s > 0 && (bound == 0 || l.gib_s < bound)) {
        bound = l.gib_s;
        what = "the PCIe link of " + l.what;
      }
    }
    if (bench::uses_gpu(w.xfer) && e.h2d_gib_s > 0 && (bound == 0 || e.h2d_gib_s < bound)) {
      bound = e.h2d_gib_s;
      what = "the pinned host-to-device copy path";
    }
    if (bound > 0 && ceiling < 0.8 * bound) {
      Ranked r = ranked(unmeasured);
      r.f.cause = Cause::device_limit;
      r.f.measured = false;
      r.f.evidence = fmt::format(
          "the best measured on this path is {} while {} allows {}: the device "
          "itself delivers no more",
          rate(ceiling), what, rate(bound));
      r.f.recommendation =
          "a faster device, or several striped (RAID0, one file per device with --file a,b)";
      out.push_back(std::move(r));
    }
  }
}

// The probes compared with fewer than confident_rounds interleaved rounds, or while other
// processes read the same device. `combined` runs once by design and only sets the ceiling; a
// failed trial is compared with nothing.
Confidence judge_confidence(const Evidence& e) {
  Confidence c;
  double shared = 0;
  auto judge = [&](const Probe& p) {
    if (p.rounds < confident_rounds) c.few_rounds.push_back(p.name);
    if (p.others_read_share >= shared_device_fraction) {
      c.device_shared.push_back(p.name);
      shared = std::max(shared, p.others_read_share);
    }
  };
  judge(e.baseline);
  for (const auto& t : e.trials) {
    if (t.name != "combined" && t.error.empty()) judge(t);
  }
  std::vector<std::string> why;
  if (!c.few_rounds.empty()) {
    why.push_back(fmt::format(
        "{} measured in fewer than {} interleaved rounds: what other processes left free at that "
        "moment may decide which variant wins{}",
        fmt::join(c.few_rounds, ", "), confident_rounds,
        e.two_round_budget_s > 0
            ? fmt::format("; a budget of {:.0f} s gives every probe {} rounds (--budget {:.0f}s)",
                          e.two_round_budget_s, confident_rounds, e.two_round_budget_s)
            : std::string{}));
  }
  if (!c.device_shared.empty()) {
    why.push_back(fmt::format(
        "other processes read up to {:.0f}% of the bytes read from device {} while {} ran: their "
        "load, not the knob, may decide which variant wins; run it again when the device is not "
        "shared",
        shared * 100, e.devno, fmt::join(c.device_shared, ", ")));
  }
  c.low = !why.empty();
  c.reason = fmt::format("{}", fmt::join(why, "; also, "));
  return c;
}

}  // namespace

std::string_view to_string(Cause c) noexcept {
  switch (c) {
    case Cause::queue_depth:
      return "queue_depth";
    case Cause::block_size:
      return "block_size";
    case Cause::alignment:
      return "alignment";
    case Cause::page_cache:
      return "page_cache";
    case Cause::buffered_io:
      return "buffered_io";
    case Cause::threads:
      return "threads";
    case Cause::cpu_bound:
      return "cpu_bound";
    case Cause::copy_not_overlapped:
      return "copy_not_overlapped";
    case Cause::pcie_link:
      return "pcie_link";
    case Cause::numa_placement:
      return "numa_placement";
    case Cause::iommu:
      return "iommu";
    case Cause::device_limit:
      return "device_limit";
    case Cause::throttled:
      return "throttled";
  }
  return "unknown";
}

std::vector<Cause> all_causes() {
  std::vector<Cause> v;
  for (int i = 0; i <= static_cast<int>(Cause::throttled); ++i) v.push_back(static_cast<Cause>(i));
  return v;
}

Diagnosis diagnose(const Evidence& e) {
  Diagnosis d;
  const double achieved = e.baseline.gib_s;
  double ceiling = achieved;
  const Probe* best = nullptr;
  for (const auto& t : e.trials) {
    if (t.error.empty() && t.gib_s > ceiling) {
      ceiling = t.gib_s;
      best = &t;
    }
  }
  d.achieved_gib_s = achieved;
  d.ceiling_gib_s = ceiling;
  d.near_ceiling = ceiling <= 0 || achieved >= near_ceiling_fraction * ceiling;
  d.confidence = judge_confidence(e);

  std::vector<Ranked> ranked;
  add_throttle(e, achieved, ceiling, ranked, d.notes);
  add_cache_and_buffered(e, achieved, ranked, d.notes);
  add_knobs(e, achieved, ranked);
  add_cpu(e, achieved, ranked);
  add_platform(e, achieved, ceiling, d.near_ceiling, ranked, d.notes);
  std::stable_sort(ranked.begin(), ranked.end(), [](const Ranked& a, const Ranked& b) {
    if (a.tier != b.tier) return a.tier < b.tier;
    return a.gain_gib_s > b.gain_gib_s;
  });
  for (auto& r : ranked) d.findings.push_back(std::move(r.f));

  const long pct_n = ceiling > 0 ? std::lround(achieved / ceiling * 100) : 100;
  const std::string pct = pct_n == 0 && achieved > 0 ? std::string("<1") : std::to_string(pct_n);
  if (d.findings.empty()) {
    d.summary =
        d.near_ceiling
            ? fmt::format(
                  "{} achieved, {}% of the best measured on this path ({}): near the "
                  "ceiling, nothing in the workload to fix",
                  rate(achieved), pct, rate(ceiling))
            : fmt::format("{} achieved of {} measured ({}%); no single change explains the gap{}",
                          rate(achieved), rate(ceiling), pct,
                          best != nullptr ? fmt::format(" (best: {}, {})", best->name, best->change)
                                          : std::string{});
  } else {
    d.summary =
        fmt::format("{} achieved of {} measured on this path ({}%); top cause: {}", rate(achieved),
                    rate(ceiling), pct, to_string(d.findings.front().cause));
  }
  return d;
}

}  // namespace sluice::doctor
