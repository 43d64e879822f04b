#include <CLI/CLI.hpp>

#include <cstdio>
#include <vector>

#include <fmt/format.h>

#include "cli_util.hpp"
#include "commands.hpp"
#include "sluice/version.hpp"

int main(int argc, char** argv) {
  using namespace sluice::cli;
  CLI::App app{"sluice: move bytes between files and GPU or host memory at the speed of the "
               "hardware, and say which path they took"};
  app.name("sluice");
  app.set_version_flag("--version,-V", fmt::format("sluice {}", sluice::version_string));
  app.require_subcommand(1);
  std::vector<std::pair<CLI::App*, Runner>> commands;
  auto add = [&](Runner (*fn)(CLI::App&)) {
    Runner r = fn(app);
    commands.emplace_back(app.get_subcommands({}).back(), std::move(r));
  };
  add(add_read_command);
  add(add_write_command);
  add(add_bench_command);
  add(add_load_command);
  add(add_ingest_command);
  add(add_check_command);
  add(add_stats_command);
  add(add_doctor_command);
  add(add_report_command);
  add(add_plan_command);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : exit_usage;
  }
  for (auto& [sub, run] : commands) {
    if (!sub->parsed()) continue;
    try {
      return run();
    } catch (const UsageError& e) {
      std::fprintf(stderr, "sluice %s: %s\n", sub->get_name().c_str(), e.what());
      return exit_code(e);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "sluice %s: error: %s\n", sub->get_name().c_str(), e.what());
      return exit_code(e);
    }
  }
  return exit_usage;
}
