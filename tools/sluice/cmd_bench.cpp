// sluice bench: the gdsio- and fio-class benchmark. Parses two option syntaxes (sluice's long
// options and gdsio's short ones) into one bench::Plan, runs it through the library and prints
// the table, gdsio lines, JSON and CSV. All logic lives in the library (sluice/bench.hpp).
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include <fmt/format.h>

#include "cli_util.hpp"
#include "commands.hpp"
#include "sluice/bench.hpp"
#include "sluice/bench_report.hpp"
#include "sluice/error.hpp"

namespace sluice::cli {
namespace {

struct BenchArgs {
  std::vector<std::string> files;
  std::string dir;
  std::string size;
  std::string block_size = "1M";
  std::string rw = "read";
  int io_type = -1;           // gdsio -I
  unsigned mix = 50;
  unsigned threads = 1;
  unsigned iodepth = 1;
  std::string time;
  std::string offset = "0";
  bool unaligned = false;
  std::uint64_t seed = 1;
  bool verify = false;
  bool direct = false;
  bool buffered = false;
  int gdsio_fd_mode = -1;     // gdsio -O
  bool drop_caches = false;
  double warmup = 0;
  unsigned repeat = 1;
  std::string xfer = "cpu-only";
  std::string device;
  int gpu_index = -1;         // gdsio -d
  std::string memory;
  int gdsio_memory = -1;      // gdsio -m
  int numa_node = -1;
  bool strict = false;
  std::string json;
  std::string csv;
  std::string compare;
  std::string replay;
  bool gdsio_output = false;
  bool print_plan = false;
  double sample_interval = 1.0;
  unsigned submit_batch = 0;
  unsigned reap_batch = 0;
  bool huge_pages = true;
};

double parse_seconds(const std::string& text, const char* option) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    throw UsageError(fmt::format("{}: '{}' is not a duration (try 10, 10s, 2m)", option, text));
  }
  const std::string unit = text.substr(used);
  if (unit == "m" || unit == "min") {
    v *= 60;
  } else if (unit == "h") {
    v *= 3600;
  } else if (!unit.empty() && unit != "s") {
    throw UsageError(fmt::format("{}: '{}' is not a duration (try 10, 10s, 2m)", option, text));
  }
  if (v < 0) throw UsageError(fmt::format("{}: duration cannot be negative", option));
  return v;
}

