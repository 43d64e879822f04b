// sluice report: one or more `sluice bench --json` files as one self-contained HTML page
// (charts and tables; docs/report.md). Exit 0 when the page was written, 1 when it could not be
// written, 2 for bad arguments or an input that is not a readable sluice bench result.
#include <cstdio>
#include <memory>

#include "cli_util.hpp"
#include "commands.hpp"
#include "sluice/tools/report.hpp"

namespace sluice::cli {
namespace {

struct ReportArgs {
  std::vector<std::string> files;
  std::vector<std::string> labels;
  std::string out = "report.html";
  std::string title;
  bool tables_only = false;
};

int run_report(const ReportArgs& a) {
  report::Options o;
  if (!a.title.empty()) o.title = a.title;
  o.charts = !a.tables_only;
  report::write_html(a.out, report::read_inputs(a.files, a.labels), o);
  const report::ChartLibrary lib = report::chart_library();
  std::printf("sluice report: wrote %s (%s)\n", a.out.c_str(),
              !o.charts       ? "tables only, as asked"
              : lib.available ? "charts and tables"
                              : ("tables only: " + lib.missing).c_str());
  return 0;
}

}  // namespace

Runner add_report_command(CLI::App& app) {
  auto a = std::make_shared<ReportArgs>();
  auto* c = app.add_subcommand(
      "report",
      "Turn sluice bench --json results into one self-contained HTML page (charts and tables)");
  c->add_option("files", a->files, "sluice bench --json files")
      ->required()
      ->check(CLI::ExistingFile);
  c->add_option("-o,--out", a->out, "the HTML file to write")->capture_default_str();
  c->add_option("-l,--label", a->labels,
                "series name of each file, in order (default: the file name without .json); files "
                "with the same label form one series, e.g. one file per --iodepth")
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  c->add_option("--title", a->title, "page title (default: sluice benchmark report)");
  c->add_flag("--tables-only", a->tables_only, "leave the charts out (a smaller page)");
  return [a] { return run_report(*a); };
}

}  // namespace sluice::cli
