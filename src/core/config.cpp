#include "sluice/config.hpp"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sluice/error.hpp"
#include "sluice/units.hpp"

namespace sluice {
namespace {

// One table per enum: its spellings, in the order help and errors list them.
template <typename E>
using Name = std::pair<E, std::string_view>;

constexpr Name<EngineSetting> engine_names[] = {
    {EngineSetting::automatic, "auto"}, {EngineSetting::uring, "uring"}, {EngineSetting::psync, "psync"}};
constexpr Name<PathSetting> path_names[] = {
    {PathSetting::automatic, "auto"}, {PathSetting::direct, "direct"}, {PathSetting::bounce, "bounce"},
    {PathSetting::posix, "posix"},    {PathSetting::host, "host"}};
constexpr Name<DeviceChoice> device_names[] = {
    {DeviceChoice::automatic, "auto"}, {DeviceChoice::sim, "sim"}, {DeviceChoice::cuda, "cuda"}};
constexpr Name<CachePolicy> cache_policy_names[] = {
    {CachePolicy::automatic, "auto"}, {CachePolicy::bypass, "bypass"}, {CachePolicy::use, "use"}};
constexpr Name<LogLevel> log_level_names[] = {
    {LogLevel::error, "error"}, {LogLevel::warn, "warn"}, {LogLevel::info, "info"}, {LogLevel::debug, "debug"}};

template <typename E, std::size_t N>
std::string_view name_of(const Name<E> (&names)[N], E v) noexcept {
  for (const auto& [value, name] : names) {
    if (value == v) return name;
  }
  return "?";
}

template <typename E, std::size_t N>
std::optional<E> value_of(const Name<E> (&names)[N], std::string_view s) noexcept {
  for (const auto& [value, name] : names) {
    if (name == s) return value;
  }
  return std::nullopt;
}

template <typename E, std::size_t N>
std::string one_of(const Name<E> (&names)[N]) {
  std::string out = "one of ";
  for (const auto& [value, name] : names) out += fmt::format("{}{}", out.size() > 7 ? ", " : "", name);
  return out;
}

// A value a setting refuses; Config::set turns it into an Error naming the setting and source.
struct BadValue {
  std::string want;  ///< what the setting accepts ("an integer in [1, 4096]")
};

std::optional<unsigned> to_unsigned(std::string_view v, unsigned lo, unsigned hi) noexcept {
  unsigned out = 0;
  const auto* end = v.data() + v.size();
  auto [ptr, ec] = std::from_chars(v.data(), end, out);
  if (ec != std::errc() || ptr != end || out < lo || out > hi) return std::nullopt;
  return out;
}

unsigned parse_unsigned(std::string_view v, unsigned lo, unsigned hi) {
  if (auto out = to_unsigned(v, lo, hi)) return *out;
  throw BadValue{fmt::format("an integer in [{}, {}]", lo, hi)};
}

bool parse_bool(std::string_view v) {
  if (v == "1" || v == "true" || v == "on" || v == "yes") return true;
  if (v == "0" || v == "false" || v == "off" || v == "no") return false;
  throw BadValue{"true or false"};
}

double parse_double(std::string_view v, double lo, double hi) {
  double out = 0;
  const auto* end = v.data() + v.size();
  auto [ptr, ec] = std::from_chars(v.data(), end, out);
  if (ec != std::errc() || ptr != end || !(out >= lo && out <= hi)) {
    throw BadValue{fmt::format("a number in [{}, {}]", lo, hi)};
  }
  return out;
}

// `range` spells lo and hi as the help does ("4K to 64M").
std::uint64_t parse_size_in(std::string_view v, std::uint64_t lo, std::uint64_t hi, std::string_view range) {
  auto s = parse_size(v);
  if (!s || *s < lo || *s > hi || *s % (4 * KiB) != 0) {
    throw BadValue{fmt::format("a size from {}, multiple of 4K", range)};
  }
  return *s;
}

template <typename E, std::size_t N>
E parse_enum(const Name<E> (&names)[N], std::string_view v) {
  if (auto e = value_of(names, v)) return *e;
  throw BadValue{one_of(names)};
}

DeviceSetting parse_device(std::string_view v) {
  if (auto d = parse_device_setting(v)) return *d;
  throw BadValue{"one of auto, sim, cuda, cuda:N (N from 0 to 1023)"};
}

struct Setting {
  std::string_view name;
  std::string_view env;
  std::string_view help;
  std::function<void(Config&, std::string_view)> parse;
  std::function<std::string(const Config&)> print;
};

const std::vector<Setting>& settings() {
  static const std::vector<Setting> table = {
      {"engine", "SLUICE_ENGINE", "I/O engine: auto (io_uring when the kernel allows), uring, psync",
       [](Config& c, std::string_view v) { c.engine = parse_enum(engine_names, v); },
       [](const Config& c) { return std::string(to_string(c.engine)); }},
      {"threads", "SLUICE_THREADS", "workers sharing one large request (0 = min(4, cores))",
       [](Config& c, std::string_view v) { c.threads = parse_unsigned(v, 0, 256); },
       [](const Config& c) { return fmt::format("{}", c.effective_threads()); }},
      {"queue_depth", "SLUICE_QUEUE_DEPTH", "I/O requests in flight per worker",
       [](Config& c, std::string_view v) { c.queue_depth = parse_unsigned(v, 1, 4096); },
       [](const Config& c) { return fmt::format("{}", c.queue_depth); }},
      {"io_size", "SLUICE_IO_SIZE", "size of one I/O request (4K..64M, multiple of 4K)",
       [](Config& c, std::string_view v) { c.io_size = parse_size_in(v, 4 * KiB, 64 * MiB, "4K to 64M"); },
       [](const Config& c) { return format_size(c.io_size); }},
      {"staging_buffers", "SLUICE_STAGING_BUFFERS", "buffers of io_size in the host staging pool",
       [](Config& c, std::string_view v) { c.staging_buffers = parse_unsigned(v, 1, 65536); },
       [](const Config& c) { return fmt::format("{}", c.staging_buffers); }},
      {"direct_io", "SLUICE_DIRECT_IO", "use O_DIRECT where the filesystem supports it",
       [](Config& c, std::string_view v) { c.direct_io = parse_bool(v); },
       [](const Config& c) { return std::string(c.direct_io ? "true" : "false"); }},
      {"log_level", "SLUICE_LOG", "log level: error, warn, info, debug",
       [](Config& c, std::string_view v) { c.log_level = parse_enum(log_level_names, v); },
       [](const Config& c) { return std::string(to_string(c.log_level)); }},
      {"cache_policy", "SLUICE_CACHE_POLICY",
       "reads: auto (what the page cache holds through it, the rest O_DIRECT), bypass, use",
       [](Config& c, std::string_view v) { c.cache_policy = parse_enum(cache_policy_names, v); },
       [](const Config& c) { return std::string(to_string(c.cache_policy)); }},
      {"device", "SLUICE_DEVICE", "GPU: auto (first CUDA GPU, else sim), sim, cuda, cuda:N",
       [](Config& c, std::string_view v) { c.device = parse_device(v); },
       [](const Config& c) { return to_string(c.device); }},
      {"path", "SLUICE_PATH", "transfer path for GPU memory: auto, direct, bounce, posix, host",
       [](Config& c, std::string_view v) { c.path = parse_enum(path_names, v); },
       [](const Config& c) { return std::string(to_string(c.path)); }},
      {"bounce_buffers", "SLUICE_BOUNCE_BUFFERS", "pinned staging buffers per device for the bounce path",
       [](Config& c, std::string_view v) { c.bounce_buffers = parse_unsigned(v, 2, 4096); },
       [](const Config& c) { return fmt::format("{}", c.bounce_buffers); }},
      {"bounce_buffer_size", "SLUICE_BOUNCE_BUFFER_SIZE", "bytes per pinned staging buffer (64K..256M, multiple of 4K)",
       [](Config& c, std::string_view v) { c.bounce_buffer_size = parse_size_in(v, 64 * KiB, 256 * MiB, "64K to 256M"); },
       [](const Config& c) { return format_size(c.bounce_buffer_size); }},
      {"sim_h2d_gbps", "SLUICE_SIM_H2D_GBPS", "sim device copy bandwidth per direction in GB/s (0 = unlimited)",
       [](Config& c, std::string_view v) { c.sim_h2d_gbps = parse_double(v, 0, 10000); },
       [](const Config& c) { return fmt::format("{}", c.sim_h2d_gbps); }},
      {"sim_latency_us", "SLUICE_SIM_LATENCY_US", "sim device latency per copy in microseconds",
       [](Config& c, std::string_view v) { c.sim_latency_us = parse_double(v, 0, 1e6); },
       [](const Config& c) { return fmt::format("{}", c.sim_latency_us); }},
  };
  return table;
}

const Setting& find_setting(std::string_view name) {
  for (const auto& s : settings()) {
    if (s.name == name) return s;
  }
  throw_usage_error({.op = "config"}, fmt::format("unknown setting '{}'", name));
}

// Strings as they are; anything else as JSON text ("8", "true", "null", "[4]"), which the
// setting's parser accepts or refuses like any other text.
std::string json_scalar_text(const nlohmann::json& v) {
  return v.is_string() ? v.get<std::string>() : v.dump();
}

std::mutex g_mutex;
std::shared_ptr<const Config> g_config;
std::atomic<std::uint64_t> g_generation{0};  // set_config calls so far (under g_mutex)

}  // namespace

std::string_view to_string(ConfigSource source) noexcept {
  switch (source) {
    case ConfigSource::default_value: return "default";
    case ConfigSource::file: return "file";
    case ConfigSource::env: return "env";
    case ConfigSource::api: return "api";
  }
  return "?";
}

std::string_view to_string(EngineSetting v) noexcept { return name_of(engine_names, v); }
std::string_view to_string(PathSetting v) noexcept { return name_of(path_names, v); }
std::string_view to_string(DeviceChoice v) noexcept { return name_of(device_names, v); }
std::string_view to_string(CachePolicy v) noexcept { return name_of(cache_policy_names, v); }
std::string_view to_string(LogLevel v) noexcept { return name_of(log_level_names, v); }

std::string to_string(const DeviceSetting& v) {
  if (v.kind == DeviceChoice::cuda && v.ordinal) return fmt::format("cuda:{}", *v.ordinal);
  return std::string(to_string(v.kind));
}

std::optional<EngineSetting> parse_engine_setting(std::string_view s) noexcept { return value_of(engine_names, s); }
std::optional<PathSetting> parse_path_setting(std::string_view s) noexcept { return value_of(path_names, s); }
std::optional<CachePolicy> parse_cache_policy(std::string_view s) noexcept { return value_of(cache_policy_names, s); }
std::optional<LogLevel> parse_log_level(std::string_view s) noexcept { return value_of(log_level_names, s); }

std::optional<DeviceSetting> parse_device_setting(std::string_view s) noexcept {
  if (auto kind = value_of(device_names, s)) return DeviceSetting{*kind, std::nullopt};
  if (!s.starts_with("cuda:")) return std::nullopt;
  const auto n = to_unsigned(s.substr(5), 0, 1023);
  if (!n) return std::nullopt;
  return DeviceSetting{DeviceChoice::cuda, *n};
}

void Config::set(std::string_view name, std::string_view value, ConfigSource source) {
  const Setting& s = find_setting(name);
  Config next = *this;  // a refused value changes nothing
  try {
    s.parse(next, value);
  } catch (const BadValue& bad) {
    // The environment names its variable; the other layers name the setting (load() adds the
    // file's name).
    const std::string_view key = source == ConfigSource::env ? s.env : s.name;
    throw_usage_error({.op = "config"}, fmt::format("{}={}: {} must be {}", key, value, s.name, bad.want));
  }
  next.sources_[std::string(s.name)] = source;
  *this = std::move(next);
}

void Config::set_engine(EngineSetting v, ConfigSource source) {
  engine = v;
  sources_["engine"] = source;
}

void Config::set_path(PathSetting v, ConfigSource source) {
  path = v;
  sources_["path"] = source;
}

void Config::set_device(DeviceSetting v, ConfigSource source) {
  if (v.ordinal && v.kind != DeviceChoice::cuda) {
    throw_usage_error({.op = "config"}, fmt::format("device={}:{}: device must be one of auto, sim, cuda, cuda:N",
                                                    to_string(v.kind), *v.ordinal));
  }
  device = v;
  sources_["device"] = source;
}

void Config::set_cache_policy(CachePolicy v, ConfigSource source) {
  cache_policy = v;
  sources_["cache_policy"] = source;
}

void Config::set_log_level(LogLevel v, ConfigSource source) {
  log_level = v;
  sources_["log_level"] = source;
}

ConfigSource Config::source(std::string_view name) const {
  (void)find_setting(name);
  auto it = sources_.find(name);
  return it == sources_.end() ? ConfigSource::default_value : it->second;
}

std::vector<Config::Entry> Config::entries() const {
  std::vector<Entry> out;
  for (const auto& s : settings()) {
    out.push_back({std::string(s.name), std::string(s.env), s.print(*this), source(s.name),
                   std::string(s.help)});
  }
  return out;
}

unsigned Config::effective_threads() const noexcept {
  if (threads != 0) return threads;
  // hardware_concurrency() reads /sys/devices/system/cpu/online on every call; transfers ask per call.
  static const unsigned cores = std::thread::hardware_concurrency();
  return std::clamp(cores, 1U, 4U);
}

Config Config::load() {
  Config cfg;
  if (const char* file = std::getenv("SLUICE_CONFIG"); file != nullptr && *file != '\0') {
    std::ifstream in(file);
    if (!in) throw_os_error(errno, {.op = "config", .path = file}, "cannot open SLUICE_CONFIG file");
    nlohmann::json doc;
    try {
      doc = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
      throw Error(ErrorDomain::usage, EINVAL, {.op = "config", .path = file},
                  fmt::format("not valid JSON: {}", e.what()));
    }
    if (!doc.is_object()) {
      throw Error(ErrorDomain::usage, EINVAL, {.op = "config", .path = file},
                  "expected a JSON object of settings");
    }
    for (const auto& [key, value] : doc.items()) {
      try {
        cfg.set(key, json_scalar_text(value), ConfigSource::file);
      } catch (const Error& e) {
        throw Error(ErrorDomain::usage, EINVAL, {.op = "config file", .path = file}, e.detail());
      }
    }
  }
  for (const auto& s : settings()) {
    if (const char* v = std::getenv(std::string(s.env).c_str()); v != nullptr && *v != '\0') {
      cfg.set(s.name, v, ConfigSource::env);  // its error names the variable
    }
  }
  return cfg;
}

// Each thread keeps the configuration it last saw and takes the lock only when set_config has
// changed it since (g_generation): every transfer asks, and a small read from Python is a few
// microseconds, of which the lock was a measurable part.
std::shared_ptr<const Config> config() {
  thread_local std::shared_ptr<const Config> seen;
  thread_local std::uint64_t seen_generation = 0;
  if (seen && seen_generation == g_generation.load(std::memory_order_acquire)) return seen;
  std::lock_guard lock(g_mutex);
  if (!g_config) g_config = std::make_shared<const Config>(Config::load());
  seen = g_config;
  seen_generation = g_generation.load(std::memory_order_relaxed);
  return seen;
}

void set_config(Config cfg) {
  auto next = std::make_shared<const Config>(std::move(cfg));
  std::lock_guard lock(g_mutex);
  g_config = std::move(next);
  g_generation.fetch_add(1, std::memory_order_release);
}

}  // namespace sluice
