#include "bench_options.hpp"

#include <cerrno>
#include <fstream>

#include <fmt/format.h>

#include "cli_util.hpp"
#include "sluice/error.hpp"

namespace sluice::cli {

bench::Plan make_plan(const BenchArgs& a) {
  bench::Plan plan;
  bench::Workload& w = plan.workload;
  w.files = a.files;
  w.dir = a.dir;
  if (!a.size.empty()) w.size = to_size(a.size, "--size");
  w.offset = to_size(a.offset, "--offset");
  plan.block_sizes = bench::parse_block_sizes(a.block_size);
  w.block_size = plan.block_sizes.front();
  if (plan.block_sizes.size() == 1) plan.block_sizes.clear();
  w.rw = a.io_type >= 0 ? bench::parse_rw(std::to_string(a.io_type)) : bench::parse_rw(a.rw);
  w.mix_read = a.mix;
  w.threads = a.threads;
  w.iodepth = a.iodepth;
  if (!a.time.empty()) w.time_s = parse_seconds(a.time, "--time");
  w.warmup_s = a.warmup;
  w.unaligned = a.unaligned;
  w.seed = a.seed;
  w.verify = a.verify;
  if (a.direct && a.buffered) throw UsageError("--direct and --buffered exclude each other");
  w.direct = !a.buffered && a.gdsio_fd_mode != 1;
  if (!a.cache_policy.empty()) {
    w.cache_policy = setting_value(&Config::cache_policy, "cache_policy", a.cache_policy);
    if (a.direct && w.cache_policy != CachePolicy::bypass) {
      throw UsageError(fmt::format("--direct bypasses the page cache; --cache-policy {} contradicts it", a.cache_policy));
    }
  }
  w.xfer = bench::parse_xfer(a.xfer);
  if (!a.device.empty()) {
    w.device = a.device;
  } else if (a.gpu_index >= 0) {
    w.device = fmt::format("cuda:{}", a.gpu_index);
  }
  if (!a.memory.empty()) {
    w.memory = memory_option(a.memory);
  } else if (a.gdsio_memory >= 0) {
    static constexpr MemoryKind gdsio_kinds[] = {MemoryKind::device, MemoryKind::device, MemoryKind::pinned_host,
                                                 MemoryKind::pageable_host, MemoryKind::pageable_host};
    if (a.gdsio_memory > 4) throw UsageError("-m: memory type is 0 to 4 (cudaMalloc, cuMem, cudaMallocHost, malloc, mmap)");
    w.memory = gdsio_kinds[a.gdsio_memory];
  }
  w.numa_node = a.numa_node;
  w.strict = a.strict;
  w.sample_interval_s = a.sample_interval;
  w.submit_batch = a.submit_batch;
  w.reap_batch = a.reap_batch;
  w.huge_pages = a.huge_pages;
  w.via_library = a.via_library;
  if (!a.compare.empty()) plan.xfers = bench::parse_xfer_list(a.compare);
  plan.repeat = a.repeat;
  plan.drop_caches = a.drop_caches;
  if (a.warm && a.drop_caches) throw UsageError("--warm reads the file into the page cache; --drop-caches contradicts it");
  plan.cache = a.warm ? bench::CacheState::warm : bench::CacheState::cold;
  // Warm, an O_DIRECT type reads what the cache holds, as sluice read does; an explicit
  // --cache-policy or --direct keeps its word (O_DIRECT on a warm file is a question too).
  if (a.warm && a.cache_policy.empty() && !a.direct) w.cache_policy = CachePolicy::automatic;
  if (a.repeat == 0) throw UsageError("--repeat must be at least 1");
  bench::validate(w);
  return plan;
}

// The command as it was typed, for the report.
std::string command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string out;
  std::size_t pos = 0;
  while (pos < all.size()) {
    const std::size_t end = std::min(all.find('\0', pos), all.size());
    std::string arg = all.substr(pos, end - pos);
    if (!out.empty()) out += ' ';
    const bool plain = !arg.empty() && arg.find_first_of(" \t'\"$\\*?;&|<>()") == std::string::npos;
    out += plain ? arg : "'" + arg + "'";
    pos = end + 1;
  }
  return out;
}

void write_file(const std::string& path, const std::string& text, const char* option) {
  std::ofstream out(path);
  if (!(out << text) || !out.flush()) {
    throw Error(ErrorDomain::os, errno, {.op = option, .path = path}, "cannot write the output file");
  }
}

