// Parsing and printing of byte sizes ("4K", "1MiB", "2G") shared by the library and the CLI.
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

/// "1.5 GiB", "512 B": for messages and tables.
[[nodiscard]] SLUICE_API std::string format_size(std::uint64_t bytes);

[[nodiscard]] constexpr std::uint64_t round_down(std::uint64_t v, std::uint64_t align) {
  return v - v % align;
}
[[nodiscard]] constexpr std::uint64_t round_up(std::uint64_t v, std::uint64_t align) {
  return round_down(v + align - 1, align);
}

}  // namespace sluice
