// sluice bench: the gdsio- and fio-class benchmark. Parses two option syntaxes (sluice's long
// options and gdsio's short ones) into one bench::Plan, runs it through the library and prints
// the table, gdsio lines, JSON and CSV. All logic lives in the library (sluice/bench.hpp).
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include <fmt/format.h>

#include "bench_options.hpp"
#include "cli_util.hpp"
#include "commands.hpp"
#include "sluice/bench.hpp"
#include "sluice/bench_report.hpp"
#include "sluice/error.hpp"

namespace sluice::cli {
namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UsageError(fmt::format("--replay: cannot read '{}'", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
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
  add_workload_options(c, *a);
  add_output_options(c, *a);
  return [a] { return run_bench(*a); };
}

}  // namespace sluice::cli
