// safetensors: an 8-byte little-endian header length N, N bytes of JSON, then the tensor bytes.
// The checks follow the reference reader (huggingface/safetensors, tensor.rs): header at most
// 100,000,000 bytes, every `data_offsets` range inside the data section, ranges contiguous with
// no holes or overlaps, each range exactly shape x dtype bits / 8 bytes, and no bytes after the
// last tensor. Leading whitespace before the JSON object is accepted, as the reference reader
// accepts it (writers may pad the header to align the data). Duplicate keys, which a JSON
// library would silently collapse, are refused.
#include <algorithm>
#include <array>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "checked.hpp"
#include "sluice/formats.hpp"

namespace sluice::formats {
namespace {

using nlohmann::json;
using detail::bad_file;
using detail::quote_for_message;

constexpr std::string_view safetensors_op = "safetensors";

// The specification's order (safetensors/src/tensor.rs, enum Dtype); the types are in dtype.cpp.
constexpr std::array<std::string_view, 22> dtype_names{
    "BOOL", "F4",          "F6_E2M3",     "F6_E3M2", "U8",  "I8",  "F8_E5M2", "F8_E4M3",
    "F8_E8M0", "F8_E4M3FNUZ", "F8_E5M2FNUZ", "I16",     "U16", "F16", "BF16",    "I32",
    "U32",  "F32",         "C64",         "F64",     "I64", "U64",
};

// Thrown from the JSON parser's SAX handler, caught around the parse.
struct Reject {
  std::string why;
};

// Builds the header's DOM (nlohmann's own SAX DOM builder) and refuses duplicate keys and nesting
// deeper than a tensor's shape while parsing. Not json::parse with a callback: its parser walks
// the whole parent object at the end of every object (to drop discarded values), quadratic in
// the tensors: 2,000 tensors cost 10 ms of a 12 ms load.
class HeaderSax : public nlohmann::detail::json_sax_dom_parser<json> {
  using Base = nlohmann::detail::json_sax_dom_parser<json>;

 public:
  explicit HeaderSax(json& doc) : Base(doc, true) {}

  // The deepest legal value is an element of a tensor's shape (top object -> tensor object ->
  // shape array -> number): depth, the containers open around an event, is at most 3.
  bool start_object(std::size_t n) {
    check_depth();
    keys_.emplace_back();
    ++depth_;
    return Base::start_object(n);
  }
  bool end_object() {
    keys_.pop_back();
    --depth_;
    return Base::end_object();
  }
  bool start_array(std::size_t n) {
    check_depth();
    ++depth_;
    return Base::start_array(n);
  }
  bool end_array() {
    --depth_;
    return Base::end_array();
  }
  bool key(std::string& k) {
    check_depth();
    if (!keys_.back().insert(k).second) {
      throw Reject{fmt::format("header has the key '{}' twice in one object", quote_for_message(k))};
    }
    return Base::key(k);
  }
  bool null() { return check_depth(), Base::null(); }
  bool boolean(bool v) { return check_depth(), Base::boolean(v); }
  bool number_integer(std::int64_t v) { return check_depth(), Base::number_integer(v); }
  bool number_unsigned(std::uint64_t v) { return check_depth(), Base::number_unsigned(v); }
  bool number_float(double v, const std::string& s) { return check_depth(), Base::number_float(v, s); }
  bool string(std::string& v) { return check_depth(), Base::string(v); }
  bool binary(json::binary_t& v) { return check_depth(), Base::binary(v); }