MemoryKind parse_memory(const std::string& m) {
  if (m == "device" || m == "gpu") return MemoryKind::device;
  if (m == "pinned" || m == "pinned-host" || m == "pinned_host") return MemoryKind::pinned_host;
  if (m == "pageable" || m == "host" || m == "pageable-host" || m == "pageable_host") {
    return MemoryKind::pageable_host;
  }
  throw UsageError(fmt::format("--memory: unknown memory kind '{}' (expected device, pinned or pageable)", m));
}

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
  w.xfer = bench::parse_xfer(a.xfer);
  if (!a.device.empty()) {
    w.device = a.device;
  } else if (a.gpu_index >= 0) {
    w.device = fmt::format("cuda:{}", a.gpu_index);
  }
  if (!a.memory.empty()) {
    w.memory = parse_memory(a.memory);
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
  if (!a.compare.empty()) plan.xfers = bench::parse_xfer_list(a.compare);
  plan.repeat = a.repeat;
  plan.drop_caches = a.drop_caches;
  if (a.repeat == 0) throw UsageError("--repeat must be at least 1");
  bench::validate(w);
  return plan;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UsageError(fmt::format("--replay: cannot read '{}'", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
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

int run_bench(const BenchArgs& a) {
  const bench::Plan plan = a.replay.empty() ? make_plan(a) : bench::plan_from_report(read_text(a.replay));
  if (a.print_plan) {
    std::puts(bench::plan_to_json(plan).c_str());
    return 0;
  }
  const bool tty = ::isatty(STDERR_FILENO) == 1;
  bool progress_shown = false;
  auto progress = [&](const bench::Progress& p) {
    if (!tty || p.elapsed_s < 1.0) return;
    const double pct = p.planned_s > 0 ? 100 * p.elapsed_s / p.planned_s
                       : p.planned_bytes > 0 ? 100.0 * static_cast<double>(p.bytes) / static_cast<double>(p.planned_bytes)
                                             : 0;
    std::fprintf(stderr, "\r\033[K  %.1f s  %s  %.3f GiB/s  %3.0f%%", p.elapsed_s, format_size(p.bytes).c_str(),
                 p.gib_per_s, pct);
    std::fflush(stderr);
    progress_shown = true;
  };
  bool header = true;
  auto on_result = [&](const bench::RunResult& r) {
    if (progress_shown) {
      std::fputs("\r\033[K", stderr);
      progress_shown = false;
    }
    std::fputs(bench::result_table({r}, header).c_str(), stdout);
    header = false;
    if (a.gdsio_output) std::puts(bench::gdsio_line(r).c_str());
    std::fflush(stdout);
  };
  const std::vector<bench::RunResult> runs = bench::run_plan(plan, on_result, progress);
  const auto summaries = bench::summarize(runs);
  const bool several = std::any_of(summaries.begin(), summaries.end(),
                                   [](const bench::Summary& s) { return s.rounds > 1; }) ||
                       summaries.size() > 1;
  if (several) {
    std::printf("\nmedians over %u round(s), ratio = GiB/s / first type's at the same block size:\n",
                std::max(1U, plan.repeat));
    std::fputs(bench::summary_table(summaries).c_str(), stdout);
  }
  if (!a.json.empty()) write_file(a.json, bench::report_json(plan, command_line(), runs), "--json");
  if (!a.csv.empty()) {
    std::string csv = bench::csv_header();
    for (const auto& r : runs) csv += bench::csv_row(r);
    write_file(a.csv, csv, "--csv");
  }
  for (const auto& r : runs) {
    if (!r.error.empty()) {
      std::fprintf(stderr, "sluice bench: error: %s run failed after %s: %s\n",
                   std::string(bench::to_string(r.xfer)).c_str(), format_size(r.bytes).c_str(), r.error.c_str());
      return exit_failure;
    }
  }
  return 0;
}

}  // namespace

Runner add_bench_command(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  auto* c = app.add_subcommand(
      "bench", "Benchmark storage -> host/GPU transfers (gdsio- and fio-class); accepts gdsio's options");
  c->add_option("--file,-f", a->files, "file(s) to use: one shared by the threads, or several (thread t uses file t mod n)")
      ->delimiter(',');
  c->add_option("--dir,-D", a->dir, "directory for one file per thread (sluice-bench.<t>); must exist");
  c->add_option("--size,-s", a->size, "bytes of each file to use (default: the file from --offset); "
                                      "files to read are created with this size when missing")
      ->check(size_validator());
  c->add_option("--block-size,--bs,-i", a->block_size, "I/O size, or a sweep MIN:MAX:xF (4K:1M:x2) or MIN:MAX:STEP")
      ->capture_default_str();
  c->add_option("--rw", a->rw, "read | write | randread | randwrite | rw | randrw")->capture_default_str();
  c->add_option("-I", a->io_type, "gdsio I/O type: 0 read, 1 write, 2 randread, 3 randwrite")->check(CLI::Range(0, 3));
  c->add_option("--mix", a->mix, "rw/randrw: percent of reads")->capture_default_str();
  c->add_option("--threads,-w", a->threads, "threads")->capture_default_str();
  c->add_option("--iodepth,-B", a->iodepth, "transfers in flight per thread (gdsio -B: batch size)")->capture_default_str();
  c->add_option("--time,-T", a->time, "run this long (10, 10s, 2m) instead of covering --size once");
  c->add_option("--offset,-o", a->offset, "first byte of each file")->check(size_validator());
  c->add_flag("--unaligned,-U", a->unaligned, "random offsets at any byte instead of block multiples");
  c->add_option("--seed,-k", a->seed, "seed of the random offsets and of the verification pattern")->capture_default_str();
  c->add_flag("--verify,-V", a->verify, "write a checkable pattern; check it on every read (a write is read back)");
  c->add_flag("--direct", a->direct, "O_DIRECT where the filesystem has it (default)");
  c->add_flag("--buffered", a->buffered, "through the page cache");
  c->add_option("-O", a->gdsio_fd_mode, "gdsio: 0 O_DIRECT, 1 buffered")->check(CLI::Range(0, 1));
  c->add_flag("--drop-caches", a->drop_caches, "drop the page cache before each run (root; else fadvise per file)");
  c->add_option("--warmup", a->warmup, "seconds to run first and discard");
  c->add_option("--repeat", a->repeat, "rounds (interleaved across --compare types)")->capture_default_str();
  c->add_option("--xfer,-x", a->xfer,
                "transfer type, name or gdsio number: gpu-direct 0, cpu-only 1, cpu-gpu 2, cpu-async-gpu 3, "
                "cpu-cached-gpu 4, gpu-direct-async 5, gpu-batch 6, auto")
      ->capture_default_str();
  c->add_option("--device", a->device, "auto | sim | cuda:N | cuda:0,1 (threads round-robin)");
  c->add_option("-d", a->gpu_index, "gdsio: GPU index (cuda:N); --device wins");
  c->add_option("--memory", a->memory, "device | pinned | pageable (GPU types; default device)");
  c->add_option("-m", a->gdsio_memory, "gdsio memory type: 0 cudaMalloc, 1 cuMem, 2 cudaMallocHost, 3 malloc, 4 mmap");
  c->add_option("--numa-node,-n", a->numa_node, "run the threads on this NUMA node's CPUs");
  c->add_flag("--strict", a->strict, "gpu-direct types fail (with the reason) instead of falling back");
  c->add_option("--json", a->json, "write the full report (config, system, results) to FILE");
  c->add_option("--csv", a->csv, "write one row per result to FILE");
  c->add_option("--compare", a->compare, "run these types interleaved (a,b,c or all) and print medians and ratios");
  c->add_option("--replay", a->replay, "rerun the benchmark a --json report describes");
  c->add_flag("--gdsio-output", a->gdsio_output, "also print gdsio's one-line result per run");
  c->add_flag("--print-plan", a->print_plan, "print the resolved plan as JSON and exit");
  c->add_option("--sample-interval", a->sample_interval, "seconds between throughput samples of time-bound runs")
      ->capture_default_str();
  c->add_option("--submit-batch", a->submit_batch,
                "cpu-only: submit every N prepared I/Os (1: one syscall each, fio's default); "
                "0: refill every free slot, then submit once")
      ->capture_default_str();
  c->add_option("--reap-batch", a->reap_batch,
                "cpu-only: collect at most N completions per wait (1: fio's default); 0: all that are ready")
      ->capture_default_str();
  c->add_flag("--hugepages,!--no-hugepages", a->huge_pages,
              "cpu-only: I/O buffers on transparent huge pages (default) or 4 KiB pages (fio's malloc)");
  return [a] { return run_bench(*a); };
}

}  // namespace sluice::cli
