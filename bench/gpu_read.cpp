// sluice_gpu_bench: the measurements behind the GPU-path benchmarks (bench/bounce-overlap.sh,
// bench/gpu-check.sh). Two modes, one JSON line per run with --json:
//
//   sluice_gpu_bench read FILE [--device D] [--path P] [--repeat N] [--json]
//       reads the whole file into one device buffer through sluice::read with path P
//       (auto|direct|bounce|posix|host; host reads into pinned host memory instead)
//   sluice_gpu_bench h2d [--device D] [--size S] [--repeat N] [--json]
//       pinned host -> device copy bandwidth, the other limit of file -> GPU throughput
//
// Settings come from the environment (SLUICE_SIM_H2D_GBPS, SLUICE_BOUNCE_BUFFERS, ...).
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sluice/device.hpp"
#include "sluice/error.hpp"
#include "sluice/file.hpp"
#include "sluice/transfer.hpp"
#include "sluice/units.hpp"

namespace {

constexpr double gib = 1024.0 * 1024.0 * 1024.0;

double cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

struct Args {
  std::string mode, file, device = "auto", path = "auto";
  std::uint64_t size = 256 * sluice::MiB;
  int repeat = 3;
  bool json = false;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "sluice_gpu_bench: %s\nusage: sluice_gpu_bench read FILE [--device D] [--path P] "
               "[--repeat N] [--json]\n       sluice_gpu_bench h2d [--device D] [--size S] "
               "[--repeat N] [--json]\n",
               why.c_str());
  std::exit(2);
}

Args parse(int argc, char** argv) {
  Args a;
  if (argc < 2) usage("missing mode");
  a.mode = argv[1];
  int i = 2;
  if (a.mode == "read") {
    if (argc < 3) usage("read needs FILE");
    a.file = argv[i++];
  } else if (a.mode != "h2d") {
    usage("unknown mode '" + a.mode + "'");
  }
  for (; i < argc; ++i) {
    const std::string_view opt = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(std::string(opt) + " needs a value");
      return argv[++i];
    };
    if (opt == "--device") {
      a.device = value();
    } else if (opt == "--path") {
      a.path = value();
    } else if (opt == "--repeat") {
      a.repeat = std::stoi(value());
    } else if (opt == "--size") {
      auto s = sluice::parse_size(value());
      if (!s || *s == 0) usage("bad --size");
      a.size = *s;
    } else if (opt == "--json") {
      a.json = true;
    } else {
      usage("unknown option '" + std::string(opt) + "'");
    }
  }
  if (a.repeat < 1) usage("--repeat must be at least 1");
  return a;
}

void report(const Args& a, int run, const std::string& path, const std::string& reason,
            std::uint64_t bytes, double seconds, double cpu) {
  const double gibs = static_cast<double>(bytes) / gib / seconds;
  if (a.json) {
    nlohmann::json j = {{"mode", a.mode}, {"run", run}, {"device", a.device}, {"path", path},
                        {"reason", reason}, {"bytes", bytes}, {"seconds", seconds},
                        {"gib_per_s", gibs}, {"cpu_seconds", cpu}};
    std::puts(j.dump().c_str());
  } else {
    std::printf("%s run %d: %.3f s, %.2f GiB/s, %.2f CPU s, path %s (%s)\n", a.mode.c_str(), run,
                seconds, gibs, cpu, path.c_str(), reason.c_str());
  }
  std::fflush(stdout);
}

int run_read(const Args& a) {
  auto dev = sluice::open_device(a.device);
  auto file = sluice::File::open(a.file, sluice::OpenMode::read);
  const std::uint64_t size = file.size();
  sluice::TransferOptions opts;
  opts.device = dev;
  if (a.path != "auto") {
    auto p = sluice::parse_path(a.path);
    if (!p) usage("unknown path '" + a.path + "'");
    opts.path = p;
  }
  const bool host = opts.path == sluice::Path::host;
  sluice::PinnedBuffer pinned;
  sluice::DeviceBuffer on_device;
  if (host) {
    pinned = sluice::PinnedBuffer(dev, size);
  } else {
    on_device = sluice::DeviceBuffer(dev, size);
  }
  void* buf = host ? pinned.data() : on_device.data();
  for (int run = 1; run <= a.repeat; ++run) {
    const double cpu0 = cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    auto r = sluice::read(file, buf, size, 0, opts);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    report(a, run, std::string(sluice::to_string(r.path)), r.reason, r.bytes, s, cpu_seconds() - cpu0);
  }
  return 0;
}

int run_h2d(const Args& a) {
  auto dev = sluice::open_device(a.device);
  const sluice::PinnedBuffer host(dev, a.size);
  std::memset(host.data(), 1, a.size);
  const sluice::DeviceBuffer d(dev, a.size);
  for (int run = 1; run <= a.repeat; ++run) {
    const double cpu0 = cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    dev->copy_to_device(d.data(), host.data(), a.size);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    report(a, run, "h2d", dev->info().name, a.size, s, cpu_seconds() - cpu0);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  try {
    return a.mode == "read" ? run_read(a) : run_h2d(a);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sluice_gpu_bench: %s\n", e.what());
    return 1;
  }
}
