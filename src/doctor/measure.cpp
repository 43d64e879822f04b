// The measuring half of `sluice doctor`: within the budget, read the platform facts, run the
// user's workload and one variant per knob, then all helpful variants together, and hand the
// evidence to diagnose(). Every probe gets the same time slice; when the budget is too small for
// all of them, the least informative are left out and listed as skipped. The baseline and the
// trials run in two interleaved rounds where the slice allows two rounds of min_round; where it
// does not, they run once and the diagnosis says its comparisons are not confident. Every variant
// runs on the baseline's code path (engine loop or transfer API), so it differs in its knob only.
//
// Buffered reads of a file that was not in the page cache are a special case: a time-bound run
// wraps around and reads its own cached data back, which would hide the very cost being
// measured. Such probes drop the files' cache first and cover the data once (size-bound), capped
// to what the slice can read at the rate seen so far.
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <optional>

#include "doctor/facts.hpp"
#include "sluice/error.hpp"
#include "sluice/page_cache.hpp"
#include "sluice/tools/check.hpp"
#include "sluice/tools/doctor.hpp"
#include "sluice/units.hpp"

namespace sluice::doctor {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::vector<std::string> workload_files(const bench::Workload& w) {
  if (!w.files.empty()) return w.files;
  std::vector<std::string> out;
  for (unsigned t = 0; t < w.threads; ++t)
    out.push_back(fmt::format("{}/sluice-bench.{}", w.dir, t));
  return out;
}

std::string size_text(std::uint64_t b) {
  if (b >= MiB && b % MiB == 0) return fmt::format("{} MiB", b / MiB);
  if (b >= KiB && b % KiB == 0) return fmt::format("{} KiB", b / KiB);
  return fmt::format("{} B", b);
}

// A probe of `w` changed by the caller. It runs on the code path the workload as given runs on:
// a cpu-only workload that goes through the transfer API (unaligned offsets, an offset or block
// size off 4 KiB) keeps every variant there, so that an aligned variant measures alignment, not
// the engine loop against the library (which spends CPU differently and so wins or loses with
// how much CPU other processes leave free).
Probe variant(const bench::Workload& w, std::string name, std::string change) {
  Probe p;
  p.name = std::move(name);
  p.change = std::move(change);
  p.workload = w;
  if (w.xfer == bench::XferType::cpu_only && !bench::runs_engine_loop(w)) {
    p.workload.via_library = true;
  }
  return p;
}

// One variant per knob that could matter for this workload, most informative first; `skipped`
// gets the knobs that cannot apply, with why.
std::vector<Probe> plan_trials(const Evidence& e, std::vector<std::string>& skipped) {
  const bench::Workload& w = e.workload;
  std::vector<Probe> out;
  if (!w.direct && e.o_direct) {
    Probe p = variant(w, "direct", "buffered -> O_DIRECT");
    p.workload.direct = true;
    out.push_back(std::move(p));
  } else if (!w.direct) {
    skipped.push_back(fmt::format("direct: {} has no O_DIRECT", e.fs_type));
  }
  if (w.iodepth < 64) {
    const unsigned qd = w.iodepth < 16 ? 16 : std::min(64U, w.iodepth * 2);
    Probe p = variant(w, "iodepth", fmt::format("iodepth {} -> {}", w.iodepth, qd));
    p.workload.iodepth = qd;
    out.push_back(std::move(p));
  } else {
    skipped.push_back("iodepth: already 64 or more");
  }
  if (!w.dir.empty() && w.size == 0) {
    skipped.push_back("threads: --dir without --size cannot lay out the extra threads' files");
  } else if (w.threads < 64) {
    const unsigned n = std::min(64U, w.threads * 2);
    Probe p = variant(w, "threads", fmt::format("threads {} -> {}", w.threads, n));
    p.workload.threads = n;
    out.push_back(std::move(p));
  }
  const std::uint64_t a = e.dio_align != 0 ? e.dio_align : 4096;
  if (w.unaligned || w.offset % a != 0 || w.block_size % a != 0) {
    Probe p = variant(w, "aligned", fmt::format("aligned to {} bytes", a));
    p.workload.unaligned = false;
    p.workload.offset = w.offset / a * a;
    p.workload.block_size = (w.block_size + a - 1) / a * a;
    out.push_back(std::move(p));
  }
  if (w.block_size < MiB) {
    Probe p =
        variant(w, "block_size", fmt::format("block size {} -> 1 MiB", size_text(w.block_size)));
    p.workload.block_size = MiB;
    p.workload.offset = w.offset / 4096 * 4096;
    out.push_back(std::move(p));
  } else {
    skipped.push_back("block_size: already 1 MiB or more");
  }
  if (w.xfer == bench::XferType::cpu_gpu) {
    Probe p = variant(w, "async_copy", "cpu-gpu -> cpu-async-gpu");
    p.workload.xfer = bench::XferType::cpu_async_gpu;
    out.push_back(std::move(p));
  }
  if (e.numa_nodes > 1 && e.device_numa_node >= 0 && w.numa_node != e.device_numa_node) {
    Probe p = variant(w, "numa", fmt::format("threads on NUMA node {}", e.device_numa_node));
    p.workload.numa_node = e.device_numa_node;
    out.push_back(std::move(p));
  } else if (e.numa_nodes <= 1) {
    skipped.push_back("numa: a single NUMA node");
  }
  return out;
}

// Every change of the trials that helped, applied together: the best this path reached.
std::optional<Probe> combine(const Evidence& e) {
  Probe c = variant(e.workload, "combined", "");
  std::vector<std::string> changes;
  for (const auto& t : e.trials) {
    if (!t.error.empty() || t.gib_s < 1.05 * e.baseline.gib_s) continue;
    changes.push_back(t.change);
    const bench::Workload& v = t.workload;
    if (t.name == "direct") c.workload.direct = true;
    if (t.name == "iodepth") c.workload.iodepth = v.iodepth;
    if (t.name == "threads") c.workload.threads = v.threads;
    if (t.name == "aligned" || t.name == "block_size") {
      c.workload.unaligned = v.unaligned;
      c.workload.offset = v.offset;
      c.workload.block_size = std::max(c.workload.block_size, v.block_size);
    }
    if (t.name == "async_copy") c.workload.xfer = v.xfer;
    if (t.name == "numa") c.workload.numa_node = v.numa_node;
  }
  if (changes.size() < 2) return std::nullopt;
  for (const auto& ch : changes) c.change += (c.change.empty() ? "" : ", ") + ch;
  return c;
}

void fill_platform(Evidence& e, const std::vector<std::string>& files) {
  const bench::Workload& w = e.workload;
  const std::string target = files.empty() ? w.dir : files.front();
  const check::Report cr = check::inspect({target});
  e.cpus = detail::usable_cpus();
  e.numa_nodes = detail::numa_nodes();
  e.iommu = cr.platform.iommu;
  e.iommu_cmdline = cr.platform.iommu_cmdline;
  auto add_link = [&](std::string what, const check::PciLink& l) {
    e.links.push_back({.what = std::move(what),
                       .speed = l.speed,
                       .width = l.width,
                       .max_speed = l.max_speed,
                       .max_width = l.max_width,
                       .gib_s = pcie_gib_s(l.speed, l.width),
                       .max_gib_s = pcie_gib_s(l.max_speed, l.max_width)});
  };
  std::vector<std::string> devnos;
  e.devno = detail::devno_of_file(target);
  if (!e.devno.empty()) devnos.push_back(e.devno);
  if (!cr.paths.empty()) {
    const check::PathReport& p = cr.paths.front();
    e.fs_type = p.fs_type;
    e.memory_fs = p.fs_type == "tmpfs" || p.fs_type == "ramfs";
    e.o_direct = p.o_direct;
    e.dio_align = p.dio_offset_align;
    for (const auto& bd : p.block_devices) {
      if (!bd.devno.empty()) devnos.push_back(bd.devno);
      if (!bd.pci) continue;
      add_link(fmt::format("{} ({})", bd.name, bd.pci->address), *bd.pci);
      if (e.device_numa_node < 0) e.device_numa_node = bd.pci->numa_node;
    }
  }
  if (bench::uses_gpu(w.xfer)) {
    for (const auto& g : cr.gpus) {
      if (!g.pci) continue;
      add_link(fmt::format("GPU {} ({})", g.name, g.pci->address), *g.pci);
    }
  }
  std::sort(devnos.begin(), devnos.end());
  devnos.erase(std::unique(devnos.begin(), devnos.end()), devnos.end());
  e.throttles = cgroup_throttles(devnos);
}

}  // namespace

