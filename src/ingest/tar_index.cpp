// The member table of a tar archive, as WebDataset shards are written: POSIX ustar (name with
// its 155-byte prefix), GNU (type 'L' long names, base-256 sizes) and pax (type 'x' records
// "LEN key=value\n" whose path and size replace the next header's; Python's tarfile writes these
// by default for long names). Headers are 512-byte blocks, each member's contents follow its
// header padded to a block, and the archive ends at a zero block (or at the end of the file
// after a member's contents).
//
// Nothing is trusted: every header's checksum is verified (unsigned or signed byte sum, as old
// writers differ), every number field parsed strictly, every member's contents must lie inside
// the file, and pax and long-name blocks are bounded by tar_max_meta_bytes before they are read.
#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "../formats/checked.hpp"
#include "dataset_parts.hpp"

namespace sluice::ingest {
namespace {

using formats::detail::bad_file;
using formats::detail::quote_for_message;

constexpr std::string_view tar_op = "tar";
constexpr std::uint64_t block = 512;

// Field offsets and widths of a ustar header.
constexpr std::size_t name_at = 0, name_len = 100;
constexpr std::size_t size_at = 124, size_len = 12;
constexpr std::size_t chksum_at = 148, chksum_len = 8;
constexpr std::size_t type_at = 156;
constexpr std::size_t magic_at = 257;
constexpr std::size_t prefix_at = 345, prefix_len = 155;

std::string c_string(const std::byte* p, std::size_t max) {
  const auto* c = reinterpret_cast<const char*>(p);
  return {c, static_cast<std::size_t>(std::find(c, c + max, '\0') - c)};
}

// An octal field: optional leading spaces, digits, then NULs or spaces to its end; or GNU's
// base-256 form (first byte 0x80, the rest a big-endian number).
std::optional<std::uint64_t> number_field(const std::byte* p, std::size_t len) {
  if ((static_cast<unsigned>(p[0]) & 0x80U) != 0) {
    if (static_cast<unsigned>(p[0]) != 0x80U) return std::nullopt;  // negative or too large
    std::uint64_t v = 0;
    for (std::size_t i = 1; i < len; ++i) {
      if (v >> 56 != 0) return std::nullopt;
      v = (v << 8) | static_cast<std::uint64_t>(p[i]);
    }
    return v;
  }
  std::size_t i = 0;
  while (i < len && static_cast<char>(p[i]) == ' ') ++i;
  std::uint64_t v = 0;
  std::size_t digits = 0;
  for (; i < len; ++i, ++digits) {
    const auto c = static_cast<char>(p[i]);
    if (c < '0' || c > '7') break;
    if (v >> 61 != 0) return std::nullopt;
    v = v * 8 + static_cast<std::uint64_t>(c - '0');
  }
  for (; i < len; ++i) {
    const auto c = static_cast<char>(p[i]);
    if (c != '\0' && c != ' ') return std::nullopt;
  }
  if (digits == 0) return std::nullopt;
  return v;
}

void check_checksum(const std::byte* h, std::uint64_t at, const std::string& path) {
  const auto stored = number_field(h + chksum_at, chksum_len);
  if (!stored) {
    bad_file(tar_op, path, fmt::format("header at byte {}: field 'chksum' is not an octal number: corrupt header", at));
  }
  std::uint64_t sum_unsigned = 0;
  std::int64_t sum_signed = 0;
  for (std::size_t i = 0; i < block; ++i) {
    const bool in_field = i >= chksum_at && i < chksum_at + chksum_len;
    const auto b = in_field ? std::uint8_t{' '} : static_cast<std::uint8_t>(h[i]);
    sum_unsigned += b;
    sum_signed += static_cast<std::int8_t>(b);
  }
  if (*stored != sum_unsigned && static_cast<std::int64_t>(*stored) != sum_signed) {
    bad_file(tar_op, path, fmt::format("header at byte {}: field 'chksum' is {} but the header's bytes sum to {}: "
                                   "corrupt header", at, *stored, sum_unsigned));
  }
}

// What pax 'x' and GNU 'L' blocks say about the next member.
struct Pending {
  std::optional<std::string> pax_path;
  std::optional<std::uint64_t> pax_size;
  std::optional<std::string> long_name;
};

void parse_pax(std::string_view data, std::uint64_t at, Pending& next, const std::string& path) {
  auto refuse = [&](std::string_view why) {
    bad_file(tar_op, path, fmt::format("pax header at byte {}: {}", at, why));
  };
  std::size_t pos = 0;
  while (pos < data.size()) {
    if (data.substr(pos).find_first_not_of('\0') == std::string_view::npos) break;  // NUL padding
    std::uint64_t len = 0;
    std::size_t i = pos;
    for (; i < data.size() && data[i] >= '0' && data[i] <= '9' && i - pos < 10; ++i) {
      len = len * 10 + static_cast<std::uint64_t>(data[i] - '0');
    }
    if (i == pos || i >= data.size() || data[i] != ' ') refuse(fmt::format("record at {} has no length", pos));
    if (len > data.size() - pos || len < i - pos + 3) {
      refuse(fmt::format("record at {} has the length {}, outside its {} bytes", pos, len, data.size() - pos));
    }
    const std::string_view record = data.substr(i + 1, pos + len - (i + 1));
    if (record.back() != '\n') refuse(fmt::format("record at {} does not end in a newline", pos));
    const auto eq = record.find('=');
    if (eq == std::string_view::npos) refuse(fmt::format("record at {} has no '='", pos));
    const std::string_view key = record.substr(0, eq);
    const std::string_view value = record.substr(eq + 1, record.size() - eq - 2);
    if (key == "path") next.pax_path = std::string(value);
    if (key == "size") {
      const bool digits = !value.empty() && value.size() <= 19 &&
                          value.find_first_not_of("0123456789") == std::string_view::npos;
      if (!digits) refuse(fmt::format("record 'size' is '{}', not a decimal number", quote_for_message(value)));
      std::uint64_t v = 0;
      for (const char c : value) v = v * 10 + static_cast<std::uint64_t>(c - '0');
      next.pax_size = v;
    }
    if (key.starts_with("GNU.sparse")) refuse("a sparse member (GNU.sparse records) is not supported");
    pos += len;
  }
}

// One archive walk: the state between headers.
class Scanner {
 public:
  Scanner(std::uint64_t file_size, const TarBytesAt& bytes_at, const std::string& path)
      : size_(file_size), bytes_at_(bytes_at), path_(path) {}