void add_workload_options(CLI::App* c, BenchArgs& a) {
  c->add_option("--file,-f", a.files, "file(s) to use: one shared by the threads, or several (thread t uses file t mod n); "
                                      "{rank}, {local_rank}, {host} expand per MPI rank")
      ->delimiter(',');
  c->add_option("--dir,-D", a.dir, "directory for one file per thread (sluice-bench.<t>); must exist");
  c->add_option("--size,-s", a.size, "bytes of each file to use (default: the file from --offset); "
                                      "files to read are created with this size when missing")
      ->check(size_validator());
  c->add_option("--block-size,--bs,-i", a.block_size, "I/O size, or a sweep MIN:MAX:xF (4K:1M:x2) or MIN:MAX:STEP")
      ->capture_default_str();
  c->add_option("--rw", a.rw, "read | write | randread | randwrite | rw | randrw")->capture_default_str();
  c->add_option("-I", a.io_type, "gdsio I/O type: 0 read, 1 write, 2 randread, 3 randwrite")->check(CLI::Range(0, 3));
  c->add_option("--mix", a.mix, "rw/randrw: percent of reads")->capture_default_str();
  c->add_option("--threads,-w", a.threads, "threads")->capture_default_str();
  c->add_option("--iodepth,-B", a.iodepth, "transfers in flight per thread (gdsio -B: batch size)")->capture_default_str();
  c->add_option("--time,-T", a.time, "run this long (10, 10s, 500ms, 2m) instead of covering --size once");
  c->add_option("--offset,-o", a.offset, "first byte of each file")->check(size_validator());
  c->add_flag("--unaligned,-U", a.unaligned, "random offsets at any byte instead of block multiples");
  c->add_option("--seed,-k", a.seed, "seed of the random offsets and of the verification pattern")->capture_default_str();
  c->add_flag("--verify,-V", a.verify, "write a checkable pattern; check it on every read (a write is read back)");
  c->add_flag("--direct", a.direct, "O_DIRECT where the filesystem has it (default)");
  c->add_flag("--buffered", a.buffered, "through the page cache");
  c->add_option("--cache-policy", a.cache_policy,
                "reads: bypass (O_DIRECT, the default), auto (blocks the page cache holds buffered, the rest "
                "O_DIRECT, as sluice read does), use (buffered, as --buffered)")
      ->check(setting_validator("cache_policy"));
  c->add_option("-O", a.gdsio_fd_mode, "gdsio: 0 O_DIRECT, 1 buffered")->check(CLI::Range(0, 1));
  c->add_flag("--drop-caches", a.drop_caches, "drop the page cache before each run (root; else fadvise per file)");
  c->add_option("--warmup", a.warmup, "run this long first and discard it (10, 10s, 500ms)")->transform(duration_transformer());
  c->add_option("--repeat", a.repeat, "rounds (interleaved across --compare types)")->capture_default_str();
  c->add_option("--xfer,-x", a.xfer,
                "transfer type, name or gdsio number: gpu-direct 0, cpu-only 1, cpu-gpu 2, cpu-async-gpu 3, "
                "cpu-cached-gpu 4, gpu-direct-async 5, gpu-batch 6, auto")
      ->capture_default_str();
  c->add_option("--device", a.device, "auto | sim | cuda:N | cuda:0,1 (threads round-robin)");
  c->add_option("-d", a.gpu_index, "gdsio: GPU index (cuda:N); --device wins");
  c->add_option("--memory", a.memory, memory_option_help("GPU types; default device"));
  c->add_option("-m", a.gdsio_memory, "gdsio memory type: 0 cudaMalloc, 1 cuMem, 2 cudaMallocHost, 3 malloc, 4 mmap");
  c->add_option("--numa-node,-n", a.numa_node, "run the threads on this NUMA node's CPUs");
  c->add_flag("--strict", a.strict, "gpu-direct types fail (with the reason) instead of falling back");
  c->add_option("--sample-interval", a.sample_interval, "time between throughput samples of time-bound runs (1s, 200ms)")
      ->capture_default_str()
      ->transform(duration_transformer());
  c->add_option("--submit-batch", a.submit_batch,
                "cpu-only: submit every N prepared I/Os (1: one syscall each, fio's default); "
                "0: refill every free slot, submitting iodepth/16 (at least 1) at a time")
      ->capture_default_str();
  c->add_option("--reap-batch", a.reap_batch,
                "cpu-only: collect at most N completions per wait (1: fio's default); 0: all that are ready")
      ->capture_default_str();
  c->add_flag("--hugepages,!--no-hugepages", a.huge_pages,
              "cpu-only: I/O buffers on transparent huge pages (default) or 4 KiB pages (fio's malloc)");
  c->add_flag("--via-library", a.via_library,
              "cpu-only: through sluice::read/write (as unaligned offsets go) instead of the engine loop");
}

void add_output_options(CLI::App* c, BenchArgs& a) {
  c->add_option("--json", a.json, "write the full report (config, system, results) to FILE");
  c->add_option("--csv", a.csv, "write one row per result to FILE");
  c->add_option("--report", a.report, "also write the results as an HTML page to FILE (as sluice report does)");
  c->add_flag("--warm", a.warm,
              "start each run with the file in the page cache (read through it first; O_DIRECT types then "
              "read with cache_policy auto) instead of dropped from it (the default, as fio's invalidate=1)");
  c->add_option("--compare", a.compare, "run these types interleaved (a,b,c or all) and print medians and ratios");
  c->add_option("--replay", a.replay, "rerun the benchmark a --json report describes");
  c->add_flag("--gdsio-output", a.gdsio_output, "also print gdsio's one-line result per run");
  c->add_flag("--print-plan", a.print_plan, "print the resolved plan as JSON and exit");
}

void add_mpi_options(CLI::App* c, BenchArgs& a) {
  c->add_flag("--rotate", a.rotate,
              "MPI: each rank reads the files of rank (r + ranks on its host) mod N, written by another "
              "rank (on another host where there are several); --file/--dir need {rank}");
  c->add_option("--stonewall", a.stonewall,
                "MPI: every rank stops this long (10, 10s, 2m) after the common start of a phase, or "
                "'first': when the first rank finishes; the report gives the stonewalled and the "
                "completed figures");
}

}  // namespace sluice::cli
