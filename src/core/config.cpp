#include "sluice/config.hpp"

#include <algorithm>
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

[[noreturn]] void bad_value(std::string_view name, std::string_view value, std::string_view want) {
  throw_usage_error({.op = "config"},
                    fmt::format("setting '{}': bad value '{}' (expected {})", name, value, want));
}

unsigned parse_unsigned(std::string_view name, std::string_view v, unsigned lo, unsigned hi) {
  unsigned out = 0;
  const auto* end = v.data() + v.size();
  auto [ptr, ec] = std::from_chars(v.data(), end, out);
  if (ec != std::errc() || ptr != end || out < lo || out > hi) {
    bad_value(name, v, fmt::format("an integer in [{}, {}]", lo, hi));
  }
  return out;
}

bool parse_bool(std::string_view name, std::string_view v) {
  if (v == "1" || v == "true" || v == "on" || v == "yes") return true;
  if (v == "0" || v == "false" || v == "off" || v == "no") return false;
  bad_value(name, v, "true or false");
}

std::string parse_choice(std::string_view name, std::string_view v,
                         std::initializer_list<std::string_view> choices) {
  if (std::find(choices.begin(), choices.end(), v) != choices.end()) return std::string(v);
  std::string want;
  for (auto c : choices) want += (want.empty() ? "" : " | ") + std::string(c);
  bad_value(name, v, want);
}

double parse_double(std::string_view name, std::string_view v, double lo, double hi) {
  double out = 0;
  const auto* end = v.data() + v.size();
  auto [ptr, ec] = std::from_chars(v.data(), end, out);
  if (ec != std::errc() || ptr != end || !(out >= lo && out <= hi)) {
    bad_value(name, v, fmt::format("a number in [{}, {}]", lo, hi));
  }
  return out;
}