namespace detail {

double memory_gib_s(double seconds) {
  // The best of several copies larger than the caches: on a shared machine the fastest one is
  // the closest to what memory can do.
  constexpr std::size_t n = 32 * MiB;
  auto src = std::make_unique<std::byte[]>(n);
  auto dst = std::make_unique<std::byte[]>(n);
  std::memset(src.get(), 1, n);
  std::memset(dst.get(), 2, n);
  const auto t0 = Clock::now();
  double best = 0;
  do {
    const auto t = Clock::now();
    std::memcpy(dst.get(), src.get(), n);
    best = std::max(best,
                    static_cast<double>(n) / static_cast<double>(GiB) / std::max(1e-9, since(t)));
  } while (since(t0) < seconds);
  return best;
}

double h2d_gib_s(const std::string& device, double seconds) {
  const std::shared_ptr<Device> dev = open_device(device.substr(0, device.find(',')));
  constexpr std::size_t n = 32 * MiB;
  const PinnedBuffer host(dev, n);
  const DeviceBuffer gpu(dev, n);
  std::memset(host.data(), 1, n);
  const Stream s(dev);
  const auto t0 = Clock::now();
  std::uint64_t copied = 0;
  do {
    dev->copy_to_device_async(gpu.data(), host.data(), n, s.get());
    s.synchronize();
    copied += n;
  } while (since(t0) < seconds);
  return static_cast<double>(copied) / static_cast<double>(GiB) / since(t0);
}

}  // namespace detail