 private:
  void check_depth() const {
    if (depth_ > 3) {
      throw Reject{"header nests deeper than the format allows (objects or arrays inside a "
                   "shape, data_offsets or __metadata__ value)"};
    }
  }
  std::vector<std::set<std::string, std::less<>>> keys_;
  int depth_ = 0;
};

std::string shape_text(const std::vector<std::uint64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

std::uint64_t unsigned_field(const json& v, const std::string& path, const std::string& field) {
  if (!v.is_number_unsigned()) {
    bad_file(safetensors_op, path, fmt::format("header field {}: {} is not a non-negative integer", field,
                                   quote_for_message(v.dump())));
  }
  return v.get<std::uint64_t>();
}

TensorInfo parse_tensor(const std::string& name, const json& entry, std::uint64_t data_size,
                        const std::string& path) {
  const std::string where = fmt::format("'{}'", quote_for_message(name));
  if (!entry.is_object()) {
    bad_file(safetensors_op, path, fmt::format("header field {}: expected an object with dtype, shape and data_offsets, found {}",
                                   where, entry.type_name()));
  }
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    if (!entry.contains(key)) bad_file(safetensors_op, path, fmt::format("header field {}.{} is missing", where, key));
  }
  TensorInfo t;
  t.name = name;

  const json& dtype = entry["dtype"];
  if (!dtype.is_string()) bad_file(safetensors_op, path, fmt::format("header field {}.dtype is not a string", where));
  const auto type = parse_safetensors_dtype(dtype.get<std::string>());
  if (!type) {
    bad_file(safetensors_op, path, fmt::format("header field {}.dtype: unknown dtype '{}' (known: {})", where,
                                   quote_for_message(dtype.get<std::string>()), fmt::join(dtype_names, ", ")));
  }
  t.dtype = *type;
  t.element_bits = element_bits(t.dtype);

  const json& shape = entry["shape"];
  if (!shape.is_array()) bad_file(safetensors_op, path, fmt::format("header field {}.shape is not an array", where));
  if (shape.size() > max_dims) {
    bad_file(safetensors_op, path, fmt::format("header field {}.shape has {} dimensions, more than {}", where, shape.size(), max_dims));
  }
  std::uint64_t elements = 1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    const std::uint64_t d = unsigned_field(shape[i], path, fmt::format("{}.shape[{}]", where, i));
    t.shape.push_back(d);
    auto e = detail::mul(elements, d);
    if (!e) bad_file(safetensors_op, path, fmt::format("header field {}.shape: the element count overflows 64 bits", where));
    elements = *e;
  }
  const auto bits = detail::mul(elements, t.element_bits);
  if (!bits) {
    bad_file(safetensors_op, path, fmt::format("header field {}.shape {} x {}: the byte size overflows 64 bits", where,
                                   shape_text(t.shape), safetensors_name(t.dtype)));
  }
  if (*bits % 8 != 0) {
    bad_file(safetensors_op, path, fmt::format("header field {}.shape {} x {} ({} bits each) is not a whole number of bytes",
                                   where, shape_text(t.shape), safetensors_name(t.dtype), t.element_bits));
  }
  const std::uint64_t need = *bits / 8;

  const json& offsets = entry["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2) {
    bad_file(safetensors_op, path, fmt::format("header field {}.data_offsets must be an array of two integers [BEGIN, END]", where));
  }
  const std::uint64_t begin = unsigned_field(offsets[0], path, where + ".data_offsets[0]");
  const std::uint64_t end = unsigned_field(offsets[1], path, where + ".data_offsets[1]");
  if (end < begin) {
    bad_file(safetensors_op, path, fmt::format("header field {}.data_offsets [{}, {}]: END is before BEGIN", where, begin, end));
  }
  if (end - begin != need) {
    bad_file(safetensors_op, path, fmt::format("header field {}.data_offsets [{}, {}] cover {} bytes, but shape {} x {} needs {}",
                                   where, begin, end, end - begin, shape_text(t.shape), safetensors_name(t.dtype), need));
  }
  if (end > data_size) {
    bad_file(safetensors_op, path, fmt::format("header field {}.data_offsets [{}, {}] end past the data section ({} bytes): "
                                   "the file is truncated or the offsets are wrong",
                                   where, begin, end, data_size));
  }
  t.offset = begin;  // relative for now; made absolute once the whole header is checked
  t.bytes = need;
  return t;
}

// The header's JSON object. Leading whitespace is accepted; duplicate keys and nesting deeper
// than a tensor's shape are refused while parsing.
json parse_header_json(std::string_view json_text, const std::string& path) {
  const auto first = json_text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos || json_text[first] != '{') {
    bad_file(safetensors_op, path, fmt::format("the {}-byte header is not a JSON object (it must start with '{{'): "
                                   "not a safetensors file?", json_text.size()));
  }
  json doc;
  HeaderSax sax(doc);
  try {
    json::sax_parse(json_text.begin(), json_text.end(), &sax);
  } catch (const Reject& r) {
    bad_file(safetensors_op, path, r.why);
  } catch (const json::exception& e) {
    bad_file(safetensors_op, path, fmt::format("the header is not valid JSON: {}", e.what()));
  }
  if (!doc.is_object()) bad_file(safetensors_op, path, "the header is not a JSON object");
  return doc;
}

