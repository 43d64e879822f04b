// Helpers shared by the format parsers: the one way they report a bad file, and arithmetic on
// sizes read from a file, which must never wrap.
#pragma once

#include <cerrno>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "sluice/error.hpp"

namespace sluice::formats::detail {

/// Throws the Error for a file that breaks its format: domain data, naming the file; `what`
/// names the field ("header field 'w.shape': ...").
[[noreturn]] inline void bad_file(std::string_view op, const std::string& path, const std::string& what) {
  throw Error(ErrorDomain::data, EINVAL, {.op = op, .path = path}, what);
}

[[nodiscard]] inline std::optional<std::uint64_t> mul(std::uint64_t a, std::uint64_t b) noexcept {
  std::uint64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

[[nodiscard]] inline std::optional<std::uint64_t> add(std::uint64_t a, std::uint64_t b) noexcept {
  std::uint64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

/// Little-endian integer of `n` bytes at `p`.
[[nodiscard]] inline std::uint64_t load_le(const std::byte* p, unsigned n) noexcept {
  std::uint64_t v = 0;
  for (unsigned i = 0; i < n; ++i) v |= static_cast<std::uint64_t>(p[i]) << (8 * i);
  return v;
}

/// Whether `s` is well-formed UTF-8 (no overlong forms, no surrogates, at most U+10FFFF).
[[nodiscard]] bool valid_utf8(std::string_view s) noexcept;

/// `s` shortened for an error message, with control and non-ASCII bytes escaped.
[[nodiscard]] std::string quote_for_message(std::string_view s, std::size_t max = 60);

}  // namespace sluice::formats::detail
