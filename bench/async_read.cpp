// sluice_async_read_bench: the library path of many small reads, as an ingestion pipeline or a
// loader drives it: sluice::read_async with --iodepth reads in flight (the oldest waited for
// first, then replaced), or sluice::submit_batch of --iodepth entries at a time (--api batch),
// for --time seconds. Prints IOPS, GiB/s, the process's CPU time per read (user + system, every
// thread), latency from the call to the collected result, and the paths the reads took.
//
//   sluice_async_read_bench FILE [--bs 4K] [--iodepth 32] [--time 5] [--rw randread|read]
//                           [--api async|batch] [--device sim|cuda:N] [--size BYTES] [--seed N]
//                           [--json]
//
// Reads cover the first --size bytes of FILE (default: all of it) at --bs-aligned offsets,
// random or in order. The buffers are host memory (4096-aligned, touched before the clock
// starts), or device memory with --device. Configuration from the environment as for any
// program using the library (SLUICE_ENGINE, SLUICE_DIRECT_IO, ...). bench/vs-fio.sh --library
// runs this against fio.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sluice/device.hpp"
#include "sluice/file.hpp"
#include "sluice/histogram.hpp"
#include "sluice/transfer.hpp"
#include "sluice/units.hpp"

namespace {

struct Args {
  std::string file;
  std::uint64_t bs = 4096;
  unsigned iodepth = 32;
  double time_s = 5;
  bool random = true;
  bool batch = false;
  std::string device;
  std::uint64_t size = 0;
  std::uint64_t seed = 1;
  bool json = false;
};

[[noreturn]] void usage(int rc) {
  std::fputs(
      "usage: sluice_async_read_bench FILE [--bs 4K] [--iodepth 32] [--time 5]\n"
      "           [--rw randread|read] [--api async|batch] [--device sim|cuda:N] [--size BYTES]\n"
      "           [--seed N] [--json]\n"
      "  read_async with --iodepth reads in flight (or submit_batch of --iodepth entries with\n"
      "  --api batch) for --time seconds; prints IOPS, GiB/s, CPU us per read, latency, paths.\n",
      rc == 0 ? stdout : stderr);
  std::exit(rc);
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(2);
      return argv[++i];
    };
    auto size = [&] {
      const std::string v = value();
      const auto n = sluice::parse_size(v);
      if (!n) usage(2);
      return *n;
    };
    if (s == "--bs") {
      a.bs = size();
    } else if (s == "--iodepth") {
      a.iodepth = static_cast<unsigned>(std::stoul(value()));
    } else if (s == "--time") {
      a.time_s = std::stod(value());
    } else if (s == "--rw") {
      const std::string rw = value();
      if (rw != "randread" && rw != "read") usage(2);
      a.random = rw == "randread";
    } else if (s == "--api") {
      const std::string api = value();
      if (api != "async" && api != "batch") usage(2);
      a.batch = api == "batch";
    } else if (s == "--device") {
      a.device = value();
    } else if (s == "--size") {
      a.size = size();
    } else if (s == "--seed") {
      a.seed = std::stoull(value());
    } else if (s == "--json") {
      a.json = true;
    } else if (s == "-h" || s == "--help") {
      usage(0);
    } else if (a.file.empty() && s[0] != '-') {
      a.file = s;
    } else {
      usage(2);
    }
  }
  if (a.file.empty() || a.bs == 0 || a.iodepth == 0 || a.time_s <= 0) usage(2);
  return a;
}

double cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

// The buffers, one per read in flight: host memory, or device memory with --device.
class Buffers {
 public:
  Buffers(const Args& a, const std::shared_ptr<sluice::Device>& dev) {
    for (unsigned i = 0; i < a.iodepth; ++i) {
      if (dev) {
        device_.emplace_back(dev, a.bs);
        ptrs_.push_back(device_.back().data());
        continue;
      }
      void* p = nullptr;
      if (posix_memalign(&p, 4096, a.bs) != 0) throw std::bad_alloc();
      std::memset(p, 0, a.bs);
      host_.emplace_back(p, &std::free);
      ptrs_.push_back(p);
    }
  }
  [[nodiscard]] void* operator[](std::size_t i) const { return ptrs_[i]; }

 private:
  std::vector<sluice::DeviceBuffer> device_;
  std::vector<std::unique_ptr<void, decltype(&std::free)>> host_;
  std::vector<void*> ptrs_;
};

struct Tally {
  std::uint64_t ios = 0;
  sluice::LatencyHistogram latency;
  // (path, reason) -> reads; formatted once, for the report, not per read (the bench's own cost
  // per read is counted in the library's CPU per read).
  std::map<std::pair<sluice::Path, std::string>, std::uint64_t> paths;

  [[nodiscard]] std::map<std::string, std::uint64_t> named_paths() const {
    std::map<std::string, std::uint64_t> out;
    for (const auto& [key, n] : paths) {
      out[fmt::format("{}: {}", sluice::to_string(key.first), key.second)] += n;
    }
    return out;
  }

  void add(const sluice::TransferResult& r, std::uint64_t want, std::uint64_t ns) {
    if (r.bytes != want)
      throw std::runtime_error(fmt::format("short read: {} of {} bytes", r.bytes, want));
    ++ios;
    latency.record(ns);
    ++paths[{r.path, r.reason}];
  }
};

