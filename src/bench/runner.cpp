// One benchmark run: resolve and lay out the files, cut each file's range among its threads,
// open the devices, start the threads, sample progress and throughput on the calling thread,
// then merge what the threads measured. A failure inside a thread stops all of them and the
// result keeps what was measured until then.
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include <fmt/format.h>

#include "sluice/error.hpp"
#include "sluice/transfer.hpp"
#include "worker.hpp"

namespace sluice::bench {
namespace detail {

OffsetGen::OffsetGen(Region region, std::uint64_t block_size, const Workload& w, std::uint64_t seed)
    : region_(region), bs_(block_size), blocks_((region.hi - region.lo) / block_size), rw_(w.rw),
      mix_read_(w.mix_read), unaligned_(w.unaligned && is_random(w.rw)), wrap_(w.time_s > 0),
      rng_(seed * 0x9E3779B97F4A7C15ULL + 1) {
  std::uint64_t m = 1;
  while (m < blocks_) m <<= 1;
  lcg_mask_ = m - 1;
  lcg_state_ = rand() & lcg_mask_;
  lcg_inc_ = (rand() | 1);
}

std::uint64_t OffsetGen::rand() noexcept {  // xorshift64*
  rng_ ^= rng_ >> 12;
  rng_ ^= rng_ << 25;
  rng_ ^= rng_ >> 27;
  return rng_ * 0x2545F4914F6CDD1DULL;
}

bool OffsetGen::next(Op& op) {
  if (blocks_ == 0 || (!wrap_ && issued_ >= blocks_)) return false;
  std::uint64_t index = 0;
  if (!is_random(rw_)) {
    index = issued_ % blocks_;
  } else if (!unaligned_) {
    // Full-period LCG modulo a power of two, skipping values past the last block: every block
    // exactly once per cycle.
    do {
      lcg_state_ = (lcg_state_ * 6364136223846793005ULL + lcg_inc_) & lcg_mask_;
    } while (lcg_state_ >= blocks_);
    index = lcg_state_;
  }
  if (unaligned_) {
    op.offset = region_.lo + rand() % (region_.hi - region_.lo - bs_ + 1);
  } else {
    op.offset = region_.lo + index * bs_;
  }
  op.len = static_cast<std::uint32_t>(bs_);
  switch (rw_) {
    case RwMode::read:
    case RwMode::randread: op.op = IoOp::read; break;
    case RwMode::write:
    case RwMode::randwrite: op.op = IoOp::write; break;
    default: op.op = rand() % 100 < mix_read_ ? IoOp::read : IoOp::write; break;
  }
  ++issued_;
  return true;
}

void Shared::fail(std::string message) {
  {
    std::lock_guard lock(mutex);
    if (error.empty()) error = std::move(message);
  }
  stop.store(true);
}

void ThreadOutcome::merge(const ThreadOutcome& o) {
  latency.merge(o.latency);
  clat.merge(o.clat);
  reads.merge(o.reads);
  writes.merge(o.writes);
  ios += o.ios;
  for (const auto& [k, n] : o.paths) paths[k] += n;
}

void ThreadOutcome::count(const ThreadJob& job, IoOp op, std::uint64_t n, std::uint64_t ns) {
  latency.record(ns);
  DirectionStats& d = op == IoOp::read ? reads : writes;
  d.bytes += n;
  ++d.ios;
  d.latency.record(ns);
  ++ios;
  job.shared->bytes.fetch_add(n, std::memory_order_relaxed);
  job.shared->ios.fetch_add(1, std::memory_order_relaxed);
}

void pin_thread(const std::vector<int>& cpus) {
  if (cpus.empty()) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) CPU_SET(c, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

std::string mismatch_message(const File& file, std::uint64_t bad, std::uint64_t block, std::uint64_t seed) {
  return fmt::format("verify failed: byte at offset {} (in the block at {}) of '{}' differs from "
                     "the pattern of seed {} (corrupted, or not written by sluice bench with this seed)",
                     bad, block, file.path(), seed);
}

void set_paths(RunResult& r, const PathCounts& paths) {
  r.paths.clear();
  for (const auto& [k, n] : paths) r.paths.push_back({k.first, k.second, n});
  std::stable_sort(r.paths.begin(), r.paths.end(), [](const PathShare& a, const PathShare& b) { return a.ios > b.ios; });
  if (r.paths.empty()) return;
  r.path = r.paths[0].path;
  r.reason = r.paths[0].reason;
  if (r.paths.size() > 1) {
    r.reason += fmt::format(" (+{} other path/reason combinations, see paths)", r.paths.size() - 1);
  }
}

}  // namespace detail

namespace {

using detail::Region;

std::vector<int> numa_cpus(int node) {
  std::vector<int> cpus;
  if (node < 0) return cpus;
  std::ifstream in(fmt::format("/sys/devices/system/node/node{}/cpulist", node));
  std::string list;
  if (!(in >> list)) {
    throw_usage_error({.op = "bench"}, fmt::format("NUMA node {} does not exist here", node));
  }
  std::size_t pos = 0;
  while (pos < list.size()) {
    const std::size_t comma = std::min(list.find(',', pos), list.size());
    const std::string item = list.substr(pos, comma - pos);
    const std::size_t dash = item.find('-');
    const int a = std::stoi(item.substr(0, dash));
    const int b = dash == std::string::npos ? a : std::stoi(item.substr(dash + 1));
    for (int c = a; c <= b; ++c) cpus.push_back(c);
    pos = comma + 1;
  }
  return cpus;
}

std::vector<std::string> device_specs(const std::string& spec) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos <= spec.size()) {
    const std::size_t comma = std::min(spec.find(',', pos), spec.size());
    std::string item = spec.substr(pos, comma - pos);
    if (!item.empty() && std::all_of(item.begin(), item.end(), ::isdigit)) item = "cuda:" + item;
    if (!item.empty()) out.push_back(item);
    pos = comma + 1;
  }
  if (out.empty()) out.emplace_back("auto");
  return out;
}

// The file each thread works on.
std::vector<std::string> thread_files(const Workload& w) {
  std::vector<std::string> out;
  if (!w.dir.empty()) {
    struct stat st{};
    if (::stat(w.dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      throw_usage_error({.op = "bench", .path = w.dir}, "--dir: no such directory");
    }
    for (unsigned t = 0; t < w.threads; ++t) out.push_back(fmt::format("{}/sluice-bench.{}", w.dir, t));
  } else {
    for (unsigned t = 0; t < w.threads; ++t) out.push_back(w.files[t % w.files.size()]);
  }
  return out;
}

// Writes the pattern over [0, end) of a file that a read run needs, like fio's layout step.
void lay_out(const std::string& path, std::uint64_t end, std::uint64_t seed) {
  File f = File::open(path, OpenMode::write, {.create = true});
  const std::uint64_t have = f.size();
  constexpr std::uint64_t piece = 8 * MiB;
  std::vector<std::byte> buf(piece);
  for (std::uint64_t pos = round_down(have, 8); pos < end; pos += piece) {
    const std::uint64_t n = std::min(piece, end - pos);
    fill_pattern(buf.data(), pos, static_cast<std::size_t>(n), seed);
    (void)sluice::write(f, buf.data(), n, pos, {.sync = pos + n >= end ? SyncMode::data : SyncMode::none});
  }
}

struct Layout {
  std::vector<std::string> paths;                 // per thread
  std::map<std::string, std::unique_ptr<File>> files;
  std::vector<Region> regions;                    // per thread
};

Layout plan_layout(const Workload& w) {
  Layout l;
  l.paths = thread_files(w);
  std::map<std::string, unsigned> sharers;
  for (const auto& p : l.paths) ++sharers[p];
  const bool reads = does_reads(w.rw) || w.verify;
  for (const auto& [path, n] : sharers) {
    std::error_code ec;
    const bool exists = std::filesystem::exists(path, ec);
    const std::uint64_t have = exists ? std::filesystem::file_size(path, ec) : 0;
    if (!exists && !does_writes(w.rw) && w.size == 0) {
      throw_usage_error({.op = "bench", .path = path}, "no such file; give --size to create it");
    }
    if (does_reads(w.rw) && w.size > 0 && !ec && have < w.offset + w.size) {
      lay_out(path, w.offset + w.size, w.seed);
    }
    const OpenMode mode = does_writes(w.rw) ? (reads ? OpenMode::read_write : OpenMode::write) : OpenMode::read;
    const bool direct = w.direct && w.xfer != XferType::cpu_cached_gpu;
    l.files[path] = std::make_unique<File>(File::open(path, mode, {.create = true, .direct = direct}));
    const std::uint64_t fsize = l.files[path]->size();
    std::uint64_t span = w.size;
    if (span == 0) {
      if (does_writes(w.rw) && fsize <= w.offset) {
        throw_usage_error({.op = "bench", .path = path}, "--size is needed to write a new file");
      }
      span = fsize > w.offset ? fsize - w.offset : 0;
    }
    const std::uint64_t share = round_down(span / n, w.block_size);
    if (w.block_size > span) {
      throw_usage_error({.op = "bench", .path = path},
                        fmt::format("block size {} is larger than the file's range ({} from offset {})",
                                    format_size(w.block_size), format_size(span), w.offset));
    }
    if (share == 0) {
      throw_usage_error({.op = "bench", .path = path},
                        fmt::format("{} threads share {}: each thread's part is smaller than the block "
                                    "size {}", n, format_size(span), format_size(w.block_size)));
    }
  }
  std::map<std::string, unsigned> next;
  for (const auto& p : l.paths) {
    const unsigned j = next[p]++;
    const std::uint64_t span = w.size > 0 ? w.size : l.files[p]->size() - w.offset;
    const std::uint64_t share = round_down(span / sharers[p], w.block_size);
    l.regions.push_back({w.offset + j * share, w.offset + (j + 1) * share});
  }
  return l;
}

double seconds_of(const timeval& tv) {
  return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
}

double realtime_s() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

bool direct_family(XferType x) {
  return x == XferType::gpu_direct || x == XferType::gpu_direct_async || x == XferType::gpu_batch;
}

// What the result says about the run before it starts.
RunResult planned_result(const Workload& w, const Layout& layout) {
  RunResult res;
  res.xfer = w.xfer;
  res.rw = w.rw;
  res.block_size = w.block_size;
  res.threads = w.threads;
  res.iodepth = w.iodepth;
  res.verified = w.verify && does_reads(w.rw);
  for (const Region& r : layout.regions) res.dataset_bytes += r.hi - r.lo;
  return res;
}

// The devices and the memory a run moves bytes into (host memory for cpu-only types).
struct Target {
  std::vector<std::shared_ptr<Device>> devices;
  MemoryKind memory = MemoryKind::pageable_host;
};

Target open_target(const Workload& w, RunResult& res) {
  Target t;
  if (uses_gpu(w.xfer)) {
    for (const auto& spec : device_specs(w.device)) t.devices.push_back(open_device(spec));
    t.memory = w.memory.value_or(MemoryKind::device);
  }
  res.memory = std::string(to_string(t.memory));
  for (const auto& d : t.devices) {
    if (!res.device.empty()) res.device += ", ";
    res.device += d->info().name;
  }
  return t;
}

// A strict gpu-direct run fails here, with the reason, before any thread starts.
void check_strict_direct(const Workload& w, const Layout& layout, const Target& target,
                         const std::shared_ptr<Config>& cfg) {
  if (!w.strict || target.memory != MemoryKind::device || !direct_family(w.xfer)) return;
  DeviceBuffer probe(target.devices[0], static_cast<std::size_t>(w.block_size));
  (void)choose_path(*layout.files.begin()->second, probe.data(), w.block_size, layout.regions[0].lo,
                    {.config = cfg, .device = target.devices[0], .path = Path::direct});
}

std::vector<detail::ThreadJob> make_jobs(const Workload& w, Layout& layout, const Target& target,
                                         const std::shared_ptr<Config>& cfg, detail::Shared& shared) {
  const std::vector<int> cpus = numa_cpus(w.numa_node);
  std::vector<detail::ThreadJob> jobs(w.threads);
  for (unsigned t = 0; t < w.threads; ++t) {
    auto& j = jobs[t];
    j.w = &w;
    j.index = t;
    j.file = layout.files[layout.paths[t]].get();
    j.region = layout.regions[t];
    j.device = target.devices.empty() ? nullptr : target.devices[t % target.devices.size()];
    j.memory = target.memory;
    j.cfg = cfg;
    j.shared = &shared;
    j.cpus = cpus;
  }
  return jobs;
}

// Sampling, progress and the stop checks, on the calling thread while the workers run.
class Watcher {
 public:
  Watcher(const Workload& w, const ProgressFn& progress, const RunHooks& hooks, detail::Shared& shared,
          RunResult& res, std::uint64_t t0)
      : w_(w), progress_(progress), hooks_(hooks), shared_(shared), res_(res), t0_(t0),
        interval_(static_cast<std::uint64_t>(std::max(0.05, w.sample_interval_s) * 1e9)),
        next_sample_(t0 + interval_), next_progress_(t0 + progress_every), last_t_(t0), prog_t_(t0) {}

  void tick(std::uint64_t now) {
    if (shared_.past_deadline(now)) shared_.stop.store(true);
    if (hooks_.poll && !res_.stopped_bytes && hooks_.poll(shared_.bytes.load())) {
      res_.stopped_bytes = shared_.bytes.load();
      res_.stopped_s = static_cast<double>(detail::now_ns() - t0_) / 1e9;
      shared_.stop.store(true);
    }
    if (w_.time_s > 0 && now >= next_sample_) sample(now);
    if (progress_ && now >= next_progress_) report(now);
  }

 private:
  static constexpr std::uint64_t progress_every = 500'000'000;

  void sample(std::uint64_t now) {
    const std::uint64_t b = shared_.bytes.load(), n = shared_.ios.load();
    const double dt = static_cast<double>(now - last_t_) / 1e9;
    res_.samples.push_back({static_cast<double>(now - t0_) / 1e9,
                            static_cast<double>(b - last_bytes_) / static_cast<double>(GiB) / dt,
                            static_cast<double>(n - last_ios_) / dt});
    last_bytes_ = b;
    last_ios_ = n;
    last_t_ = now;
    next_sample_ += interval_;
  }

  void report(std::uint64_t now) {
    const std::uint64_t b = shared_.bytes.load();
    Progress p;
    p.elapsed_s = static_cast<double>(now - t0_) / 1e9;
    p.planned_s = w_.time_s;
    p.bytes = b;
    p.planned_bytes = w_.time_s > 0 ? 0 : res_.dataset_bytes;
    p.gib_per_s = static_cast<double>(b - prog_bytes_) / static_cast<double>(GiB) /
                  (static_cast<double>(now - prog_t_) / 1e9);
    prog_bytes_ = b;
    prog_t_ = now;
    progress_(p);
    next_progress_ += progress_every;
  }

  const Workload& w_;
  const ProgressFn& progress_;
  const RunHooks& hooks_;
  detail::Shared& shared_;
  RunResult& res_;
  std::uint64_t t0_;
  std::uint64_t interval_;
  std::uint64_t next_sample_;
  std::uint64_t next_progress_;
  std::uint64_t last_bytes_ = 0, last_ios_ = 0, last_t_;
  std::uint64_t prog_bytes_ = 0, prog_t_;
};

// One thread per job, watched from this thread until all have finished. Returns the end: the
// last thread's last completion, not when this (polling) thread noticed it.
std::uint64_t run_threads(const Workload& w, const std::vector<detail::ThreadJob>& jobs,
                          std::vector<detail::ThreadOutcome>& outs, detail::Shared& shared,
                          Watcher& watcher) {
  std::vector<std::uint64_t> ended(w.threads, 0);  // each thread's last completion
  std::atomic<unsigned> finished{0};
  std::vector<std::thread> threads;
  const bool engine = runs_engine_loop(w);
  for (unsigned t = 0; t < w.threads; ++t) {
    threads.emplace_back([&, t] {
      try {
        if (engine) {
          detail::run_engine_thread(jobs[t], outs[t]);
        } else {
          detail::run_library_thread(jobs[t], outs[t]);
        }
      } catch (const std::exception& e) {
        shared.fail(e.what());
      }
      ended[t] = detail::now_ns();
      finished.fetch_add(1);
    });
  }
  while (finished.load() < w.threads) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    watcher.tick(detail::now_ns());
  }
  for (auto& t : threads) t.join();
  return *std::max_element(ended.begin(), ended.end());
}

// What the threads measured, into the result.
void merge_outcomes(const Workload& w, const Layout& layout, MemoryKind memory,
                    const std::vector<detail::ThreadOutcome>& outs, RunResult& res) {
  detail::ThreadOutcome all;
  for (const auto& o : outs) all.merge(o);
  res.bytes = all.reads.bytes + all.writes.bytes;
  res.ios = all.ios;
  res.latency = std::move(all.latency);
  res.clat = std::move(all.clat);
  res.reads = std::move(all.reads);
  res.writes = std::move(all.writes);
  detail::set_paths(res, all.paths);
  if (direct_family(w.xfer) && memory == MemoryKind::device && !res.path.empty() && res.path != "direct") {
    res.fell_back = true;
    res.reason = fmt::format("FELL BACK from direct to {}: {}", res.path, res.reason);
  }
  // Where each thread's write got to, for the read-back of a --verify write.
  if (does_writes(w.rw)) {
    for (unsigned t = 0; t < w.threads; ++t) {
      const Region r = layout.regions[t];
      res.covered.push_back(std::min(r.hi - r.lo, outs[t].issued * w.block_size));
    }
  }
}

// Each file's range the threads cover, for the page cache state of a run.
std::vector<detail::CacheSpan> cache_spans(const Layout& layout) {
  std::map<std::string, detail::CacheSpan> by_path;
  for (std::size_t t = 0; t < layout.paths.size(); ++t) {
    const Region r = layout.regions[t];
    const detail::CacheSpan first{layout.files.at(layout.paths[t]).get(), r.lo, r.hi};
    auto it = by_path.try_emplace(layout.paths[t], first).first;
    it->second.lo = std::min(it->second.lo, r.lo);
    it->second.hi = std::max(it->second.hi, r.hi);
  }
  std::vector<detail::CacheSpan> out;
  for (const auto& [path, span] : by_path) {
    if (span.hi > span.lo) out.push_back(span);
  }
  return out;
}

RunResult run_once(const Workload& w, const ProgressFn& progress, const std::vector<Region>* regions_override,
                   const RunHooks& hooks) {
  validate(w);
  Layout layout = plan_layout(w);
  if (regions_override != nullptr) layout.regions = *regions_override;

  auto cfg = std::make_shared<Config>(*config());
  cfg->direct_io = w.direct;
  cfg->cache_policy = w.cache_policy;
  cfg->path = PathSetting::automatic;

  RunResult res = planned_result(w, layout);
  const Target target = open_target(w, res);
  check_strict_direct(w, layout, target, cfg);
  detail::Shared shared;
  const std::vector<detail::ThreadJob> jobs = make_jobs(w, layout, target, cfg, shared);
  std::vector<detail::ThreadOutcome> outs(w.threads);
  // Last before the clock, so that nothing in the set-up refills or drops the cache. Runs that
  // only write read nothing the cache could serve: they are left as they are.
  const std::vector<detail::CacheSpan> spans = cache_spans(layout);
  res.cache = detail::prepare_cache(does_reads(w.rw) ? w.cache : CacheState::as_is, spans);

  // Everything is laid out and open: the other processes' runs start with this one.
  if (hooks.at_start) hooks.at_start();
  rusage ru0{};
  getrusage(RUSAGE_SELF, &ru0);
  const std::uint64_t t0 = detail::now_ns();
  res.start_unix = realtime_s();
  if (w.time_s > 0) shared.deadline_ns = t0 + static_cast<std::uint64_t>(w.time_s * 1e9);
  Watcher watcher(w, progress, hooks, shared, res, t0);
  const std::uint64_t t1 = run_threads(w, jobs, outs, shared, watcher);
  rusage ru1{};
  getrusage(RUSAGE_SELF, &ru1);

  res.seconds = static_cast<double>(t1 - t0) / 1e9;
  res.end_unix = res.start_unix + res.seconds;
  res.cpu_user_s = seconds_of(ru1.ru_utime) - seconds_of(ru0.ru_utime);
  res.cpu_sys_s = seconds_of(ru1.ru_stime) - seconds_of(ru0.ru_stime);
  res.error = shared.error;
  merge_outcomes(w, layout, target.memory, outs, res);
  detail::finish_cache(res.cache, spans, res);
  return res;
}

}  // namespace

