// sluice doctor: runs a bench workload and its variants within a time budget and names why it
// reaches only part of what this machine and path can do (docs/doctor.md). Exit 0 with a
// diagnosis (findings are results, not failures), 1 when the workload itself cannot run, 2 for
// bad arguments.
#include <unistd.h>

#include <cstdio>
#include <memory>

#include "bench_options.hpp"
#include "cli_util.hpp"
#include "commands.hpp"
#include "sluice/tools/doctor.hpp"

namespace sluice::cli {
namespace {

struct DoctorArgs {
  BenchArgs bench;
  std::string budget = "60s";
  bool json = false;
};

int run_doctor(const DoctorArgs& a) {
  const bench::Plan plan = make_plan(a.bench);
  if (!plan.block_sizes.empty())
    throw UsageError("a block-size sweep is the doctor's job: give one --block-size");
  if (a.bench.repeat != 1) throw UsageError("--repeat does not apply to doctor");
  doctor::Options o;
  o.workload = plan.workload;
  o.budget_s = parse_seconds(a.budget, "--budget");
  if (o.budget_s < 1) throw UsageError("--budget: at least 1s (each probe needs a slice of it)");
  if (::isatty(STDERR_FILENO) == 1) {
    o.progress = [](std::string_view stage, double used) {
      std::fprintf(stderr, "\r\033[K[%3.0f%%] %.*s", used * 100, static_cast<int>(stage.size()),
                   stage.data());
      std::fflush(stderr);
    };
  }
  const doctor::Report r = doctor::run(o);
  if (o.progress) std::fputs("\r\033[K", stderr);
  const std::string out = a.json ? doctor::to_json(r) + "\n" : doctor::to_text(r);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

}  // namespace

Runner add_doctor_command(CLI::App& app) {
  auto a = std::make_shared<DoctorArgs>();
  auto* c = app.add_subcommand(
      "doctor",
      "Run a bench workload and its variants, and name why it is slower than this "
      "machine and path allow (ranked causes with evidence and the change to make)");
  add_workload_options(c, a->bench);
  c->add_option("--budget", a->budget, "time for the whole diagnosis (10, 30s, 2m)")
      ->capture_default_str();
  c->add_flag("--json", a->json,
              "print one JSON object (achieved_gib_s, ceiling_gib_s, findings, probes, facts)");
  return [a] { return run_doctor(*a); };
}

}  // namespace sluice::cli