class Offsets {
 public:
  Offsets(const Args& a, std::uint64_t span)
      : bs_(a.bs), blocks_(span / a.bs), random_(a.random), rng_(a.seed) {
    if (blocks_ == 0) throw std::runtime_error("the file is smaller than one block");
  }
  std::uint64_t next() { return (random_ ? rng_() % blocks_ : next_++ % blocks_) * bs_; }

 private:
  std::uint64_t bs_, blocks_;
  bool random_;
  std::mt19937_64 rng_;
  std::uint64_t next_ = 0;
};

struct Pending {
  sluice::TransferFuture fut;
  unsigned slot = 0;
  std::uint64_t t0 = 0;
};

void run_async(const Args& a, const sluice::File& f, const Buffers& bufs, Offsets& offs,
               const sluice::TransferOptions& o, double end_s, Tally& t) {
  std::deque<Pending> q;
  std::vector<unsigned> free_slots;
  for (unsigned i = a.iodepth; i-- > 0;) free_slots.push_back(i);
  const auto end = now_ns() + static_cast<std::uint64_t>(end_s * 1e9);
  for (;;) {
    while (!free_slots.empty() && now_ns() < end) {
      Pending p;
      p.slot = free_slots.back();
      free_slots.pop_back();
      p.t0 = now_ns();
      p.fut = sluice::read_async(f, bufs[p.slot], a.bs, offs.next(), o);
      q.push_back(std::move(p));
    }
    if (q.empty()) return;
    Pending p = std::move(q.front());
    q.pop_front();
    const sluice::TransferResult r = p.fut.get();
    t.add(r, a.bs, now_ns() - p.t0);
    free_slots.push_back(p.slot);
  }
}

void run_batch(const Args& a, const sluice::File& f, const Buffers& bufs, Offsets& offs,
               const sluice::TransferOptions& o, double end_s, Tally& t) {
  std::vector<sluice::BatchEntry> entries(a.iodepth);
  const auto end = now_ns() + static_cast<std::uint64_t>(end_s * 1e9);
  while (now_ns() < end) {
    for (unsigned i = 0; i < a.iodepth; ++i)
      entries[i] = {sluice::IoOp::read, &f, bufs[i], a.bs, offs.next()};
    const std::uint64_t t0 = now_ns();
    auto futs = sluice::submit_batch(entries, o);
    for (auto& fu : futs) t.add(fu.get(), a.bs, now_ns() - t0);
  }
}

void report(const Args& a, const Tally& t, double seconds, double cpu, const std::string& device) {
  const double iops = static_cast<double>(t.ios) / seconds;
  const double p50 = static_cast<double>(t.latency.value_at_percentile(50)) / 1e3;
  const double p99 = static_cast<double>(t.latency.value_at_percentile(99)) / 1e3;
  if (a.json) {
    nlohmann::json j{{"api", a.batch ? "batch" : "async"},
                     {"rw", a.random ? "randread" : "read"},
                     {"bs", a.bs},
                     {"iodepth", a.iodepth},
                     {"seconds", seconds},
                     {"ios", t.ios},
                     {"iops", iops},
                     {"gib_per_s", iops * static_cast<double>(a.bs) / sluice::GiB},
                     {"cpu_s", cpu},
                     {"cpu_us_per_io", cpu * 1e6 / static_cast<double>(t.ios)},
                     {"lat_p50_us", p50},
                     {"lat_p99_us", p99},
                     {"device", device},
                     {"paths", t.named_paths()}};
    std::puts(j.dump().c_str());
    return;
  }
  fmt::print(
      "{} {} bs={} iodepth={} {}: {:.0f} IOPS, {:.3f} GiB/s, {:.2f} us CPU per read, "
      "latency p50 {:.1f} us p99 {:.1f} us ({} reads in {:.2f} s)\n",
      a.batch ? "submit_batch" : "read_async", a.random ? "randread" : "read", a.bs, a.iodepth,
      device.empty() ? "host memory" : device, iops, iops * static_cast<double>(a.bs) / sluice::GiB,
      cpu * 1e6 / static_cast<double>(t.ios), p50, p99, t.ios, seconds);
  for (const auto& [path, n] : t.named_paths()) fmt::print("  {} reads: {}\n", n, path);
}

}  // namespace

int main(int argc, char** argv) try {
  const Args a = parse(argc, argv);
  const sluice::File f = sluice::File::open(a.file, sluice::OpenMode::read);
  const std::uint64_t span = a.size > 0 ? std::min(a.size, f.size()) : f.size();
  std::shared_ptr<sluice::Device> dev;
  sluice::TransferOptions o;
  if (!a.device.empty()) {
    dev = sluice::open_device(a.device);
    o.device = dev;
  }
  const Buffers bufs(a, dev);
  Offsets offs(a, span);
  Tally t;
  const double c0 = cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  if (a.batch) {
    run_batch(a, f, bufs, offs, o, a.time_s, t);
  } else {
    run_async(a, f, bufs, offs, o, a.time_s, t);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  report(a, t, seconds, cpu_seconds() - c0, dev ? dev->info().name : std::string());
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "sluice_async_read_bench: %s\n", e.what());
  return 1;
}
