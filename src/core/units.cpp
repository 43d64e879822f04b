#include "sluice/units.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "sluice/error.hpp"

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

std::optional<double> parse_duration(std::string_view text) {
  // A digit or a point first: from_chars would take "-1", "inf" and "nan", which are no
  // durations; a leading space or "+" is refused too.
  if (text.empty() || !(std::isdigit(static_cast<unsigned char>(text[0])) || text[0] == '.')) return std::nullopt;
  double v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || !std::isfinite(v)) return std::nullopt;
  const std::string_view unit(end, static_cast<std::size_t>(text.data() + text.size() - end));
  static constexpr std::pair<std::string_view, double> units[] = {
      {"", 1}, {"s", 1}, {"us", 1e-6}, {"ms", 1e-3}, {"m", 60}, {"min", 60}, {"h", 3600}};
  for (const auto& [name, scale] : units) {
    if (unit == name) return v * scale;
  }
  return std::nullopt;
}

double parse_seconds(std::string_view text, std::string_view option) {
  if (auto v = parse_duration(text)) return *v;
  if (!text.empty() && text[0] == '-') throw_usage_error({.op = option}, "a duration cannot be negative");
  throw_usage_error({.op = option},
                    fmt::format("'{}' is not a duration (try 10, 10s, 500ms, 2m, 1h)", text));
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
  // Three significant digits, decided after rounding: 1048575 bytes is "1.00 MiB", not
  // "1024 KiB", and 10239 bytes is "10.0 KiB", not "10.00 KiB".
  auto decimals = [](double x) { return x < 10 ? 2 : (x < 100 ? 1 : 0); };
  auto rounded = [](double x, int d) {
    const double scale = d == 2 ? 100.0 : (d == 1 ? 10.0 : 1.0);
    return std::round(x * scale) / scale;
  };
  int d = decimals(v);
  if (rounded(v, d) >= 1024.0 && u < 5) {
    v /= 1024.0;
    ++u;
    d = decimals(v);
  }
  d = decimals(rounded(v, d));
  return fmt::format("{:.{}f} {}", v, d, units[u]);
}

}  // namespace sluice
