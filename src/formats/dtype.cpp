// One table: every DType with its name, bits, DLPack code and the two file spellings.
#include "sluice/dtype.hpp"

#include <array>

namespace sluice {
namespace {

struct Row {
  DType type;
  std::string_view name;
  std::uint8_t code;  // DLDataTypeCode
  std::uint8_t bits;
  std::string_view safetensors;
  std::string_view numpy;
};

// DLPack codes (dlpack.h 1.1): kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4, kDLComplex 5,
// kDLBool 6, kDLFloat8_e4m3fn 10, kDLFloat8_e4m3fnuz 11, kDLFloat8_e5m2 12, kDLFloat8_e5m2fnuz 13,
// kDLFloat8_e8m0fnu 14, kDLFloat6_e2m3fn 15, kDLFloat6_e3m2fn 16, kDLFloat4_e2m1fn 17. The
// safetensors F8/F6/F4 names are PyTorch's float8_e4m3fn, ... (safetensors/src/tensor.rs).
constexpr std::array<Row, 23> rows{{
    {DType::bool_, "bool", 6, 8, "BOOL", "|b1"},
    {DType::u8, "u8", 1, 8, "U8", "|u1"},
    {DType::i8, "i8", 0, 8, "I8", "|i1"},
    {DType::u16, "u16", 1, 16, "U16", "<u2"},
    {DType::i16, "i16", 0, 16, "I16", "<i2"},
    {DType::u32, "u32", 1, 32, "U32", "<u4"},
    {DType::i32, "i32", 0, 32, "I32", "<i4"},
    {DType::u64, "u64", 1, 64, "U64", "<u8"},
    {DType::i64, "i64", 0, 64, "I64", "<i8"},
    {DType::f16, "f16", 2, 16, "F16", "<f2"},
    {DType::bf16, "bf16", 4, 16, "BF16", ""},
    {DType::f32, "f32", 2, 32, "F32", "<f4"},
    {DType::f64, "f64", 2, 64, "F64", "<f8"},
    {DType::c64, "c64", 5, 64, "C64", "<c8"},
    {DType::c128, "c128", 5, 128, "", "<c16"},
    {DType::f8_e4m3fn, "f8_e4m3fn", 10, 8, "F8_E4M3", ""},
    {DType::f8_e5m2, "f8_e5m2", 12, 8, "F8_E5M2", ""},
    {DType::f8_e4m3fnuz, "f8_e4m3fnuz", 11, 8, "F8_E4M3FNUZ", ""},
    {DType::f8_e5m2fnuz, "f8_e5m2fnuz", 13, 8, "F8_E5M2FNUZ", ""},
    {DType::f8_e8m0fnu, "f8_e8m0fnu", 14, 8, "F8_E8M0", ""},
    {DType::f6_e2m3fn, "f6_e2m3fn", 15, 6, "F6_E2M3", ""},
    {DType::f6_e3m2fn, "f6_e3m2fn", 16, 6, "F6_E3M2", ""},
    {DType::f4_e2m1fn, "f4_e2m1fn", 17, 4, "F4", ""},
}};

const Row* find(DType t) noexcept {
  for (const Row& r : rows) {
    if (r.type == t) return &r;
  }
  return nullptr;  // raw
}

}  // namespace

std::string_view to_string(DType t) noexcept {
  const Row* r = find(t);
  return r != nullptr ? r->name : "raw";
}

std::uint32_t element_bits(DType t) noexcept {
  const Row* r = find(t);
  return r != nullptr ? r->bits : 0;
}

std::optional<DLPackType> to_dlpack(DType t) noexcept {
  const Row* r = find(t);
  if (r == nullptr) return std::nullopt;
  return DLPackType{r->code, r->bits, 1};
}

std::optional<DType> from_dlpack(DLPackType d) noexcept {
  for (const Row& r : rows) {
    if (DLPackType{r.code, r.bits, 1} == d) return r.type;
  }
  return std::nullopt;
}

std::optional<DType> parse_safetensors_dtype(std::string_view name) noexcept {
  for (const Row& r : rows) {
    if (!r.safetensors.empty() && r.safetensors == name) return r.type;
  }
  return std::nullopt;
}

std::string_view safetensors_name(DType t) noexcept {
  const Row* r = find(t);
  return r != nullptr ? r->safetensors : std::string_view();
}

std::optional<DType> parse_numpy_dtype(std::string_view descr) noexcept {
  if (descr.size() < 2) return std::nullopt;
  const char order = descr[0];
  const std::string_view kind_size = descr.substr(1);
  for (const Row& r : rows) {
    if (r.numpy.empty() || r.numpy.substr(1) != kind_size) continue;
    // One-byte types have no byte order ('|'); NumPy also accepts '<', '>' and '=' for them.
    if (r.bits == 8) return order == '|' || order == '<' || order == '>' || order == '=' ? std::optional(r.type) : std::nullopt;
    return order == '<' || order == '=' ? std::optional(r.type) : std::nullopt;
  }
  return std::nullopt;
}

std::string_view numpy_name(DType t) noexcept {
  const Row* r = find(t);
  return r != nullptr ? r->numpy : std::string_view();
}

}  // namespace sluice