namespace {

// What the probes share: the slice each gets, whether reads are measured cold, and what each
// probe moved over its passes (a probe's figures are the totals of its rounds).
class ProbeRunner {
 public:
  ProbeRunner(const Evidence& e, double slice) : e_(e), slice_(slice) {
    const bench::Workload& w = e.workload;
    cold_ =
        bench::does_reads(w.rw) && !e.memory_fs && e.cached_before >= 0 && e.cached_before < 0.5;
  }

  // One round of `p`, `part` seconds long (cold-cache passes: see the note at the top).
  void run(Probe& p, double part) {
    bench::Workload pw = p.workload;
    pw.warmup_s = 0;
    pw.sample_interval_s = std::max(1.0, slice_);
    const bool buffered = !pw.direct || !e_.o_direct;
    if (cold_ && buffered) {
      p.cold_cache = true;
      pw.size = cold_size(pw, part);
      pw.time_s = 0;
    } else {
      pw.time_s = part;
    }
    // Cold-cache passes are short on small files: repeat them (dropping the cache before each)
    // until the part is used, and count them together.
    const auto started = Clock::now();
    const detail::CpuTimes sys0 = detail::cpu_times();
    const ReadCounts reads0 = read_counts();
    Totals& tot = totals_[&p];
    try {
      do {
        if (p.cold_cache) drop_file_cache(workload_files(pw));
        const bench::RunResult r = bench::run_workload(pw);
        tot.moved += r.bytes;
        tot.secs += r.seconds;
        tot.cpu += r.cpu_user_s + r.cpu_sys_s;
        p.path = r.path;
        p.error = r.error;
      } while (p.cold_cache && p.error.empty() && since(started) < part * 0.8);
    } catch (const std::exception& ex) {
      p.error = ex.what();
    }
    const detail::CpuTimes sys1 = detail::cpu_times();
    tot.busy += sys1.busy - sys0.busy;
    tot.jiffies += sys1.total - sys0.total;
    count_reads(tot, reads0, read_counts());
    p.others_read_share = tot.read_share;
    ++p.rounds;
    p.seconds = tot.secs;
    p.gib_s =
        tot.secs > 0 ? static_cast<double>(tot.moved) / static_cast<double>(GiB) / tot.secs : 0;
    p.cpu_cores = tot.secs > 0 ? tot.cpu / tot.secs : 0;
    if (tot.jiffies > 0)
      p.system_busy = static_cast<double>(tot.busy) / static_cast<double>(tot.jiffies);
    if (p.error.empty() && p.gib_s > rate_seen_) rate_seen_ = p.gib_s;
  }