std::string parse_device(std::string_view name, std::string_view v) {
  if (v == "auto" || v == "sim" || v == "cuda") return std::string(v);
  if (v.substr(0, 5) == "cuda:") {
    (void)parse_unsigned(name, v.substr(5), 0, 1023);
    return std::string(v);
  }
  bad_value(name, v, "auto | sim | cuda | cuda:N");
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
       [](Config& c, std::string_view v) { c.engine = parse_choice("engine", v, {"auto", "uring", "psync"}); },
       [](const Config& c) { return c.engine; }},
      {"threads", "SLUICE_THREADS", "workers sharing one large request (0 = min(4, cores))",
       [](Config& c, std::string_view v) { c.threads = parse_unsigned("threads", v, 0, 256); },
       [](const Config& c) { return fmt::format("{}", c.effective_threads()); }},
      {"queue_depth", "SLUICE_QUEUE_DEPTH", "I/O requests in flight per worker",
       [](Config& c, std::string_view v) { c.queue_depth = parse_unsigned("queue_depth", v, 1, 4096); },
       [](const Config& c) { return fmt::format("{}", c.queue_depth); }},
      {"io_size", "SLUICE_IO_SIZE", "size of one I/O request (4K..64M, multiple of 4K)",
       [](Config& c, std::string_view v) {
         auto s = parse_size(v);
         if (!s || *s < 4 * KiB || *s > 64 * MiB || *s % (4 * KiB) != 0) {
           bad_value("io_size", v, "a size from 4K to 64M, multiple of 4K");
         }
         c.io_size = *s;
       },
       [](const Config& c) { return format_size(c.io_size); }},
      {"staging_buffers", "SLUICE_STAGING_BUFFERS", "buffers of io_size in the host staging pool",
       [](Config& c, std::string_view v) { c.staging_buffers = parse_unsigned("staging_buffers", v, 1, 65536); },
       [](const Config& c) { return fmt::format("{}", c.staging_buffers); }},
      {"direct_io", "SLUICE_DIRECT_IO", "use O_DIRECT where the filesystem supports it",
       [](Config& c, std::string_view v) { c.direct_io = parse_bool("direct_io", v); },
       [](const Config& c) { return std::string(c.direct_io ? "true" : "false"); }},
      {"log_level", "SLUICE_LOG", "log level: error, warn, info, debug",
       [](Config& c, std::string_view v) { c.log_level = parse_choice("log_level", v, {"error", "warn", "info", "debug"}); },
       [](const Config& c) { return c.log_level; }},
      {"cache_policy", "SLUICE_CACHE_POLICY",
       "reads: auto (what the page cache holds through it, the rest O_DIRECT), bypass, use",
       [](Config& c, std::string_view v) { c.cache_policy = parse_choice("cache_policy", v, {"auto", "bypass", "use"}); },
       [](const Config& c) { return c.cache_policy; }},
      {"device", "SLUICE_DEVICE", "GPU: auto (first CUDA GPU, else sim), sim, cuda, cuda:N",
       [](Config& c, std::string_view v) { c.device = parse_device("device", v); },
       [](const Config& c) { return c.device; }},
      {"path", "SLUICE_PATH", "transfer path for GPU memory: auto, direct, bounce, posix, host",
       [](Config& c, std::string_view v) { c.path = parse_choice("path", v, {"auto", "direct", "bounce", "posix", "host"}); },
       [](const Config& c) { return c.path; }},
      {"bounce_buffers", "SLUICE_BOUNCE_BUFFERS", "pinned staging buffers per device for the bounce path",
       [](Config& c, std::string_view v) { c.bounce_buffers = parse_unsigned("bounce_buffers", v, 2, 4096); },
       [](const Config& c) { return fmt::format("{}", c.bounce_buffers); }},
      {"bounce_buffer_size", "SLUICE_BOUNCE_BUFFER_SIZE", "bytes per pinned staging buffer (64K..256M, multiple of 4K)",
       [](Config& c, std::string_view v) {
         auto s = parse_size(v);
         if (!s || *s < 64 * KiB || *s > 256 * MiB || *s % (4 * KiB) != 0) {
           bad_value("bounce_buffer_size", v, "a size from 64K to 256M, multiple of 4K");
         }
         c.bounce_buffer_size = *s;
       },
       [](const Config& c) { return format_size(c.bounce_buffer_size); }},
      {"sim_h2d_gbps", "SLUICE_SIM_H2D_GBPS", "sim device copy bandwidth per direction in GB/s (0 = unlimited)",
       [](Config& c, std::string_view v) { c.sim_h2d_gbps = parse_double("sim_h2d_gbps", v, 0, 10000); },
       [](const Config& c) { return fmt::format("{}", c.sim_h2d_gbps); }},
      {"sim_latency_us", "SLUICE_SIM_LATENCY_US", "sim device latency per copy in microseconds",
       [](Config& c, std::string_view v) { c.sim_latency_us = parse_double("sim_latency_us", v, 0, 1e6); },
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

std::string json_scalar_text(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number()) return v.dump();
  return {};  // anything else is refused by the setting's parser
}

std::mutex g_mutex;
std::shared_ptr<const Config> g_config;

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

void Config::set(std::string_view name, std::string_view value, ConfigSource source) {
  const Setting& s = find_setting(name);
  s.parse(*this, value);
  sources_[std::string(name)] = source;
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
        throw Error(ErrorDomain::usage, EINVAL, {.op = "config", .path = file}, e.detail());
      }
    }
  }
  for (const auto& s : settings()) {
    if (const char* v = std::getenv(std::string(s.env).c_str()); v != nullptr && *v != '\0') {
      try {
        cfg.set(s.name, v, ConfigSource::env);
      } catch (const Error& e) {
        throw Error(ErrorDomain::usage, EINVAL, {.op = "config"},
                    fmt::format("environment {}: {}", s.env, e.detail()));
      }
    }
  }
  return cfg;
}

std::shared_ptr<const Config> config() {
  std::lock_guard lock(g_mutex);
  if (!g_config) g_config = std::make_shared<const Config>(Config::load());
  return g_config;
}

void set_config(Config cfg) {
  auto next = std::make_shared<const Config>(std::move(cfg));
  std::lock_guard lock(g_mutex);
  g_config = std::move(next);
}

}  // namespace sluice
