// Format detection and header extents: what the parsers (and the fuzz targets) share.
#include <cstring>

#include <fmt/format.h>

#include "checked.hpp"
#include "sluice/formats.hpp"

namespace sluice {

std::string_view to_string(TensorFormat f) noexcept {
  return f == TensorFormat::npy ? "npy" : "safetensors";
}

std::string dtype_text(const TensorInfo& t, TensorFormat format) {
  if (t.dtype == DType::raw) return t.raw_dtype;
  return std::string(format == TensorFormat::npy ? numpy_name(t.dtype) : safetensors_name(t.dtype));
}

namespace formats {
namespace detail {

bool valid_utf8(std::string_view s) noexcept {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t n = 0;
    std::uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    }
    if ((c & 0xE0) == 0xC0) { n = 1; cp = c & 0x1F; }
    else if ((c & 0xF0) == 0xE0) { n = 2; cp = c & 0x0F; }
    else if ((c & 0xF8) == 0xF0) { n = 3; cp = c & 0x07; }
    else return false;
    for (std::size_t k = 1; k <= n; ++k) {
      if (i + k >= s.size()) return false;
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    static constexpr std::uint32_t min_for[] = {0, 0x80, 0x800, 0x10000};
    if (cp < min_for[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n + 1;
  }
  return true;
}

std::string quote_for_message(std::string_view s, std::size_t max) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (out.size() >= max) {
      out += "...";
      break;
    }
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f || c >= 0x80) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

}  // namespace detail

namespace {
constexpr unsigned char npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
}

TensorFormat detect_format(std::span<const std::byte> prefix) noexcept {
  if (prefix.size() >= sizeof npy_magic && std::memcmp(prefix.data(), npy_magic, sizeof npy_magic) == 0) {
    return TensorFormat::npy;
  }
  return TensorFormat::safetensors;
}

std::uint64_t header_extent(TensorFormat format, std::span<const std::byte> prefix,
                            std::uint64_t file_size, const std::string& path) {
  using detail::bad_file;
  if (format == TensorFormat::safetensors) {
    if (file_size < 8 || prefix.size() < 8) {
      bad_file("safetensors", path, fmt::format("the file has {} bytes, fewer than the 8-byte header length: "
                                                "not a safetensors file, or truncated", file_size));
    }
    const std::uint64_t n = detail::load_le(prefix.data(), 8);
    if (n > safetensors_max_header) {
      bad_file("safetensors", path, fmt::format("header length {} is larger than the limit of {} bytes: not a "
                                                "safetensors file, or a corrupted one", n, safetensors_max_header));
    }
    if (n < 2) bad_file("safetensors", path, fmt::format("header length {} is too small to hold a JSON object", n));
    if (8 + n > file_size) {
      bad_file("safetensors", path, fmt::format("header length {} runs past the end of the file ({} bytes): truncated",
                                                n, file_size));
    }
    return 8 + n;
  }
  if (file_size < 10 || prefix.size() < 10) {
    bad_file("npy", path, fmt::format("the file has {} bytes, fewer than the 10-byte .npy preamble: truncated", file_size));
  }
  if (std::memcmp(prefix.data(), npy_magic, sizeof npy_magic) != 0) {
    bad_file("npy", path, "the file does not start with the .npy magic \"\\x93NUMPY\"");
  }
  const auto major = static_cast<unsigned>(prefix[6]);
  const auto minor = static_cast<unsigned>(prefix[7]);
  if (major < 1 || major > 3 || minor != 0) {
    bad_file("npy", path, fmt::format("unsupported .npy format version {}.{} (1.0, 2.0 and 3.0 are supported)", major, minor));
  }
  std::uint64_t preamble = 10;
  std::uint64_t len = 0;
  if (major == 1) {
    len = detail::load_le(prefix.data() + 8, 2);
  } else {
    if (file_size < 12 || prefix.size() < 12) {
      bad_file("npy", path, fmt::format("the file has {} bytes, fewer than the 12-byte version {}.0 preamble: truncated",
                                        file_size, major));
    }
    preamble = 12;
    len = detail::load_le(prefix.data() + 8, 4);
  }
  if (len > npy_max_header) {
    bad_file("npy", path, fmt::format("header length {} is larger than the limit of {} bytes", len, npy_max_header));
  }
  if (preamble + len > file_size) {
    bad_file("npy", path, fmt::format("header length {} runs past the end of the file ({} bytes): truncated", len, file_size));
  }
  return preamble + len;
}

}  // namespace formats
}  // namespace sluice
