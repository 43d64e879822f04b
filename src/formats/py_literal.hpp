// The subset of Python literal syntax an .npy header uses: a dict of strings, booleans, None,
// integers (with Python 2's `L` suffix), tuples and lists, nested at most `max_depth` deep.
// NumPy reads the header with ast.literal_eval; this parser accepts the same spellings for the
// values a header can hold, and nothing that would need evaluating.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sluice::formats::detail {

struct PyValue {
  enum class Kind : std::uint8_t { string, integer, boolean, none, tuple, list, dict };
  Kind kind = Kind::none;
  std::string text;                        ///< string: the decoded characters
  bool negative = false;                   ///< integer: sign
  std::optional<std::uint64_t> magnitude;  ///< integer: |value|, nullopt when above 2^64-1
  bool boolean = false;
  std::vector<PyValue> items;  ///< tuple and list elements; dict values
  std::vector<PyValue> keys;   ///< dict keys, in the order written (keys[i] maps to items[i])

  [[nodiscard]] std::string_view kind_name() const noexcept;
};

/// What was wrong and at which byte of the text.
struct PyLiteralError : std::runtime_error {
  PyLiteralError(const std::string& what, std::size_t pos);
  std::size_t position;
};

inline constexpr int py_literal_max_depth = 16;

/// Parses one literal filling all of `text` (surrounding whitespace allowed). Throws
/// PyLiteralError.
[[nodiscard]] PyValue parse_py_literal(std::string_view text);

}  // namespace sluice::formats::detail
