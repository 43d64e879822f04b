// sluice_host_read_bench: reads a whole file into host memory with sluice::read, N times, and
// reports for each run the wall time, throughput, CPU time of the process and the path taken.
// The configuration comes from the environment (SLUICE_ENGINE, SLUICE_THREADS,
// SLUICE_QUEUE_DEPTH, SLUICE_IO_SIZE, ...), as for any program using the library.
//
//   sluice_host_read_bench FILE [--repeat N] [--json] [--hugepages]
//   sluice_host_read_bench --print-config
//
// The destination buffer is allocated once (4096-aligned, the size of the file) and every page
// is touched before the first timed run, so page faults are not part of the measurement.
// --hugepages asks for transparent huge pages on it (madvise), to compare with a peer whose
// buffers are huge pages (fio --iomem=shmhuge): the physical layout of the destination decides
// how many scatter-gather segments each request has, which some devices (virtio-blk) pay for
// per segment. The number of bytes actually backed by huge pages is printed.
// --print-config prints the effective engine, threads, queue depth and I/O size as one JSON line
// and reads nothing: bench/host-vs-fio.sh gives fio the same settings as sluice's defaults.
// bench/host-vs-fio.sh drives this program against fio.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sluice/config.hpp"
#include "sluice/error.hpp"
#include "sluice/file.hpp"
#include "sluice/transfer.hpp"

namespace {

constexpr double gib = 1024.0 * 1024.0 * 1024.0;

struct Cpu {
  double user = 0;
  double sys = 0;
};

Cpu cpu_now() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto sec = [](const timeval& tv) {
    return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
  };
  return {sec(ru.ru_utime), sec(ru.ru_stime)};
}

// Bytes of this process's anonymous memory backed by transparent huge pages (smaps_rollup).
std::uint64_t anon_huge_bytes() {
  std::ifstream in("/proc/self/smaps_rollup");
  std::string key;
  std::uint64_t kb = 0;
  while (in >> key) {
    if (key == "AnonHugePages:") {
      in >> kb;
      return kb * 1024;
    }
    in.ignore(4096, '\n');
  }
  return 0;
}

// Average number of physically contiguous runs (scatter-gather segments, before any IOMMU
// merging) per `chunk` bytes of [p, p + size), from /proc/self/pagemap. Needs CAP_SYS_ADMIN to
// see frame numbers; returns a negative value where they are hidden. The physical layout of the
// destination decides how many segments each O_DIRECT request carries, which some devices
// (virtio-blk) pay for per segment, so the benchmark reports it beside the throughput.
double segments_per_chunk(const std::byte* p, std::uint64_t size, std::uint64_t chunk) {
  const auto page = static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
  const int fd = ::open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (fd < 0 || chunk < page) {
    if (fd >= 0) ::close(fd);
    return -1;
  }
  constexpr std::uint64_t pfn_mask = (std::uint64_t{1} << 55) - 1;
  constexpr std::uint64_t present = std::uint64_t{1} << 63;
  const std::uint64_t first = reinterpret_cast<std::uintptr_t>(p) / page;
  const std::uint64_t pages = size / page;
  const std::uint64_t per_chunk = chunk / page;
  std::vector<std::uint64_t> entries(std::min<std::uint64_t>(pages, 1 << 16));
  std::uint64_t segments = 0;
  std::uint64_t prev = 0;
  bool ok = true;
  for (std::uint64_t i = 0; i < pages && ok;) {
    const std::uint64_t n = std::min<std::uint64_t>(entries.size(), pages - i);
    const auto want = static_cast<ssize_t>(n * sizeof(std::uint64_t));
    if (::pread(fd, entries.data(), static_cast<std::size_t>(want),
                static_cast<off_t>((first + i) * sizeof(std::uint64_t))) != want) {
      ok = false;
      break;
    }
    for (std::uint64_t k = 0; k < n; ++k, ++i) {
      const std::uint64_t e = entries[k];
      const std::uint64_t pfn = e & pfn_mask;
      if ((e & present) == 0 || pfn == 0) {  // not present, or frame numbers hidden
        ok = false;
        break;
      }
      if (i % per_chunk == 0 || pfn != prev + 1) ++segments;
      prev = pfn;
    }
  }
  ::close(fd);
  if (!ok || pages == 0) return -1;
  return static_cast<double>(segments) /
         (static_cast<double>(pages) / static_cast<double>(per_chunk));
}

