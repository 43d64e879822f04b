// sluice bench: the gdsio- and fio-class benchmark. Parses two option syntaxes (sluice's long
// options and gdsio's short ones) into one bench::Plan, runs it through the library and prints
// the table, gdsio lines, JSON and CSV. All logic lives in the library (sluice/tools/bench.hpp).
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include <fmt/format.h>

#include "bench_options.hpp"
#include "cli_util.hpp"
#include "commands.hpp"
#include "job.hpp"
#include "sluice/error.hpp"
#include "sluice/tools/bench.hpp"
#include "sluice/tools/bench_cluster.hpp"
#include "sluice/tools/bench_report.hpp"
#include "sluice/tools/cluster.hpp"
#include "sluice/tools/report.hpp"

namespace sluice::cli {
namespace {

// Ctrl-C (SIGINT) or SIGTERM during a benchmark: the run in progress stops as a stonewall stops
// it, no further run starts, and what was measured is printed and written as usual (exit 130, as
// a shell reports an interrupted command). The handler is one-shot: a second signal ends the
// process at once.
std::atomic<int> stop_signal{0};

extern "C" void on_stop_signal(int sig) { stop_signal.store(sig); }

void catch_stop_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sa.sa_flags = SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
}

bench::PlanHooks stop_on_signal_hooks() {
  bench::PlanHooks hooks;
  hooks.run.poll = [](std::uint64_t) { return stop_signal.load() != 0; };
  hooks.after_run = [](bench::RunResult& r) { return r.error.empty() && stop_signal.load() == 0; };
  return hooks;
}

// --report: the page `sluice report` would make of this run's JSON document.
void write_report(const std::string& out, const std::string& doc) {
  if (out.empty()) return;
  report::write_html(out, {{.path = "this run", .label = "this run", .json = doc}});
  std::fprintf(stderr, "sluice bench: wrote the report %s\n", out.c_str());
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UsageError(fmt::format("--replay: cannot read '{}'", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool wants_cluster(const BenchArgs& a, const bench::Plan& plan, const ClusterEnv& env) {
  const auto& w = plan.workload;
  return env.world_size > 1 || a.rotate || !a.stonewall.empty() || has_placeholders(w.dir) ||
         has_placeholders(w.device) ||
         std::any_of(w.files.begin(), w.files.end(), [](const std::string& f) { return has_placeholders(f); });
}

int run_cluster_bench(const BenchArgs& a, const bench::Plan& plan, const ClusterEnv& env) {
  std::unique_ptr<Communicator> comm = job_communicator(env);
  bench::ClusterOptions options;
  options.rotate = a.rotate;
  if (a.stonewall == "first") {
    options.stonewall_first_done = true;
  } else if (!a.stonewall.empty()) {
    options.stonewall_s = parse_seconds(a.stonewall, "--stonewall");
    if (options.stonewall_s <= 0) throw UsageError("--stonewall must be longer than 0, or 'first'");
  }
  const bool root = comm->rank() == 0;
  bool header = true;
  auto on_phase = [&](const bench::ClusterRun& c) {
    if (header) std::fputs(bench::cache_note(plan).c_str(), stdout);
    std::fputs(bench::result_table({c.aggregate}, header).c_str(), stdout);
    header = false;
    std::fputs(bench::rank_table(c).c_str(), stdout);
    if (a.gdsio_output) std::puts(bench::gdsio_line(c.aggregate).c_str());
    std::fflush(stdout);
  };
  std::vector<bench::ClusterRun> runs;
  std::vector<std::string> hosts;
  try {
    runs = bench::run_plan_on_cluster(*comm, env, plan, options, on_phase, {}, &hosts);
  } catch (const std::exception& e) {
    if (comm->size() <= 1) throw;
    end_job(*comm, env, "bench", e);  // the other ranks wait for this one in a collective call
  }
  if (root) {
    const auto summaries = [&] {
      std::vector<bench::RunResult> agg;
      for (const auto& c : runs) agg.push_back(c.aggregate);
      return bench::summarize(agg);
    }();
    if (summaries.size() > 1 || (!summaries.empty() && summaries[0].rounds > 1)) {
      std::printf("\nmedians over %u round(s) of the aggregates:\n", std::max(1U, plan.repeat));
      std::fputs(bench::summary_table(summaries).c_str(), stdout);
    }
    std::vector<std::string> distinct;
    for (const auto& h : hosts) {
      if (std::find(distinct.begin(), distinct.end(), h) == distinct.end()) distinct.push_back(h);
    }
    const bench::ClusterInfo info{.world_size = comm->size(), .hosts = distinct,
                                  .launcher = std::string(to_string(env.launcher)), .rotate = options.rotate,
                                  .stonewall_s = options.stonewall_s,
                                  .stonewall_first_done = options.stonewall_first_done};
    if (!a.json.empty() || !a.report.empty()) {
      const std::string doc = bench::cluster_report_json(plan, command_line(), runs, info);
      if (!a.json.empty()) write_file(a.json, doc, "--json");
      write_report(a.report, doc);
    }
    if (!a.csv.empty()) write_file(a.csv, bench::cluster_csv(runs), "--csv");
  }
  std::string failure;
  if (root) {
    for (const auto& c : runs) {
      if (!c.aggregate.error.empty()) {
        failure = fmt::format("{} run failed: {}", bench::to_string(c.aggregate.xfer), c.aggregate.error);
        break;
      }
    }
  }
  failure = comm->broadcast(failure);
  if (failure.empty()) return 0;
  if (root) std::fprintf(stderr, "sluice bench: error: %s\n", failure.c_str());
  return exit_failure;
}

int run_bench(const BenchArgs& a) {
  const bench::Plan plan = a.replay.empty() ? make_plan(a) : bench::plan_from_report(read_text(a.replay));
  if (a.print_plan) {
    std::puts(bench::plan_to_json(plan).c_str());
    return 0;
  }
  const ClusterEnv env = detect_cluster_env();
  if (wants_cluster(a, plan, env)) return run_cluster_bench(a, plan, env);
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
    if (header) std::fputs(bench::cache_note(plan).c_str(), stdout);
    std::fputs(bench::result_table({r}, header).c_str(), stdout);
    header = false;
    if (a.gdsio_output) std::puts(bench::gdsio_line(r).c_str());
    std::fflush(stdout);
  };
  catch_stop_signals();
  const std::vector<bench::RunResult> runs = bench::run_plan(plan, on_result, progress, stop_on_signal_hooks());
  const auto summaries = bench::summarize(runs);
  const bool several = std::any_of(summaries.begin(), summaries.end(),
                                   [](const bench::Summary& s) { return s.rounds > 1; }) ||
                       summaries.size() > 1;
  if (several) {
    std::printf("\nmedians over %u round(s), ratio = GiB/s / first type's at the same block size:\n",
                std::max(1U, plan.repeat));
    std::fputs(bench::summary_table(summaries).c_str(), stdout);
  }
  if (!a.json.empty() || !a.report.empty()) {
    const std::string doc = bench::report_json(plan, command_line(), runs);
    if (!a.json.empty()) write_file(a.json, doc, "--json");
    write_report(a.report, doc);
  }
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
  if (const int sig = stop_signal.load(); sig != 0) {
    std::fprintf(stderr, "sluice bench: stopped by %s after %zu run(s); the results above are what ran\n",
                 sig == SIGINT ? "SIGINT" : "SIGTERM", runs.size());
    return 128 + sig;
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
  add_mpi_options(c, *a);
  return [a] { return run_bench(*a); };
}

}  // namespace sluice::cli
