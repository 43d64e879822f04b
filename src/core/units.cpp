#include "sluice/units.hpp"

#include <cctype>
#include <limits>

#include <fmt/format.h>

namespace sluice {

std::optional<std::uint64_t> parse_size(std::string_view text) {
  std::size_t i = 0;
  std::uint64_t value = 0;
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0]))) return std::nullopt;
  constexpr auto max = std::numeric_limits<std::uint64_t>::max();
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    const auto digit = static_cast<std::uint64_t>(text[i] - '0');
    if (value > (max - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
    ++i;
  }
  std::string unit;
  for (; i < text.size(); ++i) unit += static_cast<char>(std::tolower(static_cast<unsigned char>(text[i])));
  unsigned shift = 0;
  if (unit.empty() || unit == "b") {
    shift = 0;
  } else {
    static constexpr std::string_view letters = "kmgtp";
    const auto pos = letters.find(unit[0]);
    const std::string_view rest = std::string_view(unit).substr(1);
    if (pos == std::string_view::npos || !(rest.empty() || rest == "b" || rest == "ib")) {
      return std::nullopt;
    }
    shift = 10 * static_cast<unsigned>(pos + 1);
  }
  if (shift != 0 && value > (max >> shift)) return std::nullopt;
  return value << shift;
}

std::string format_size(std::uint64_t bytes) {
  static constexpr const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return fmt::format("{} B", bytes);
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 5) {
    v /= 1024.0;
    ++u;
  }
  return fmt::format("{:.{}f} {}", v, v < 10 ? 2 : (v < 100 ? 1 : 0), units[u]);
}

}  // namespace sluice
