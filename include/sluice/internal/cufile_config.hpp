// Interface between Sluice's own libraries, not for applications (include/sluice/internal/:
// exported by libsluice for libsluice_tools and libsluice_cufile, never installed, changes with
// them). NVIDIA's cuFile configuration as libcufile reads it: the JSON file named by
// CUFILE_ENV_PATH_JSON (else /etc/cufile.json, with // and /* */ comments) and the CUFILE_*
// environment variables, each key with what it does in Sluice. One reader and one key table, so
// that libsluice_cufile (which applies the keys through its cuFile parameter API) and
// `sluice check` (which shows them) cannot disagree. docs/cufile.md has the table as prose.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/config.hpp"
#include "sluice/export.hpp"

namespace sluice::internal {

/// The cuFile parameter call that carries a key (cufile.h's Set/GetParameter* families); `index`
/// in CufileKey and CufileEntry is the enum value within the family.
enum class CufileParam : std::uint8_t {
  none,
  size_t_value,
  bool_value,
  string_value,
  posix_slabs,
  gpu_slabs
};

/// The JSON type a key takes: a non-negative integer, a boolean, a string, an array of
/// non-negative integers (the slab arrays), or anything (keys with no effect in Sluice).
enum class CufileValueType : std::uint8_t { count, boolean, text, counts, any };

/// What a key or variable does in Sluice.
enum class CufileEffect : std::uint8_t {
  sluice_setting,  ///< sets one of Sluice's settings (`setting`), as the cuFile parameter does
  cufile_layer,  ///< changes what libsluice_cufile itself enforces (batch size, pinned cap, stats)
  kept,          ///< kept and reported by cuFile's getters; no effect in Sluice
  no_effect,     ///< documented by NVIDIA, no cuFile parameter holds it; no effect in Sluice
  unknown,       ///< not a key (or variable) NVIDIA documents
  invalid,       ///< wrong type or value: ignored, the value before it stays
  overridden,    ///< a stronger layer sets the same thing (a CUFILE_* or SLUICE_* variable)
};
[[nodiscard]] SLUICE_API std::string_view to_string(CufileEffect e) noexcept;

/// One row of the key table. `name` is the dotted JSON key, or the variable's name; a name ending
/// in '.' covers every key under it ("fs.").
struct CufileKey {
  std::string_view name;
  CufileValueType type;
  CufileEffect effect;       ///< sluice_setting, cufile_layer, kept or no_effect
  CufileParam param;         ///< none for no_effect
  int index;                 ///< the parameter's enum value (0 with none)
  std::string_view setting;  ///< the Sluice settings it changes ("io_size"; comma-separated), or ""
  std::string_view what;     ///< the effect in words, or why it has none
};
/// The file's keys, in the order they are applied (a cache size after the buffer size it divides).
[[nodiscard]] SLUICE_API std::span<const CufileKey> cufile_json_keys() noexcept;
/// The CUFILE_* variables Sluice maps (the others are reported with no effect).
[[nodiscard]] SLUICE_API std::span<const CufileKey> cufile_env_keys() noexcept;

/// One key found in the file, or one CUFILE_* variable found in the environment.
struct CufileEntry {
  std::string name;  ///< "properties.max_direct_io_size_kb" or "CUFILE_LOGGING_LEVEL"
  bool from_env = false;
  std::string value;  ///< as written: JSON text for the file, the variable's text
  CufileEffect effect = CufileEffect::unknown;
  std::string detail;  ///< "io_size = 4096 KiB", why it has no effect, why it is invalid, ...
  /// What libsluice_cufile calls to apply it (param none: nothing). Only set for entries whose
  /// effect is sluice_setting, cufile_layer or kept.
  CufileParam param = CufileParam::none;
  int index = 0;
  std::uint64_t number = 0;                  ///< count keys
  bool flag = false;                         ///< boolean keys
  std::string text;                          ///< text keys
  std::vector<std::uint64_t> sizes, counts;  ///< slab keys: both arrays, paired
};

/// The cuFile configuration this process sees.
struct CufileConfig {
  std::string path;       ///< the file looked at (CUFILE_ENV_PATH_JSON or /etc/cufile.json)
  bool from_env = false;  ///< path came from CUFILE_ENV_PATH_JSON
  bool read = false;      ///< the file was read and parsed; its keys are in `entries`
  bool error = false;     ///< `status` is an error (a named file missing, unreadable, not JSON)
  std::string status;  ///< "read", or why no file was read ("not found (the default)", the error)
  std::vector<CufileEntry>
      entries;  ///< the file's keys (table order, unknown ones last), then variables
};

/// How the reader sees the environment: getenv by default; tests pass their own. `each` visits
/// every variable (name=value) so unknown CUFILE_* ones are reported too.
struct CufileEnvironment {
  std::function<const char*(const char*)> get;
  std::function<void(const std::function<void(std::string_view)>&)> each;
  std::string default_path = "/etc/cufile.json";
};
[[nodiscard]] SLUICE_API CufileEnvironment process_environment();

/// Reads the file and the variables and decides each entry's effect under `sluice`: a setting
/// that SLUICE_CONFIG or a SLUICE_* variable set explicitly wins over both (it names Sluice), a
/// CUFILE_* variable wins over the file's key for the same thing. Never throws for bad input:
/// the problem is in `status` or the entry's detail.
[[nodiscard]] SLUICE_API CufileConfig read_cufile_config(const Config& sluice,
                                                         const CufileEnvironment& env);

}  // namespace sluice::internal
