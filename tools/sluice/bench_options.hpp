// The options `sluice bench` shares with `sluice doctor` (and any command that runs a bench
// workload): one parser from sluice's long options and gdsio's short ones into a bench::Plan.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "sluice/tools/bench.hpp"

namespace sluice::cli {

/// The parsed options, before they are checked and turned into a Plan.
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
  std::string cache_policy;
  int gdsio_fd_mode = -1;     // gdsio -O
  bool drop_caches = false;
  bool warm = false;          // --warm: each run starts with its data set in the page cache
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
  std::string report;         // --report: an HTML page of the results (sluice report)
  std::string csv;
  std::string compare;
  std::string replay;
  bool gdsio_output = false;
  bool print_plan = false;
  double sample_interval = 1.0;
  unsigned submit_batch = 0;
  unsigned reap_batch = 0;
  bool huge_pages = true;
  bool via_library = false;
  bool rotate = false;        // MPI: read the files another rank wrote
  std::string stonewall;      // MPI: stop every rank this long after the common start
};

/// The workload options: files, sizes, pattern, threads, queue depth, transfer type, device...
void add_workload_options(CLI::App* c, BenchArgs& a);
/// The output and plan options of `sluice bench`: --json, --csv, --compare, --replay, ...
void add_output_options(CLI::App* c, BenchArgs& a);
/// The options of a run across the ranks of a job (sluice bench): --rotate, --stonewall.
void add_mpi_options(CLI::App* c, BenchArgs& a);
/// Checks the options and builds the plan; throws UsageError / a usage Error on bad input.
[[nodiscard]] bench::Plan make_plan(const BenchArgs& a);

/// The command as it was typed (from /proc/self/cmdline, shell-quoted), for reports.
[[nodiscard]] std::string command_line();
/// Writes text to path or throws an Error naming `option`.
void write_file(const std::string& path, const std::string& text, const char* option);

}  // namespace sluice::cli
