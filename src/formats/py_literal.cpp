#include "py_literal.hpp"

#include <cctype>

#include <fmt/format.h>

namespace sluice::formats::detail {
namespace {

class Parser {
 public:
  explicit Parser(std::string_view text) : s_(text) {}

  PyValue parse_all() {
    PyValue v = value(0);
    skip_space();
    if (pos_ != s_.size()) fail("unexpected text after the literal");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { throw PyLiteralError(what, pos_); }

  void skip_space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }

  [[nodiscard]] bool at(char c) const { return pos_ < s_.size() && s_[pos_] == c; }

  bool word(std::string_view w) {
    if (s_.substr(pos_, w.size()) != w) return false;
    const std::size_t after = pos_ + w.size();
    if (after < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[after])) != 0 || s_[after] == '_')) return false;
    pos_ = after;
    return true;
  }

  PyValue value(int depth) {
    if (depth > py_literal_max_depth) fail(fmt::format("nested deeper than {} levels", py_literal_max_depth));
    skip_space();
    if (pos_ >= s_.size()) fail("unexpected end of text, expected a value");
    const char c = s_[pos_];
    if (c == '\'' || c == '"') return string();
    if ((c == 'u' || c == 'U') && pos_ + 1 < s_.size() && (s_[pos_ + 1] == '\'' || s_[pos_ + 1] == '"')) {
      ++pos_;  // Python 2 unicode prefix
      return string();
    }
    if (c == '-' || c == '+' || (c >= '0' && c <= '9')) return integer();
    if (c == '(') return sequence(depth, ')', PyValue::Kind::tuple);
    if (c == '[') return sequence(depth, ']', PyValue::Kind::list);
    if (c == '{') return dict(depth);
    PyValue v;
    if (word("True") || word("False")) {
      v.kind = PyValue::Kind::boolean;
      v.boolean = c == 'T';
      return v;
    }
    if (word("None")) return v;
    fail(fmt::format("unexpected character '{}'", c >= 0x20 && c < 0x7f ? std::string(1, c) : fmt::format("\\x{:02x}", static_cast<unsigned char>(c))));
  }

  PyValue string() {
    const char quote = s_[pos_++];
    PyValue v;
    v.kind = PyValue::Kind::string;
    while (true) {
      if (pos_ >= s_.size() || s_[pos_] == '\n') fail("unterminated string");
      const char c = s_[pos_++];
      if (c == quote) break;
      if (c != '\\') {
        v.text.push_back(c);
        continue;
      }
      if (pos_ >= s_.size()) fail("unterminated string");
      const char e = s_[pos_++];
      switch (e) {
        case 'n': v.text.push_back('\n'); break;
        case 't': v.text.push_back('\t'); break;
        case 'r': v.text.push_back('\r'); break;
        case '0': v.text.push_back('\0'); break;
        case '\\': case '\'': case '"': v.text.push_back(e); break;
        case 'x': {
          if (pos_ + 2 > s_.size()) fail("bad \\x escape");
          unsigned x = 0;
          for (int i = 0; i < 2; ++i) {
            const char h = s_[pos_++];
            x <<= 4;
            if (h >= '0' && h <= '9') x |= static_cast<unsigned>(h - '0');
            else if (h >= 'a' && h <= 'f') x |= static_cast<unsigned>(h - 'a' + 10);
            else if (h >= 'A' && h <= 'F') x |= static_cast<unsigned>(h - 'A' + 10);
            else fail("bad \\x escape");
          }
          v.text.push_back(static_cast<char>(x));
          break;
        }
        default: v.text.push_back('\\'); v.text.push_back(e); break;  // kept, as Python keeps unknown escapes
      }
    }
    return v;
  }

  PyValue integer() {
    PyValue v;
    v.kind = PyValue::Kind::integer;
    if (s_[pos_] == '-' || s_[pos_] == '+') v.negative = s_[pos_++] == '-';
    if (!at('0') && !(pos_ < s_.size() && s_[pos_] >= '1' && s_[pos_] <= '9')) fail("expected digits");
    std::uint64_t m = 0;
    bool overflow = false;
    const std::size_t start = pos_;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      const auto d = static_cast<std::uint64_t>(s_[pos_] - '0');
      if (__builtin_mul_overflow(m, 10, &m) || __builtin_add_overflow(m, d, &m)) overflow = true;
      ++pos_;
    }
    if (s_[start] == '0' && pos_ - start > 1) fail("integers may not have leading zeros");
    if (at('L') || at('l')) ++pos_;  // Python 2 long suffix, as old NumPy wrote shapes
    if (pos_ < s_.size() && (s_[pos_] == '.' || s_[pos_] == 'e' || s_[pos_] == 'E' || s_[pos_] == 'j' ||
                             s_[pos_] == 'x' || s_[pos_] == '_')) {
      fail("only plain decimal integers are allowed");
    }
    if (!overflow) v.magnitude = m;
    return v;
  }

  PyValue sequence(int depth, char close, PyValue::Kind kind) {
    ++pos_;
    PyValue v;
    v.kind = kind;
    bool comma = false;
    while (true) {
      skip_space();
      if (at(close)) {
        ++pos_;
        break;
      }
      if (!v.items.empty() && !comma) fail(fmt::format("expected ',' or '{}'", close));
      v.items.push_back(value(depth + 1));
      skip_space();
      comma = at(',');
      if (comma) ++pos_;
    }
    // "(5)" is the integer 5 in Python, not a tuple.
    if (kind == PyValue::Kind::tuple && v.items.size() == 1 && !comma) {
      PyValue inner = std::move(v.items[0]);
      return inner;
    }
    return v;
  }

  PyValue dict(int depth) {
    ++pos_;
    PyValue v;
    v.kind = PyValue::Kind::dict;
    bool comma = false;
    while (true) {
      skip_space();
      if (at('}')) {
        ++pos_;
        break;
      }
      if (!v.keys.empty() && !comma) fail("expected ',' or '}'");
      PyValue key = value(depth + 1);
      skip_space();
      if (!at(':')) fail("expected ':' after a dict key");
      ++pos_;
      PyValue val = value(depth + 1);
      v.keys.push_back(std::move(key));
      v.items.push_back(std::move(val));
      skip_space();
      comma = at(',');
      if (comma) ++pos_;
    }
    return v;
  }

  std::string_view s_;
  std::size_t pos_ = 0;
};

}  // namespace

std::string_view PyValue::kind_name() const noexcept {
  switch (kind) {
    case Kind::string: return "a string";
    case Kind::integer: return "an integer";
    case Kind::boolean: return "a boolean";
    case Kind::none: return "None";
    case Kind::tuple: return "a tuple";
    case Kind::list: return "a list";
    case Kind::dict: return "a dict";
  }
  return "?";
}

PyLiteralError::PyLiteralError(const std::string& what, std::size_t pos)
    : std::runtime_error(fmt::format("{} at byte {}", what, pos)), position(pos) {}

PyValue parse_py_literal(std::string_view text) { return Parser(text).parse_all(); }

}  // namespace sluice::formats::detail
