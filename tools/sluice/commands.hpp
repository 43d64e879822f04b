#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace sluice::cli {

/// Each command registers its subcommand and returns the function that runs it after parsing.
using Runner = std::function<int()>;

Runner add_read_command(CLI::App& app);
Runner add_write_command(CLI::App& app);
Runner add_bench_command(CLI::App& app);
Runner add_load_command(CLI::App& app);
Runner add_ingest_command(CLI::App& app);
Runner add_check_command(CLI::App& app);
Runner add_stats_command(CLI::App& app);
Runner add_doctor_command(CLI::App& app);
Runner add_report_command(CLI::App& app);
Runner add_plan_command(CLI::App& app);

}  // namespace sluice::cli
