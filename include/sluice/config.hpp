// Settings of the library, layered: built-in defaults < JSON file named by SLUICE_CONFIG <
// SLUICE_* environment variables < calls through this API. Each value remembers which layer set
// it, so `sluice check` can show where the effective configuration came from.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sluice {

enum class ConfigSource : std::uint8_t { default_value, file, env, api };

[[nodiscard]] std::string_view to_string(ConfigSource source) noexcept;

struct Config {
  std::string engine = "auto";        ///< I/O engine: auto | uring | psync
  unsigned threads = 0;               ///< workers per large request; 0 = min(4, cores)
  unsigned queue_depth = 16;          ///< I/Os in flight per worker
  std::uint64_t io_size = 1 << 20;    ///< size of one I/O request (bytes, multiple of 4096)
  unsigned staging_buffers = 64;      ///< buffers in the host staging pool (each io_size)
  bool direct_io = true;              ///< use O_DIRECT where the filesystem supports it
  /// Reads and the page cache: auto (chunks the cache holds are read through it, the rest with
  /// O_DIRECT) | bypass (O_DIRECT regardless) | use (buffered regardless). Writes follow direct_io.
  std::string cache_policy = "auto";
  std::string log_level = "warn";     ///< error | warn | info | debug
  std::string device = "auto";        ///< auto | sim | cuda | cuda:N
  std::string path = "auto";          ///< auto | direct | bounce | posix | host
  unsigned bounce_buffers = 16;       ///< pinned staging buffers per device (bounce path)
  std::uint64_t bounce_buffer_size = 4 << 20;  ///< bytes per pinned staging buffer
  double sim_h2d_gbps = 25.0;         ///< sim device copy bandwidth, GB/s (each direction; 0 = unlimited)
  double sim_latency_us = 10.0;       ///< sim device latency per copy, microseconds

  /// Sets one setting by its name ("queue_depth") from text, recording the source.
  /// Throws a usage Error naming the setting on an unknown name or a bad value.
  void set(std::string_view name, std::string_view value, ConfigSource source = ConfigSource::api);
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
[[nodiscard]] std::shared_ptr<const Config> config();
/// Replaces the process-wide configuration (the API layer). Transfers already running keep the
/// configuration they started with.
void set_config(Config cfg);

}  // namespace sluice