void read_metadata(const json& metadata, TensorFileLayout& layout, const std::string& path) {
  if (!metadata.is_object()) bad_file(safetensors_op, path, "header field __metadata__ is not an object");
  for (auto m = metadata.begin(); m != metadata.end(); ++m) {
    if (!m.value().is_string()) {
      bad_file(safetensors_op, path, fmt::format("header field __metadata__.'{}' is not a string (metadata values must be strings)",
                                     quote_for_message(m.key())));
    }
    layout.metadata.emplace_back(m.key(), m.value().get<std::string>());
  }
}

// Sorts the tensors by offset and checks that they tile the data section: no overlap, no hole,
// nothing after the last one.
void check_contiguous(std::vector<TensorInfo>& ts, std::uint64_t data_size, const std::string& path) {
  std::sort(ts.begin(), ts.end(), [](const TensorInfo& a, const TensorInfo& b) {
    if (a.offset != b.offset) return a.offset < b.offset;
    if (a.bytes != b.bytes) return a.bytes < b.bytes;
    return a.name < b.name;
  });
  std::uint64_t expected = 0;
  const TensorInfo* prev = nullptr;
  for (const TensorInfo& t : ts) {
    if (t.offset < expected) {
      bad_file(safetensors_op, path, fmt::format("header field '{}'.data_offsets [{}, {}] overlaps '{}' (which ends at {})",
                                     quote_for_message(t.name), t.offset, t.offset + t.bytes,
                                     quote_for_message(prev->name), expected));
    }
    if (t.offset > expected) {
      bad_file(safetensors_op, path, fmt::format("header field '{}'.data_offsets [{}, {}]: bytes [{}, {}) of the data section "
                                     "belong to no tensor (tensors must be contiguous)",
                                     quote_for_message(t.name), t.offset, t.offset + t.bytes, expected, t.offset));
    }
    expected = t.offset + t.bytes;
    prev = &t;
  }
  if (expected != data_size) {
    bad_file(safetensors_op, path, fmt::format("the data section has {} bytes but the tensors end at {}: {} bytes after the "
                                   "last tensor", data_size, expected, data_size - expected));
  }
}

}  // namespace

std::uint32_t safetensors_dtype_bits(std::string_view dtype) noexcept {
  const auto type = parse_safetensors_dtype(dtype);
  return type ? element_bits(*type) : 0;
}

std::span<const std::string_view> safetensors_dtypes() noexcept { return dtype_names; }

TensorFileLayout parse_safetensors(std::span<const std::byte> header, std::uint64_t file_size,
                                   const std::string& path) {
  if (file_size < 8) {
    bad_file(safetensors_op, path, fmt::format("the file has {} bytes, fewer than the 8-byte header length: "
                                   "not a safetensors file, or truncated", file_size));
  }
  const std::uint64_t extent = header_extent(TensorFormat::safetensors, header, file_size, path);
  if (header.size() < extent) {
    throw_usage_error({.op = safetensors_op, .path = path},
                      fmt::format("parse_safetensors given {} header bytes of {}", header.size(), extent));
  }
  TensorFileLayout layout;
  layout.path = path;
  layout.format = TensorFormat::safetensors;
  layout.file_size = file_size;
  layout.header_bytes = extent - 8;
  layout.data_offset = extent;
  const std::uint64_t data_size = file_size - extent;

  const auto* text = reinterpret_cast<const char*>(header.data()) + 8;
  const json doc = parse_header_json(std::string_view(text, static_cast<std::size_t>(layout.header_bytes)), path);
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    if (it.key() == "__metadata__") {
      read_metadata(it.value(), layout, path);
    } else {
      layout.tensors.push_back(parse_tensor(it.key(), it.value(), data_size, path));
    }
  }
  check_contiguous(layout.tensors, data_size, path);
  for (TensorInfo& t : layout.tensors) t.offset += layout.data_offset;
  return layout;
}

}  // namespace sluice::formats
