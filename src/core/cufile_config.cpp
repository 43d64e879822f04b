// Reads NVIDIA's cuFile configuration the way libcufile does: the JSON file named by
// CUFILE_ENV_PATH_JSON, else /etc/cufile.json (absent is normal), with // and /* */ comments, then
// the CUFILE_* variables, and decides what each key does in Sluice (the table is in
// cufile_config_keys.cpp). Nothing here applies anything: libsluice_cufile applies the result
// through its cuFile parameter API, `sluice check` prints it. A bad file or value is reported in
// the result and never thrown: a cuFile program must start with the defaults whatever the file.
#include "sluice/internal/cufile_config.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <system_error>
#include <fstream>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cufile.h"

extern char** environ;  // NOLINT: POSIX declares it nowhere in a header

namespace sluice::internal {
namespace {

using nlohmann::json;
using E = CufileEffect;

// An entry with the table row it matched (null for unknown keys) while the effects are decided.
struct Found {
  CufileEntry entry;
  const CufileKey* key = nullptr;
};

// Table order is the order of application; entries of no key (unknown ones) last.
void sort_by_table(std::vector<Found>& out, std::span<const CufileKey> table) {
  const auto rank = [table](const Found& f) {
    return f.key == nullptr ? table.size() : static_cast<std::size_t>(f.key - table.data());
  };
  std::stable_sort(out.begin(), out.end(),
                   [&](const Found& a, const Found& b) { return rank(a) < rank(b); });
}

const CufileKey* find_key(std::span<const CufileKey> table, std::string_view name) {
  for (const CufileKey& k : table) {
    const bool section = k.name.ends_with('.') || k.name.ends_with('_');
    if (k.name == name || (section && name.starts_with(k.name))) return &k;
  }
  return nullptr;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// cuFile's log levels onto Sluice's, as cuFileSetParameterString(CUFILE_PARAM_LOGGING_LEVEL) maps
// them.
std::optional<std::string_view> sluice_log_level(std::string_view cufile_level) {
  const std::string l = lower(cufile_level);
  if (l == "notice" || l == "error") return "error";
  if (l == "warn") return "warn";
  if (l == "info") return "info";
  if (l == "debug" || l == "trace") return "debug";
  return std::nullopt;
}

// Stores a JSON value of the row's type into the entry; false (with the detail) when it is not.
bool take_json(const CufileKey& k, const json& v, CufileEntry& e) {
  switch (k.type) {
    case CufileValueType::count:
      if (!v.is_number_unsigned()) return e.detail = "expected a non-negative integer", false;
      e.number = v.get<std::uint64_t>();
      return true;
    case CufileValueType::boolean:
      if (!v.is_boolean()) return e.detail = "expected true or false", false;
      e.flag = v.get<bool>();
      return true;
    case CufileValueType::text:
      if (!v.is_string()) return e.detail = "expected a string", false;
      e.text = v.get<std::string>();
      return true;
    case CufileValueType::counts: {
      if (!v.is_array() || v.empty() || v.size() > 8)
        return e.detail = "expected an array of 1 to 8 non-negative integers", false;
      for (const json& x : v) {
        if (!x.is_number_unsigned())
          return e.detail = "expected an array of 1 to 8 non-negative integers", false;
        e.sizes.push_back(x.get<std::uint64_t>());
      }
      return true;
    }
    case CufileValueType::any:
      return true;
  }
  return false;
}

// The same for a variable's text.
bool take_text(const CufileKey& k, std::string_view v, CufileEntry& e) {
  switch (k.type) {
    case CufileValueType::count: {
      const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), e.number);
      if (ec != std::errc() || end != v.data() + v.size() || v.empty())
        return e.detail = "expected a non-negative integer", false;
      return true;
    }
    case CufileValueType::boolean: {
      const std::string l = lower(v);
      if (l == "true" || l == "1" || l == "yes" || l == "on") return e.flag = true, true;
      if (l == "false" || l == "0" || l == "no" || l == "off") return e.flag = false, true;
      return e.detail = "expected true or false", false;
    }
    case CufileValueType::text:
      e.text = std::string(v);
      return true;
    case CufileValueType::counts:  // no variable takes an array
    case CufileValueType::any:
      return true;
  }
  return false;
}

// "io_size = 4096 KiB": the Sluice setting and the value it gets.
std::string setting_value(const CufileKey& k, const CufileEntry& e) {
  const std::string_view s = k.setting;
  if (k.index == CUFILE_PARAM_PROPERTIES_ALLOW_COMPAT_MODE && k.param == CufileParam::bool_value)
    return e.flag ? "path: compat allowed (not strict direct)" : "path = direct";
  if (k.index == CUFILE_PARAM_FORCE_COMPAT_MODE && k.param == CufileParam::bool_value)
    return e.flag ? "path = bounce" : "path: compat not forced (not bounce)";
  if (s == "engine")
    return e.flag ? "engine = uring" : "engine: io_uring not preferred (unchanged)";
  if (s == "log_level")
    return fmt::format("log_level = {}", sluice_log_level(e.text).value_or("?"));
  if (s == "bounce_buffers")
    return fmt::format("bounce_buffers = {} KiB / bounce_buffer_size", e.number);
  if (k.param == CufileParam::gpu_slabs)
    return "bounce_buffer_size and bounce_buffers from the slabs";
  if (k.name.ends_with("_kb")) return fmt::format("{} = {} KiB", s, e.number);
  return fmt::format("{} = {}", s, e.number);
}

// The entry's detail and what libsluice_cufile calls, for a value of the row's type.
void describe(const CufileKey& k, CufileEntry& e) {
  e.effect = k.effect;
  switch (k.effect) {
    case E::sluice_setting:
      if (k.setting == "log_level" && !sluice_log_level(e.text)) {
        e.effect = E::invalid;
        e.detail = "expected one of NOTICE, ERROR, WARN, INFO, DEBUG, TRACE";
        return;
      }
      e.detail = fmt::format("{} ({})", setting_value(k, e), k.what);
      break;
    case E::cufile_layer:
      e.detail = fmt::format("{} = {}", k.what, e.number);
      break;
    case E::kept:
      e.detail = fmt::format("kept and reported, no effect in Sluice: {}", k.what);
      break;
    default:
      e.detail = fmt::format("no effect in Sluice: {}", k.what);
      return;
  }
  e.param = k.param;
  e.index = k.index;
}

// Every non-object value under `v`, with its dotted name, in the document's (sorted) order.
void leaves(const json& v, const std::string& prefix,
            std::vector<std::pair<std::string, const json*>>& out) {
  for (const auto& [key, value] : v.items()) {
    std::string name = prefix.empty() ? key : prefix + "." + key;
    if (value.is_object()) {
      leaves(value, name, out);
    } else {
      out.emplace_back(std::move(name), &value);
    }
  }
}

std::vector<Found> file_entries(const json& doc) {
  std::vector<std::pair<std::string, const json*>> all;
  leaves(doc, "", all);
  std::vector<Found> out;
  for (const auto& [name, value] : all) {
    Found f;
    f.entry.name = name;
    f.entry.value = value->dump();
    f.key = find_key(cufile_json_keys(), name);
    if (f.key == nullptr) {
      f.entry.detail = "unknown key";
    } else if (!take_json(*f.key, *value, f.entry)) {
      f.entry.effect = E::invalid;
    } else {
      describe(*f.key, f.entry);
    }
    out.push_back(std::move(f));
  }
  sort_by_table(out, cufile_json_keys());
  return out;
}

// The two arrays of a slab configuration travel in one call: the first key present carries
// both (a missing one takes cuFile's default), the other says so.
void pair_slabs(std::vector<Found>& fs, CufileParam param,
                const std::vector<std::uint64_t>& default_sizes,
                const std::vector<std::uint64_t>& default_counts) {
  Found* size = nullptr;
  Found* count = nullptr;
  for (Found& f : fs) {
    if (f.key != nullptr && f.key->param == param && f.entry.effect != E::invalid)
      (f.key->index == 0 ? size : count) = &f;
  }
  if (size == nullptr && count == nullptr) return;
  const std::vector<std::uint64_t> sizes = size != nullptr ? size->entry.sizes : default_sizes;
  const std::vector<std::uint64_t> counts = count != nullptr ? count->entry.sizes : default_counts;
  const bool positive = std::none_of(sizes.begin(), sizes.end(), [](auto v) { return v == 0; }) &&
                        std::none_of(counts.begin(), counts.end(), [](auto v) { return v == 0; });
  for (Found* f : {size, count}) {
    if (f == nullptr) continue;
    f->entry.sizes.clear();
    if (sizes.size() != counts.size() || !positive) {
      f->entry.effect = E::invalid;
      f->entry.param = CufileParam::none;
      f->entry.detail = sizes.size() != counts.size()
                            ? fmt::format("{} sizes but {} counts", sizes.size(), counts.size())
                            : "sizes and counts must be positive";
    }
  }
  if (sizes.size() != counts.size() || !positive) return;
  Found* carrier = size != nullptr ? size : count;
  carrier->entry.sizes = sizes;
  carrier->entry.counts = counts;
  if (size != nullptr && count != nullptr) {
    count->entry.param = CufileParam::none;
    count->entry.detail += fmt::format("; applied together with {}", size->entry.name);
  }
}

std::vector<Found> env_entries(const CufileEnvironment& env) {
  std::vector<Found> out;
  env.each([&](std::string_view kv) {
    const std::size_t eq = kv.find('=');
    if (!kv.starts_with("CUFILE_") || eq == std::string_view::npos || eq + 1 == kv.size()) return;
    Found f;
    f.entry.name = std::string(kv.substr(0, eq));
    if (f.entry.name == "CUFILE_ENV_PATH_JSON") return;  // the file itself
    f.entry.from_env = true;
    f.entry.value = std::string(kv.substr(eq + 1));
    f.key = find_key(cufile_env_keys(), f.entry.name);
    if (f.key == nullptr) {
      f.entry.detail = "unknown variable, no effect in Sluice";
    } else if (!take_text(*f.key, f.entry.value, f.entry)) {
      f.entry.effect = E::invalid;
    } else {
      describe(*f.key, f.entry);
    }
    out.push_back(std::move(f));
  });
  sort_by_table(out, cufile_env_keys());
  return out;
}

std::optional<json> read_document(CufileConfig& c, const CufileEnvironment& env) {
  const char* named = env.get("CUFILE_ENV_PATH_JSON");
  c.from_env = named != nullptr && *named != '\0';
  c.path = c.from_env ? std::string(named) : env.default_path;
  std::ifstream in(c.path);
  if (!in) {
    const int err = errno;
    c.error = c.from_env || err != ENOENT;  // no /etc/cufile.json is normal
    c.status =
        err == ENOENT
            ? std::string(c.error ? "not found" : "not found (none is normal: cuFile's defaults)")
            : "cannot be read: " + std::error_code(err, std::generic_category()).message();
    return std::nullopt;
  }
  try {
    json doc = json::parse(in, nullptr, true, /*ignore_comments=*/true);
    if (doc.is_object()) {
      c.read = true;
      c.status = "read";
      return doc;
    }
    c.status = "not a cuFile configuration: expected a JSON object";
  } catch (const json::exception& e) {
    c.status = fmt::format("not valid JSON: {}", e.what());  // names the line and column
  }
  c.error = true;
  return std::nullopt;
}

bool applies(const Found& f) {
  return f.key != nullptr && f.entry.param != CufileParam::none;
}

void overridden(Found& f, const std::string& by) {
  f.entry.effect = E::overridden;
  f.entry.param = CufileParam::none;
  f.entry.detail = "overridden by " + by;
}

// NVIDIA's precedence: a variable beats the file's key for the same cuFile parameter.
void override_by_env(std::vector<Found>& file, const std::vector<Found>& env) {
  for (Found& f : file) {
    for (const Found& v : env) {
      if (applies(f) && applies(v) && f.key->param == v.key->param && f.key->index == v.key->index)
        overridden(f, v.entry.name + "=" + v.entry.value);
    }
  }
}

// Sluice's own explicit settings (SLUICE_CONFIG, SLUICE_*) beat cuFile's file and variables.
void override_by_sluice(std::vector<Found>& all, const Config& sluice) {
  const std::vector<Config::Entry> settings = sluice.entries();
  for (Found& f : all) {
    if (!applies(f) || f.key->setting.empty()) continue;
    for (const Config::Entry& s : settings) {
      const bool named =
          ("," + std::string(f.key->setting) + ",").find("," + s.name + ",") != std::string::npos;
      if (!named || (s.source != ConfigSource::env && s.source != ConfigSource::file)) continue;
      overridden(f, s.source == ConfigSource::env
                        ? fmt::format("{}={}", s.env, s.value)
                        : fmt::format("{} = {} in SLUICE_CONFIG", s.name, s.value));
      break;
    }
  }
}

}  // namespace

CufileEnvironment process_environment() {
  CufileEnvironment env;
  env.get = [](const char* name) { return static_cast<const char*>(std::getenv(name)); };
  env.each = [](const std::function<void(std::string_view)>& fn) {
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) fn(*e);
  };
  return env;
}

CufileConfig read_cufile_config(const Config& sluice, const CufileEnvironment& env) {
  CufileConfig c;
  std::vector<Found> file;
  if (const std::optional<json> doc = read_document(c, env)) file = file_entries(*doc);
  pair_slabs(file, CufileParam::posix_slabs, {4, 1024, 16384}, {128, 64, 64});
  pair_slabs(file, CufileParam::gpu_slabs, {1024, 8192, 16384, 65536}, {128, 8, 4, 2});
  std::vector<Found> vars = env_entries(env);
  override_by_env(file, vars);
  override_by_sluice(file, sluice);
  override_by_sluice(vars, sluice);
  for (std::vector<Found>* part : {&file, &vars}) {
    for (Found& f : *part) c.entries.push_back(std::move(f.entry));
  }
  return c;
}

}  // namespace sluice::internal
