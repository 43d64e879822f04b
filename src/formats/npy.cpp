// NumPy .npy: "\x93NUMPY", a version byte pair (1.0, 2.0 or 3.0), a little-endian header length
// (u16 for 1.0, u32 for 2.0/3.0), a Python dict literal with exactly the keys descr,
// fortran_order and shape (latin-1 for 1.0/2.0, UTF-8 for 3.0), then the array's bytes to the
// end of the file. Object arrays (descr 'O') hold pickles and are refused, as are structured
// dtypes (a list descr); every other fixed-size dtype loads as raw bytes with its descr kept.
#include <string>

#include <fmt/format.h>

#include "checked.hpp"
#include "py_literal.hpp"
#include "sluice/formats.hpp"

namespace sluice::formats {
namespace {

using detail::bad_file;
using detail::PyValue;
using detail::quote_for_message;

constexpr std::string_view npy_op = "npy";

[[noreturn]] void refuse_descr(const std::string& descr, const std::string& path, const std::string& why) {
  bad_file(npy_op, path, fmt::format("header field 'descr': '{}' {}", quote_for_message(descr), why));
}

// Bytes per element of a NumPy type string ("<f4", "|b1", ">i8", "<U5", "<M8[ns]"), or throws.
std::uint64_t itemsize_of(const std::string& descr, const std::string& path) {
  auto refuse = [&](const std::string& why) { refuse_descr(descr, path, why); };
  std::string_view d = descr;
  if (!d.empty() && (d[0] == '<' || d[0] == '>' || d[0] == '|' || d[0] == '=')) d.remove_prefix(1);
  if (d.empty()) refuse("is not a NumPy type string like '<f4'");
  const char kind = d[0];
  d.remove_prefix(1);
  if (kind == 'O') refuse("is an object array: its bytes are Python pickles, which are never loaded");
  std::string_view unit;
  if (const auto b = d.find('['); b != std::string_view::npos) {
    if (d.back() != ']' || (kind != 'M' && kind != 'm')) refuse("is not a NumPy type string like '<f4'");
    unit = d.substr(b);
    d = d.substr(0, b);
  }
  if (d.empty() || d.size() > 12) refuse("has no item size (expected a type string like '<f4')");
  std::uint64_t size = 0;
  for (const char c : d) {
    if (c < '0' || c > '9') refuse("is not a NumPy type string like '<f4'");
    size = size * 10 + static_cast<std::uint64_t>(c - '0');
  }
  auto one_of = [&](std::initializer_list<std::uint64_t> ok) {
    for (auto s : ok) {
      if (s == size) return;
    }
    refuse(fmt::format("has an item size of {} bytes, which that kind does not have", size));
  };
  switch (kind) {
    case 'b': one_of({1}); return size;
    case 'i': case 'u': one_of({1, 2, 4, 8}); return size;
    case 'f': one_of({2, 4, 8, 12, 16}); return size;
    case 'c': one_of({8, 16, 24, 32}); return size;
    case 'M': case 'm': one_of({8}); return size;
    case 'S': case 'a': case 'V': return size;
    case 'U': {
      auto bytes = detail::mul(size, 4);  // UCS-4 characters
      if (!bytes) refuse("has an item size that overflows");
      return *bytes;
    }
    default: break;
  }
  refuse_descr(descr, path, fmt::format("has the unknown kind '{}'", kind));
}

// The header's dict literal: exactly the keys descr, fortran_order and shape.
struct HeaderFields {
  const PyValue* descr = nullptr;
  const PyValue* fortran = nullptr;
  const PyValue* shape = nullptr;
};

PyValue parse_header_dict(std::string_view text, unsigned major, const std::string& path) {
  if (major == 3 && !detail::valid_utf8(text)) bad_file(npy_op, path, "the version 3.0 header is not valid UTF-8");
  PyValue dict;
  try {
    dict = detail::parse_py_literal(text);
  } catch (const detail::PyLiteralError& e) {
    bad_file(npy_op, path, fmt::format("the header is not a Python dict literal: {}", e.what()));
  }
  if (dict.kind != PyValue::Kind::dict) {
    bad_file(npy_op, path, fmt::format("the header is {}, not a dict", dict.kind_name()));
  }
  return dict;
}

HeaderFields header_fields(const PyValue& dict, const std::string& path) {
  HeaderFields f;
  for (std::size_t i = 0; i < dict.keys.size(); ++i) {
    const PyValue& key = dict.keys[i];
    const PyValue& value = dict.items[i];
    if (key.kind != PyValue::Kind::string) bad_file(npy_op, path, fmt::format("header has a key that is {}", key.kind_name()));
    const PyValue** slot = key.text == "descr" ? &f.descr : key.text == "fortran_order" ? &f.fortran
                           : key.text == "shape" ? &f.shape : nullptr;
    if (slot == nullptr) {
      bad_file(npy_op, path, fmt::format("header has the unexpected key '{}' (expected descr, fortran_order, shape)",
                                     quote_for_message(key.text)));
    }
    if (*slot != nullptr) bad_file(npy_op, path, fmt::format("header has the key '{}' twice", key.text));
    *slot = &value;
  }
  for (auto [name, v] : {std::pair{"descr", f.descr}, {"fortran_order", f.fortran}, {"shape", f.shape}}) {
    if (v == nullptr) bad_file(npy_op, path, fmt::format("header field '{}' is missing", name));
  }
  return f;
}

// The shape's dimensions into t.shape; returns the element count.
std::uint64_t read_shape(const PyValue& shape, TensorInfo& t, const std::string& path) {
  if (shape.kind != PyValue::Kind::tuple) {
    bad_file(npy_op, path, fmt::format("header field 'shape' is {}, not a tuple", shape.kind_name()));
  }
  if (shape.items.size() > max_dims) {
    bad_file(npy_op, path, fmt::format("header field 'shape' has {} dimensions, more than {}", shape.items.size(), max_dims));
  }
  std::uint64_t count = 1;
  for (std::size_t i = 0; i < shape.items.size(); ++i) {
    const PyValue& d = shape.items[i];
    if (d.kind != PyValue::Kind::integer || d.negative || !d.magnitude) {
      bad_file(npy_op, path, fmt::format("header field 'shape[{}]' is not a non-negative 64-bit integer", i));
    }
    t.shape.push_back(*d.magnitude);
    auto c = detail::mul(count, *d.magnitude);
    if (!c) bad_file(npy_op, path, "header field 'shape': the element count overflows 64 bits");
    count = *c;
  }
  return count;
}

// The array described by the header fields (offset and bytes not yet checked against the file).
TensorInfo array_of(const HeaderFields& f, const std::string& npy_name, const std::string& path) {
  TensorInfo t;
  t.name = npy_name;
  if (f.descr->kind == PyValue::Kind::list) {
    bad_file(npy_op, path, "header field 'descr' is a structured dtype (a list of fields), which is not supported");
  }
  if (f.descr->kind != PyValue::Kind::string) {
    bad_file(npy_op, path, fmt::format("header field 'descr' is {}, not a type string", f.descr->kind_name()));
  }
  const std::string& descr_text = f.descr->text;
  const std::uint64_t itemsize = itemsize_of(descr_text, path);
  t.dtype = parse_numpy_dtype(descr_text).value_or(DType::raw);
  if (t.dtype == DType::raw) t.raw_dtype = descr_text;
  if (f.fortran->kind != PyValue::Kind::boolean) {
    bad_file(npy_op, path, fmt::format("header field 'fortran_order' is {}, not True or False", f.fortran->kind_name()));
  }
  t.fortran_order = f.fortran->boolean;
  const std::uint64_t count = read_shape(*f.shape, t, path);
  const auto bytes = detail::mul(count, itemsize);
  if (!bytes || !detail::mul(*bytes, 8)) {
    bad_file(npy_op, path, fmt::format("header field 'shape' x descr '{}': the byte size overflows 64 bits", descr_text));
  }
  t.bytes = *bytes;
  t.element_bits = static_cast<std::uint32_t>(std::min<std::uint64_t>(itemsize * 8, UINT32_MAX));
  return t;
}

// The array's bytes must be exactly what follows the header.
void check_data_size(const TensorInfo& t, const std::string& descr_text, std::uint64_t available,
                     const std::string& path) {
  if (t.bytes > available) {
    bad_file(npy_op, path, fmt::format("header field 'shape' x descr '{}' needs {} bytes of data but the file has {} "
                                   "after the header: truncated", descr_text, t.bytes, available));
  }
  if (t.bytes < available) {
    bad_file(npy_op, path, fmt::format("the file has {} bytes after the array data (shape x descr '{}' is {} bytes of "
                                   "the {} after the header)", available - t.bytes, descr_text, t.bytes, available));
  }
}

}  // namespace

TensorFileLayout parse_npy(std::span<const std::byte> header, std::uint64_t file_size,
                           const std::string& path, const std::string& npy_name) {
  const std::uint64_t extent = header_extent(TensorFormat::npy, header, file_size, path);
  if (header.size() < extent) {
    throw_usage_error({.op = npy_op, .path = path},
                      fmt::format("parse_npy given {} header bytes of {}", header.size(), extent));
  }
  TensorFileLayout layout;
  layout.path = path;
  layout.format = TensorFormat::npy;
  layout.file_size = file_size;
  layout.data_offset = extent;
  const auto major = static_cast<unsigned>(header[6]);
  layout.version = fmt::format("{}.0", major);
  const std::uint64_t preamble = major == 1 ? 10 : 12;
  layout.header_bytes = extent - preamble;

  const std::string_view text(reinterpret_cast<const char*>(header.data()) + preamble,
                              static_cast<std::size_t>(layout.header_bytes));
  const PyValue dict = parse_header_dict(text, major, path);
  const HeaderFields fields = header_fields(dict, path);
  TensorInfo t = array_of(fields, npy_name, path);
  t.offset = layout.data_offset;
  check_data_size(t, fields.descr->text, file_size - layout.data_offset, path);
  layout.tensors.push_back(std::move(t));
  return layout;
}

}  // namespace sluice::formats