[[noreturn]] void usage(int rc) {
  std::fputs(
      "usage: sluice_host_read_bench FILE [--repeat N] [--json] [--hugepages]\n"
      "       sluice_host_read_bench --print-config\n"
      "  Reads FILE whole into one pre-faulted, 4096-aligned host buffer with sluice::read,\n"
      "  N times (default 1), printing seconds, GiB/s, CPU seconds (user+sys of the process)\n"
      "  and the path taken for each run; --json prints one JSON object per line per run.\n"
      "  --hugepages: madvise(MADV_HUGEPAGE) the buffer (transparent huge pages).\n"
      "  --print-config: the effective engine, threads, queue_depth, io_size, direct_io as\n"
      "  one JSON line; nothing is read.\n"
      "  Settings come from the environment: SLUICE_ENGINE, SLUICE_THREADS,\n"
      "  SLUICE_QUEUE_DEPTH, SLUICE_IO_SIZE, SLUICE_DIRECT_IO, ...\n",
      rc == 0 ? stdout : stderr);
  std::exit(rc);
}

struct Args {
  std::string file;
  unsigned repeat = 1;
  bool json = false;
  bool hugepages = false;
  bool print_config = false;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "-h" || arg == "--help") usage(0);
    if (arg == "--json") {
      a.json = true;
    } else if (arg == "--hugepages") {
      a.hugepages = true;
    } else if (arg == "--print-config") {
      a.print_config = true;
    } else if (arg == "--repeat" || arg.starts_with("--repeat=")) {
      std::string value;
      if (arg == "--repeat") {
        if (++i >= argc) usage(2);
        value = argv[i];
      } else {
        value = std::string(arg.substr(std::strlen("--repeat=")));
      }
      char* end = nullptr;
      const unsigned long n = std::strtoul(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || n == 0 || n > 100000) {
        std::fprintf(stderr, "sluice_host_read_bench: --repeat wants a count >= 1, got '%s'\n",
                     value.c_str());
        std::exit(2);
      }
      a.repeat = static_cast<unsigned>(n);
    } else if (arg.starts_with("-")) {
      std::fprintf(stderr, "sluice_host_read_bench: unknown option '%s'\n", argv[i]);
      usage(2);
    } else if (a.file.empty()) {
      a.file = arg;
    } else {
      std::fprintf(stderr, "sluice_host_read_bench: one FILE only\n");
      usage(2);
    }
  }
  if (a.file.empty() && !a.print_config) usage(2);
  return a;
}

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  try {
    const auto cfg = sluice::config();
    if (args.print_config) {
      const nlohmann::json j = {{"engine", std::string(to_string(cfg->engine))},
                                {"threads", cfg->effective_threads()},
                                {"queue_depth", cfg->queue_depth},
                                {"io_size", cfg->io_size},
                                {"direct_io", cfg->direct_io}};
      std::printf("%s\n", j.dump().c_str());
      return 0;
    }
    sluice::File file = sluice::File::open(args.file, sluice::OpenMode::read);
    const std::uint64_t size = file.size();
    if (size == 0) {
      std::fprintf(stderr, "sluice_host_read_bench: %s is empty\n", args.file.c_str());
      return 1;
    }

    void* raw = nullptr;
    const std::size_t align = args.hugepages ? std::size_t{2} << 20 : 4096;
    if (posix_memalign(&raw, align, static_cast<std::size_t>(size)) != 0) {
      std::fprintf(stderr, "sluice_host_read_bench: cannot allocate %llu bytes\n",
                   static_cast<unsigned long long>(size));
      return 1;
    }
    std::unique_ptr<std::byte, FreeDeleter> buf(static_cast<std::byte*>(raw));
    if (args.hugepages && madvise(raw, static_cast<std::size_t>(size), MADV_HUGEPAGE) != 0) {
      std::fprintf(stderr, "sluice_host_read_bench: madvise(MADV_HUGEPAGE): %s\n",
                   std::strerror(errno));
      return 1;
    }
    const long page = sysconf(_SC_PAGESIZE);
    // Pre-fault: write every page so the timed runs see no first-touch faults.
    for (std::uint64_t off = 0; off < size; off += static_cast<std::uint64_t>(page)) {
      buf.get()[off] = std::byte{1};
    }
    buf.get()[size - 1] = std::byte{1};
    const std::uint64_t huge = anon_huge_bytes();
    const double segments = segments_per_chunk(buf.get(), size, cfg->io_size);

    if (!args.json) {
      const std::string seg_text = segments < 0 ? std::string("? (frame numbers need root)")
                                                : fmt::format("{:.1f}", segments);
      std::printf(
          "file %s: %.3f GiB on %s (%s); engine=%s threads=%u queue_depth=%u "
          "io_size=%llu direct_io=%s; buffer %s, %.3f GiB in huge pages, %s physical "
          "segments per io_size\n",
          args.file.c_str(), static_cast<double>(size) / gib, file.fs_type().c_str(),
          file.has_direct() ? "O_DIRECT available" : file.direct_reason().c_str(),
          std::string(to_string(cfg->engine)).c_str(), cfg->effective_threads(), cfg->queue_depth,
          static_cast<unsigned long long>(cfg->io_size), cfg->direct_io ? "on" : "off",
          args.hugepages ? "madvise(MADV_HUGEPAGE)" : "4 KiB pages",
          static_cast<double>(huge) / gib, seg_text.c_str());
      std::printf("%4s %10s %10s %10s %10s %12s  %s\n", "run", "seconds", "GiB/s", "cpu_s",
                  "cpu_s/GiB", "ios", "path: reason");
    }

    for (unsigned run = 1; run <= args.repeat; ++run) {
      const Cpu c0 = cpu_now();
      const auto t0 = std::chrono::steady_clock::now();
      const sluice::TransferResult r = sluice::read(file, buf.get(), size, 0);
      const auto t1 = std::chrono::steady_clock::now();
      const Cpu c1 = cpu_now();
      if (r.bytes != size) {
        std::fprintf(stderr, "sluice_host_read_bench: run %u read %llu of %llu bytes\n", run,
                     static_cast<unsigned long long>(r.bytes),
                     static_cast<unsigned long long>(size));
        return 1;
      }
      const double seconds = std::chrono::duration<double>(t1 - t0).count();
      const double user = c1.user - c0.user;
      const double sys = c1.sys - c0.sys;
      const double gibs = static_cast<double>(r.bytes) / gib;
      const double rate = seconds > 0 ? gibs / seconds : 0.0;
      const std::string path(sluice::to_string(r.path));
      if (args.json) {
        const nlohmann::json j = {
            {"run", run},
            {"bytes", r.bytes},
            {"seconds", seconds},
            {"gib_per_s", rate},
            {"cpu_seconds", user + sys},
            {"cpu_user", user},
            {"cpu_sys", sys},
            {"cpu_seconds_per_gib", (user + sys) / gibs},
            {"ios", r.ios},
            {"path", path},
            {"reason", r.reason},
            {"engine", std::string(to_string(cfg->engine))},
            {"threads", cfg->effective_threads()},
            {"queue_depth", cfg->queue_depth},
            {"io_size", cfg->io_size},
            {"direct_io", cfg->direct_io},
            {"hugepages", args.hugepages},
            {"buffer_huge_bytes", huge},
            {"buffer_segments_per_io",
             segments < 0 ? nlohmann::json(nullptr) : nlohmann::json(segments)},
        };
        std::printf("%s\n", j.dump().c_str());
      } else {
        std::printf("%4u %10.3f %10.3f %10.3f %10.4f %12llu  %s: %s\n", run, seconds, rate,
                    user + sys, (user + sys) / gibs, static_cast<unsigned long long>(r.ios),
                    path.c_str(), r.reason.c_str());
      }
      std::fflush(stdout);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sluice_host_read_bench: %s\n", e.what());
    return 1;
  }
}
