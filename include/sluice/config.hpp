// Settings of the library, layered: built-in defaults < JSON file named by SLUICE_CONFIG <
// SLUICE_* environment variables < calls through this API. Each value remembers which layer set
// it, so `sluice check` can show where the effective configuration came from.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/export.hpp"
#include "sluice/path.hpp"

namespace sluice {

enum class ConfigSource : std::uint8_t { default_value, file, env, api };

[[nodiscard]] SLUICE_API std::string_view to_string(ConfigSource source) noexcept;

// The typed settings. Each enum has one to_string (the spelling the environment, the JSON file,
// `sluice check` and the reports use) and one parse_* (nullopt for any other text); the edges
// (environment, JSON, CLI flags, Config::set, the cuFile parameter API) parse, the library
// compares enums. `automatic` is the setting "auto".

/// I/O engine: auto (io_uring when this process can set up a ring, else psync), uring, psync.
enum class EngineSetting : std::uint8_t { automatic, uring, psync };
/// Path for device memory: auto, or one path, strictly (no fallback).
enum class PathSetting : std::uint8_t { automatic, host, bounce, posix, direct };
/// Which GPU: auto (first CUDA GPU, else sim), sim, cuda (with an optional ordinal: cuda:N).
enum class DeviceChoice : std::uint8_t { automatic, sim, cuda };
/// Reads and the page cache: auto (what the cache holds through it, the rest O_DIRECT),
/// bypass (O_DIRECT regardless), use (buffered regardless).
enum class CachePolicy : std::uint8_t { automatic, bypass, use };
/// Most verbose level logged; ordered so that `level <= configured` means "shown".
enum class LogLevel : std::uint8_t { error, warn, info, debug };

/// The device setting: a kind, and for cuda the ordinal when one was named ("cuda:N"; none is
/// "cuda", which opens ordinal 0 but keeps its spelling).
struct DeviceSetting {
  DeviceChoice kind = DeviceChoice::automatic;
  std::optional<unsigned> ordinal;  ///< only with DeviceChoice::cuda
  bool operator==(const DeviceSetting&) const = default;
};

[[nodiscard]] SLUICE_API std::string_view to_string(EngineSetting v) noexcept;
[[nodiscard]] SLUICE_API std::string_view to_string(PathSetting v) noexcept;
[[nodiscard]] SLUICE_API std::string_view to_string(DeviceChoice v) noexcept;
[[nodiscard]] SLUICE_API std::string_view to_string(CachePolicy v) noexcept;
[[nodiscard]] SLUICE_API std::string_view to_string(LogLevel v) noexcept;
/// "auto", "sim", "cuda" or "cuda:N".
[[nodiscard]] SLUICE_API std::string to_string(const DeviceSetting& v);

[[nodiscard]] SLUICE_API std::optional<EngineSetting> parse_engine_setting(
    std::string_view s) noexcept;
[[nodiscard]] SLUICE_API std::optional<PathSetting> parse_path_setting(std::string_view s) noexcept;
[[nodiscard]] SLUICE_API std::optional<CachePolicy> parse_cache_policy(std::string_view s) noexcept;
[[nodiscard]] SLUICE_API std::optional<LogLevel> parse_log_level(std::string_view s) noexcept;
/// Ordinals up to 1023.
[[nodiscard]] SLUICE_API std::optional<DeviceSetting> parse_device_setting(
    std::string_view s) noexcept;

/// The path a PathSetting forces; nullopt for automatic.
[[nodiscard]] constexpr std::optional<Path> forced_path(PathSetting v) noexcept {
  switch (v) {
    case PathSetting::automatic: return std::nullopt;
    case PathSetting::host: return Path::host;
    case PathSetting::bounce: return Path::bounce;
    case PathSetting::posix: return Path::posix;
    case PathSetting::direct: return Path::direct;
  }
  return std::nullopt;
}

struct SLUICE_API Config {
  EngineSetting engine = EngineSetting::automatic;  ///< I/O engine
  unsigned threads = 0;               ///< workers per large request; 0 = min(4, cores)
  unsigned queue_depth = 16;          ///< I/Os in flight per worker
  std::uint64_t io_size = 1 << 20;    ///< size of one I/O request (bytes, multiple of 4096)
  unsigned staging_buffers = 64;      ///< buffers in the host staging pool (each io_size)
  bool direct_io = true;              ///< use O_DIRECT where the filesystem supports it
  /// Reads and the page cache: auto (chunks the cache holds are read through it, the rest with
  /// O_DIRECT) | bypass (O_DIRECT regardless) | use (buffered regardless). Writes follow direct_io.
  CachePolicy cache_policy = CachePolicy::automatic;
  LogLevel log_level = LogLevel::warn;
  DeviceSetting device;               ///< auto
  PathSetting path = PathSetting::automatic;
  unsigned bounce_buffers = 16;       ///< pinned staging buffers per device (bounce path)
  std::uint64_t bounce_buffer_size = 4 << 20;  ///< bytes per pinned staging buffer
  double sim_h2d_gbps = 25.0;         ///< sim device copy bandwidth, GB/s (each direction; 0 = unlimited)
  double sim_latency_us = 10.0;       ///< sim device latency per copy, microseconds

  /// Sets one setting by its name ("queue_depth") from text, recording the source: the edge for
  /// tools, tests and the configuration layers. Throws a usage Error (EINVAL) naming the setting
  /// and the value ("config: engine=foo: engine must be one of auto, uring, psync") on an unknown
  /// name or a bad value, and then changes nothing.
  void set(std::string_view name, std::string_view value, ConfigSource source = ConfigSource::api);

  // Typed setters: assign and record the source (the fields may also be assigned directly, which
  // leaves the recorded source as it was).
  void set_engine(EngineSetting v, ConfigSource source = ConfigSource::api);
  void set_path(PathSetting v, ConfigSource source = ConfigSource::api);
  /// Throws a usage Error for an ordinal on a kind other than cuda.
  void set_device(DeviceSetting v, ConfigSource source = ConfigSource::api);
  void set_cache_policy(CachePolicy v, ConfigSource source = ConfigSource::api);
  void set_log_level(LogLevel v, ConfigSource source = ConfigSource::api);
  [[nodiscard]] ConfigSource source(std::string_view name) const;

  struct Entry {
    std::string name;
    std::string env;    ///< the environment variable that sets it
    std::string value;  ///< effective value, as text
    ConfigSource source;
    std::string help;
  };
  /// Every setting with its effective value and origin, in a fixed order.
  [[nodiscard]] std::vector<Entry> entries() const;

  /// threads with 0 resolved to the default.
  [[nodiscard]] unsigned effective_threads() const noexcept;

  /// Defaults, then the SLUICE_CONFIG file, then the environment. Throws on a bad file or value.
  [[nodiscard]] static Config load();

 private:
  std::map<std::string, ConfigSource, std::less<>> sources_;
};

/// The process-wide configuration, loaded with Config::load() on first use.
[[nodiscard]] SLUICE_API std::shared_ptr<const Config> config();
/// Replaces the process-wide configuration (the API layer). Transfers already running keep the
/// configuration they started with.
SLUICE_API void set_config(Config cfg);

}  // namespace sluice