  std::vector<TarMember> run() {
    if (size_ == 0) bad_file(tar_op, path_, "the file is empty: not a tar archive");
    std::uint64_t at = 0;
    while (at < size_) {
      if (size_ - at < block) {
        bad_file(tar_op, path_, fmt::format("header at byte {}: the file ends {} bytes into it: truncated", at, size_ - at));
      }
      const auto h = bytes_at_(at, block);
      if (h.size() < block) bad_file(tar_op, path_, fmt::format("header at byte {}: the file shrank while read", at));
      if (std::all_of(h.begin(), h.end(), [](std::byte b) { return b == std::byte{0}; })) break;  // end
      at = member(h.data(), at);
    }
    return std::move(members_);
  }

 private:
  // Handles the header at `at`; returns where the next one starts.
  std::uint64_t member(const std::byte* h, std::uint64_t at) {
    check_checksum(h, at, path_);
    const auto type = static_cast<char>(h[type_at]);
    std::string name = header_name(h);
    const auto field_size = number_field(h + size_at, size_len);
    if (!field_size) {
      bad_file(tar_op, path_, fmt::format("header at byte {} (member '{}'): field 'size' is not a number: corrupt header",
                                      at, quote_for_message(name)));
    }
    const bool regular = type == '0' || type == '\0' || type == '7';
    const std::uint64_t size = regular && next_.pax_size ? *next_.pax_size : *field_size;
    const std::uint64_t data = at + block;
    if (size > size_ - data) {
      bad_file(tar_op, path_, fmt::format("header at byte {} (member '{}'): field 'size' {} runs past the end of the "
                                      "file ({} bytes): truncated", at, quote_for_message(name), size, size_));
    }
    switch (type) {
      case 'x': parse_pax(meta(data, size, at, "pax"), at, next_, path_); break;
      case 'L': next_.long_name = c_string_of(meta(data, size, at, "GNU long name")); break;
      case 'g': case 'K': break;  // global pax records, long link names: nothing of ours
      case '0': case '\0': case '7': add_file(std::move(name), data, size, at); break;
      case '1': case '2': case '3': case '4': case '5': case '6': next_ = {}; break;  // no contents
      default:
        bad_file(tar_op, path_, fmt::format("header at byte {} (member '{}'): field 'typeflag' '{}' is not supported "
                                        "(sparse or vendor-specific member)", at, quote_for_message(name),
                                        quote_for_message(std::string_view(&type, 1))));
    }
    // Contents padded to a block; an archive may end right after the last member's contents.
    const std::uint64_t padded = size + (block - size % block) % block;
    return padded > size_ - data ? size_ : data + padded;
  }

