// The routes bytes can take between a file and memory. Every transfer resolves to exactly one
// and records why (DESIGN.md principle 1: no silent fallback).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace sluice {

enum class Path : std::uint8_t {
  host,    ///< file <-> host memory (O_DIRECT where possible)
  bounce,  ///< file <-> pinned staging <-> device, pipelined
  posix,   ///< pread into pageable memory, then a synchronous copy
  direct,  ///< GPUDirect Storage through cuFile
  /// Loads only: tensors view a private (copy-on-write) mapping of the file the page cache
  /// holds; no bytes move. Never a transfer's path: not counted in stats, not a --path value.
  mapped,
};
/// The transfer paths (host to direct), which stats count; mapped comes after them.
inline constexpr std::size_t path_count = 4;

[[nodiscard]] constexpr std::string_view to_string(Path p) noexcept {
  switch (p) {
    case Path::host: return "host";
    case Path::bounce: return "bounce";
    case Path::posix: return "posix";
    case Path::direct: return "direct";
    case Path::mapped: return "mapped";
  }
  return "?";
}

[[nodiscard]] constexpr std::optional<Path> parse_path(std::string_view s) noexcept {
  for (auto p : {Path::host, Path::bounce, Path::posix, Path::direct}) {
    if (to_string(p) == s) return p;
  }
  return std::nullopt;
}

}  // namespace sluice