 private:
  struct Totals {
    std::uint64_t moved = 0;
    double secs = 0, cpu = 0;
    std::uint64_t busy = 0, jiffies = 0;
    std::uint64_t device_read = 0, own_read = 0;  // bytes, over the rounds that could count them
    double read_share = -1;                       // Probe::others_read_share
  };

  // The bytes read from the files' device and by this process so far (none known without a
  // block device behind the files).
  struct ReadCounts {
    std::optional<std::uint64_t> device, own;
  };
  ReadCounts read_counts() const {
    if (e_.devno.empty()) return {};
    return {detail::device_read_bytes(e_.devno), detail::own_read_bytes()};
  }
  // Others' reads against this probe's own traffic: its device reads, or the bytes it moved
  // where that is more (reads served by the page cache, writes), so that a few stray reads by
  // others next to a probe that hardly reads the device do not count as sharing it.
  static void count_reads(Totals& tot, const ReadCounts& a, const ReadCounts& b) {
    if (!a.device || !a.own || !b.device || !b.own) return;
    tot.device_read += *b.device - *a.device;
    tot.own_read += *b.own - *a.own;
    // The device counts a read as it completes, this process as it submits: a few in flight at
    // either end can put its own bytes past the device's.
    const std::uint64_t others =
        tot.device_read > tot.own_read ? tot.device_read - tot.own_read : 0;
    const std::uint64_t all = others + std::max(tot.own_read, tot.moved);
    tot.read_share = all > 0 ? static_cast<double>(others) / static_cast<double>(all) : 0;
  }

  // A cold pass covers the data once: the file from --offset (threads on one file split it),
  // capped to what the fastest rate seen reads in `part` (256 MiB before any rate is known).
  std::uint64_t cold_size(const bench::Workload& pw, double part) const {
    std::uint64_t span = pw.size;
    if (span == 0) {
      for (const auto& f : workload_files(pw)) {
        const std::uint64_t sz = detail::file_size(f);
        span = std::max(span, sz > pw.offset ? sz - pw.offset : 0);
      }
    }
    const std::uint64_t cap =
        rate_seen_ > 0
            ? std::max<std::uint64_t>(8 * MiB, static_cast<std::uint64_t>(rate_seen_ * GiB * part))
            : 256 * MiB;
    const std::uint64_t size = std::min(span, cap);
    return std::max<std::uint64_t>(size / pw.block_size * pw.block_size,
                                   pw.block_size * pw.threads);
  }