  std::string header_name(const std::byte* h) const {
    std::string name = c_string(h + name_at, name_len);
    // ustar ("ustar\0" + "00") splits long names into prefix "/" name; GNU ("ustar  \0") uses
    // those bytes for other fields.
    const bool posix = std::equal(h + magic_at, h + magic_at + 6, reinterpret_cast<const std::byte*>("ustar\0"));
    if (posix) {
      const std::string prefix = c_string(h + prefix_at, prefix_len);
      if (!prefix.empty()) name = prefix + "/" + name;
    }
    return name;
  }

  std::string_view meta(std::uint64_t data, std::uint64_t size, std::uint64_t at, std::string_view what) {
    if (size > tar_max_meta_bytes) {
      bad_file(tar_op, path_, fmt::format("header at byte {}: field 'size' {} of a {} block is larger than {} bytes",
                                      at, size, what, tar_max_meta_bytes));
    }
    const auto bytes = bytes_at_(data, static_cast<std::size_t>(size));
    if (bytes.size() < size) bad_file(tar_op, path_, fmt::format("header at byte {}: the file shrank while read", at));
    meta_.assign(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    return meta_;
  }

  static std::string c_string_of(std::string_view s) { return std::string(s.substr(0, s.find('\0'))); }

  void add_file(std::string name, std::uint64_t data, std::uint64_t size, std::uint64_t at) {
    if (next_.pax_path) {
      name = std::move(*next_.pax_path);
    } else if (next_.long_name) {
      name = std::move(*next_.long_name);
    }
    next_ = {};
    if (name.empty()) bad_file(tar_op, path_, fmt::format("header at byte {}: field 'name' is empty", at));
    if (name.back() == '/') return;  // an old-style directory entry
    members_.push_back({std::move(name), data, size});
  }

  std::uint64_t size_;
  const TarBytesAt& bytes_at_;
  const std::string& path_;
  Pending next_;
  std::string meta_;
  std::vector<TarMember> members_;
};

}  // namespace

std::vector<TarMember> scan_tar(std::uint64_t file_size, const TarBytesAt& bytes_at, const std::string& path) {
  return Scanner(file_size, bytes_at, path).run();
}

KeyField split_member_name(std::string_view name) noexcept {
  const auto slash = name.rfind('/');
  const std::size_t last = slash == std::string_view::npos ? 0 : slash + 1;
  const auto dot = name.find('.', last);
  if (dot == std::string_view::npos) return {name, {}};
  return {name.substr(0, dot), name.substr(dot + 1)};
}

}  // namespace sluice::ingest
