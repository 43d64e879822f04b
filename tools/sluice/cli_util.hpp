// Small helpers shared by the sluice subcommands.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

#include "sluice/transfer.hpp"

namespace sluice::cli {

/// Exit codes: 0 success, 1 the operation failed, 2 bad arguments.
inline constexpr int exit_failure = 1;
inline constexpr int exit_usage = 2;

/// Thrown by commands for a bad argument found after parsing; main prints it and exits 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// CLI11 validator/transformer for sizes with units ("4K", "1MiB", "2G").
CLI::Validator size_validator();
std::uint64_t to_size(const std::string& text, const char* option);

/// User + system CPU seconds used by this process so far.
double cpu_seconds();

/// The one-line summary printed after a transfer, and its --json form.
std::string summary_line(std::string_view op, const std::string& file, const TransferResult& r,
                         double cpu);
std::string summary_json(std::string_view op, const std::string& file, const TransferResult& r,
                         double cpu);

/// Resolves --path for the host-memory commands; only `auto` and `host` exist until the GPU
/// layer lands, anything else is a UsageError naming what is available.
Path host_path_option(const std::string& text);

/// Writes all of buf to fd, or throws an Error naming `what`.
void write_all(int fd, const void* buf, std::size_t size, const std::string& what);

}  // namespace sluice::cli
