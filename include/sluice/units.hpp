// Parsing and printing of byte sizes ("4K", "1MiB", "2G") and parsing of durations ("500ms",
// "10s", "2m") shared by the library and the CLI: one spelling of each everywhere.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "sluice/export.hpp"

namespace sluice {

inline constexpr std::uint64_t KiB = 1024;
inline constexpr std::uint64_t MiB = 1024 * KiB;
inline constexpr std::uint64_t GiB = 1024 * MiB;

/// Parses "4096", "4k", "4K", "4KiB", "1m", "2G", "1T" (binary units; "KB"/"MB" are binary too,
/// as in fio and gdsio). Returns nullopt on anything else, including overflow.
[[nodiscard]] SLUICE_API std::optional<std::uint64_t> parse_size(std::string_view text);

/// Parses a duration into seconds: a non-negative decimal number ("10", "0.5", "1e-3") with an
/// optional unit: us, ms, s, m or min, h; without a unit, seconds. Returns nullopt on anything
/// else (a negative or non-finite number, another unit, spaces).
[[nodiscard]] SLUICE_API std::optional<double> parse_duration(std::string_view text);
/// parse_duration, or a usage Error naming `option` ("--time: '5x' is not a duration ...").
[[nodiscard]] SLUICE_API double parse_seconds(std::string_view text, std::string_view option);

/// "1.5 GiB", "512 B": for messages and tables.
[[nodiscard]] SLUICE_API std::string format_size(std::uint64_t bytes);

[[nodiscard]] constexpr std::uint64_t round_down(std::uint64_t v, std::uint64_t align) {
  return v - v % align;
}
[[nodiscard]] constexpr std::uint64_t round_up(std::uint64_t v, std::uint64_t align) {
  return round_down(v + align - 1, align);
}

}  // namespace sluice
