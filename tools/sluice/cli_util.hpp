// Small helpers shared by the sluice subcommands.
#pragma once

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "sluice/device.hpp"
#include "sluice/host_memory.hpp"
#include "sluice/transfer.hpp"
#include "sluice/units.hpp"

namespace sluice::cli {

/// Exit codes (docs/errors.md#exit-codes): 0 success, 1 the operation failed, 2 bad arguments;
/// 128+N when signal N stopped a command that stops cleanly on signals (bench).
inline constexpr int exit_failure = 1;
inline constexpr int exit_usage = 2;

/// Thrown by commands for a bad argument found after parsing; main prints it and exits 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The exit code of a command that `e` ended: exit_usage for a UsageError or a sluice::Error of
/// the usage domain (errno EINVAL from the caller's input), exit_failure for anything else.
[[nodiscard]] int exit_code(const std::exception& e) noexcept;

/// CLI11 validator for a flag that takes a configuration setting's values ("cache_policy"):
/// the configuration's parser decides, so the flag and the setting accept the same spellings.
CLI::Validator setting_validator(std::string setting);
/// The typed value of `setting` spelled `text`, parsed by the configuration (a usage Error
/// naming the setting otherwise); `field` is the Config member that receives it.
template <typename T>
T setting_value(T Config::*field, const std::string& setting, const std::string& text) {
  Config c;
  c.set(setting, text);
  return c.*field;
}

/// CLI11 validator/transformer for sizes with units ("4K", "1MiB", "2G").
CLI::Validator size_validator();
std::uint64_t to_size(const std::string& text, const char* option);
/// --memory of every command: parse_memory_kind's spellings (device, pinned, pageable, and the
/// aliases gpu and host), or a UsageError listing them.
MemoryKind memory_option(const std::string& text);
/// --memory's help text, with the command's own note (its default).
std::string memory_option_help(std::string_view note);
/// CLI11 transformer for a duration held as seconds (a double option): "500ms", "2m" or a bare
/// number of seconds (parse_duration's spellings) becomes the number of seconds.
CLI::Validator duration_transformer();

/// User + system CPU seconds used by this process so far.
double cpu_seconds();

/// The one-line summary printed after a transfer, and its --json form.
std::string summary_line(std::string_view op, const std::string& file, const TransferResult& r,
                         double cpu);
std::string summary_json(std::string_view op, const std::string& file, const TransferResult& r,
                         double cpu);

/// Where `sluice read/write` put the bytes: host memory, or GPU memory when --device is given
/// or --path names a GPU path (then the configured device, default auto).
struct TransferTarget {
  std::shared_ptr<Device> device;  ///< null: host memory
  TransferOptions options;
  static TransferTarget from_args(const std::string& device, const std::string& path);
};

/// One piece of memory on the target, with a host mirror when the target is a GPU, so the
/// command can exchange bytes with files and pipes. Pieces on a GPU that are downloaded or
/// uploaded one at a time may share one mirror (`share_mirror_of`): each mirror is fresh memory,
/// as large as the piece, that the process faults in.
class PieceBuffer {
 public:
  PieceBuffer(const TransferTarget& target, std::size_t size,
              const PieceBuffer* share_mirror_of = nullptr);
  /// The memory sluice reads into / writes from.
  [[nodiscard]] void* data() const noexcept {
    return target_.empty() ? host_->get() : target_.data();
  }
  /// Host bytes of the first n bytes of data() (copies them back from the GPU if needed).
  const std::byte* download(std::size_t n);
  /// Host memory to fill before upload().
  [[nodiscard]] std::byte* host() const noexcept { return host_->get(); }
  /// Makes data() hold the first n bytes of host() (copies them to the GPU if needed).
  void upload(std::size_t n);

 private:
  std::shared_ptr<HostMapping> host_;  // 2 MiB aligned, huge pages where the kernel allows
  DeviceBuffer target_;                // device memory, or empty for host targets
};

/// Adds --device and --path to a transfer subcommand.
void add_target_options(CLI::App* cmd, std::string& device, std::string& path);

/// Adds --cache-policy (reads and the page cache: auto | bypass | use) to a reading subcommand.
void add_cache_policy_option(CLI::App* cmd, std::string& policy);
/// Makes `policy`, when not empty, the process configuration's cache_policy.
void apply_cache_policy(const std::string& policy);

/// The fd `sluice read --out OUT` writes to: stdout for "-", else OUT created or truncated; an
/// Error when it cannot be created.
int open_output(const std::string& out);

/// Writes all of buf to fd, or throws an Error naming `what`.
void write_all(int fd, const void* buf, std::size_t size, const std::string& what);

/// A one-line progress report on stderr, redrawn at most ten times a second, and erased by
/// finish() if it was ever shown. Disabled, it prints nothing.
class ProgressLine {
 public:
  explicit ProgressLine(bool enabled) : enabled_(enabled) {}
  /// Whether to redraw now: enabled, and 100 ms since the last redraw (or `force`).
  [[nodiscard]] bool due(bool force = false);
  /// Redraws the line as `text`.
  void show(const std::string& text);
  void finish();

 private:
  bool enabled_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point last_{};
};

}  // namespace sluice::cli
