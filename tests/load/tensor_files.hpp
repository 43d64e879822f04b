// Hand-built tensor files for the load tests: safetensors from a list of tensors (or a raw
// header), .npy from a header dict text, written byte by byte so tests control every field.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace sluice::test {

/// A safetensors dtype with its bits per element.
struct StDtype {
  const char* name;
  std::uint32_t bits;
};
/// Every dtype of the safetensors specification (huggingface/safetensors, safetensors/src/tensor.rs,
/// enum Dtype), in its order, written out here so that no test takes a size from the parser's
/// own table.
inline constexpr StDtype st_dtypes[] = {
    {"BOOL", 8},        {"F4", 4},         {"F6_E2M3", 6}, {"F6_E3M2", 6}, {"U8", 8},   {"I8", 8},
    {"F8_E5M2", 8},     {"F8_E4M3", 8},    {"F8_E8M0", 8}, {"F8_E4M3FNUZ", 8},          {"F8_E5M2FNUZ", 8},
    {"I16", 16},        {"U16", 16},       {"F16", 16},    {"BF16", 16},   {"I32", 32}, {"U32", 32},
    {"F32", 32},        {"C64", 64},       {"F64", 64},    {"I64", 64},    {"U64", 64},
};

struct StTensor {
  std::string name;
  std::string dtype;
  std::vector<std::uint64_t> shape;
  std::vector<std::byte> data;
};

inline std::vector<std::byte> le64(std::uint64_t v) {
  std::vector<std::byte> b(8);
  for (int i = 0; i < 8; ++i) b[static_cast<std::size_t>(i)] = static_cast<std::byte>(v >> (8 * i));
  return b;
}

/// A safetensors file with `header` (JSON text, used as is) and `data` after it.
inline std::vector<std::byte> safetensors_raw(const std::string& header, const std::vector<std::byte>& data) {
  std::vector<std::byte> out = le64(header.size());
  for (char c : header) out.push_back(static_cast<std::byte>(c));
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

/// The header and data of a well-formed file: tensors back to back in the order given, the
/// header padded with spaces to a multiple of `pad` as the reference writer does.
inline std::vector<std::byte> safetensors_file(const std::vector<StTensor>& tensors,
                                               const nlohmann::json& metadata = nullptr, std::size_t pad = 8,
                                               std::string leading = "") {
  nlohmann::json h = nlohmann::json::object();
  std::vector<std::byte> data;
  for (const auto& t : tensors) {
    h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {data.size(), data.size() + t.data.size()}}};
    data.insert(data.end(), t.data.begin(), t.data.end());
  }
  if (!metadata.is_null()) h["__metadata__"] = metadata;
  std::string text = leading + h.dump();
  while ((8 + text.size()) % pad != 0) text.push_back(' ');
  return safetensors_raw(text, data);
}

/// An .npy file: version, the dict text (padded with spaces and '\n' to `align`), then data.
inline std::vector<std::byte> npy_file(int major, const std::string& dict, const std::vector<std::byte>& data,
                                       std::size_t align = 64) {
  const std::size_t pre = major == 1 ? 10 : 12;
  std::string h = dict;
  while ((pre + h.size() + 1) % align != 0) h.push_back(' ');
  h.push_back('\n');
  std::vector<std::byte> out;
  const char magic[] = "\x93NUMPY";
  for (int i = 0; i < 6; ++i) out.push_back(static_cast<std::byte>(magic[i]));
  out.push_back(static_cast<std::byte>(major));
  out.push_back(std::byte{0});
  for (std::size_t i = 0; i < pre - 8; ++i) out.push_back(static_cast<std::byte>(h.size() >> (8 * i)));
  for (char c : h) out.push_back(static_cast<std::byte>(c));
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

inline std::vector<std::byte> pattern(std::size_t n, unsigned seed = 1) {
  std::vector<std::byte> b(n);
  std::uint32_t x = seed * 2654435761u + 1;
  for (auto& v : b) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    v = static_cast<std::byte>(x);
  }
  return b;
}

}  // namespace sluice::test