bool runs_engine_loop(const Workload& w) noexcept {
  return w.xfer == XferType::cpu_only && !w.via_library && !(w.unaligned && is_random(w.rw)) &&
         w.offset % 4096 == 0 && w.block_size % 4096 == 0;
}

RunResult run_workload(const Workload& w, const ProgressFn& progress) { return run_workload(w, progress, {}); }

RunResult run_workload(const Workload& w, const ProgressFn& progress, const RunHooks& hooks) {
  validate(w);
  if (w.warmup_s > 0) {
    Workload warm = w;
    warm.time_s = w.warmup_s;
    warm.warmup_s = 0;
    warm.verify = false;
    warm.cache = CacheState::as_is;  // the measured run sets the cache up after the warm-up
    RunResult r = run_once(warm, {}, nullptr, {.at_start = hooks.at_start, .poll = {}});
    if (!r.error.empty()) {
      r.phase = "warmup";
      // The other processes start their measured run: meet them there, so the calls match.
      if (hooks.at_start) hooks.at_start();
      return r;
    }
  }
  return run_once(w, progress, nullptr, hooks);
}

RunResult verify_written(const Workload& w, const RunResult& write, const ProgressFn& progress,
                         const RunHooks& hooks) {
  Workload v = w;
  v.rw = RwMode::read;
  v.time_s = 0;
  v.warmup_s = 0;
  v.verify = true;
  v.unaligned = false;
  const Layout layout = plan_layout(v);
  std::vector<Region> regions = layout.regions;
  for (std::size_t t = 0; t < regions.size() && t < write.covered.size(); ++t) {
    regions[t].hi = regions[t].lo + round_down(write.covered[t], w.block_size);
  }
  RunResult r = run_once(v, progress, &regions, hooks);
  r.phase = "verify";
  r.round = write.round;
  return r;
}

}  // namespace sluice::bench