  const Evidence& e_;
  double slice_;
  bool cold_ = false;
  double rate_seen_ = 0;
  std::map<const Probe*, Totals> totals_;
};

// Facts the probes need first: the files laid out (as bench does on its first run, in a run
// that is not measured, so the cache state is seen as the workload will find it), their cache
// state, the platform, memory and host-to-device bandwidth.
template <typename Stage>
void gather_facts(Report& rep, double budget_s, const Stage& stage) {
  Evidence& e = rep.evidence;
  const bench::Workload& w = e.workload;
  stage("facts");
  const std::vector<std::string> files = workload_files(w);
  bool missing = false;
  for (const auto& f : files)
    missing = missing || !detail::file_covers(f, w.offset + std::max<std::uint64_t>(w.size, 1));
  if (missing && bench::does_reads(w.rw) && w.size > 0) {
    bench::Workload lay = w;
    lay.time_s = 0.01;
    lay.warmup_s = 0;
    (void)bench::run_workload(lay);
    sync_files(files);  // writeback of the fresh layout must not slow the first probe
  }
  e.cached_before = cached_fraction(files);
  fill_platform(e, files);
  e.memory_gib_s = detail::memory_gib_s(std::clamp(budget_s * 0.01, 0.1, 0.2));
  if (bench::uses_gpu(w.xfer)) {
    stage("host-to-device copy bandwidth");
    try {
      e.h2d_gib_s = detail::h2d_gib_s(w.device, std::min(0.3, budget_s * 0.01));
    } catch (const std::exception& ex) {
      rep.skipped.push_back(fmt::format("h2d: {}", ex.what()));
    }
  }
}

// Equal slices for the baseline, each trial and the combined run, with 10% of the budget kept
// for the rest; a slice below this leaves the last trials out.
constexpr double min_slice = 0.25;
// The shortest round worth interleaving: a shorter run measures its start (files opened,
// buffers mapped, threads started) as much as the workload.
constexpr double min_round = 0.4;

// The budget that gives `slices` slices of `confident_rounds` rounds after `used` seconds, with
// a second to spare for facts that take longer next time.
double two_round_budget(double used, std::size_t slices) {
  const double need = (used + static_cast<double>(slices) * confident_rounds * min_round) / 0.9;
  return std::ceil(need) + 1;
}

}  // namespace

Report run(const Options& o) {
  const auto t0 = Clock::now();
  Report rep;
  rep.budget_s = o.budget_s;
  Evidence& e = rep.evidence;
  e.workload = o.workload;
  const bench::Workload& w = e.workload;
  bench::validate(w);
  if (o.budget_s <= 0) throw_usage_error({.op = "doctor"}, "the budget must be positive");
  auto stage = [&](std::string_view name) {
    if (o.progress) o.progress(name, std::min(1.0, since(t0) / o.budget_s));
  };
  gather_facts(rep, o.budget_s, stage);

  std::vector<Probe> planned = plan_trials(e, rep.skipped);
  const double left = o.budget_s * 0.9 - since(t0);
  const double wanted = two_round_budget(since(t0), planned.size() + 2);
  while (!planned.empty() && left / static_cast<double>(planned.size() + 2) < min_slice) {
    rep.skipped.push_back(fmt::format("{}: no time left in the budget", planned.back().name));
    planned.pop_back();
  }
  const double slice = std::max(0.1, left / static_cast<double>(planned.size() + 2));
  // Baseline and trials alternate in rounds (A B C A B C), so that noise on a shared machine
  // falls on all of them alike. One round only where the slice is too short for two; the
  // diagnosis then says its comparisons are not confident, and which budget would be.
  const unsigned rounds = slice >= confident_rounds * min_round ? confident_rounds : 1;
  if (rounds < confident_rounds) e.two_round_budget_s = std::max(wanted, o.budget_s + 1);
  ProbeRunner runner(e, slice);
  e.baseline = variant(w, "baseline", "");
  for (unsigned round = 1; round <= rounds; ++round) {
    stage(fmt::format("baseline: the workload as given (round {}/{})", round, rounds));
    runner.run(e.baseline, slice / rounds);
    if (!e.baseline.error.empty() && e.baseline.gib_s <= 0) {
      throw Error(ErrorDomain::usage, EINVAL, {.op = "doctor"},
                  fmt::format("the workload itself failed: {}", e.baseline.error));
    }
    for (auto& p : planned) {
      if (round > 1 && !p.error.empty()) continue;
      stage(fmt::format("{} ({}, round {}/{})", p.name, p.change, round, rounds));
      runner.run(p, slice / rounds);
    }
  }
  for (auto& p : planned) e.trials.push_back(std::move(p));
  // Every helpful change together runs once, last: it sets the ceiling, never a finding.
  if (auto c = combine(e)) {
    if (since(t0) + slice <= o.budget_s) {
      stage(fmt::format("combined ({})", c->change));
      runner.run(*c, slice);
      e.trials.push_back(std::move(*c));
    } else {
      rep.skipped.push_back("combined: no time left in the budget");
    }
  }
  stage("diagnosis");
  rep.diagnosis = diagnose(e);
  rep.elapsed_s = since(t0);
  return rep;
}

}  // namespace sluice::doctor
