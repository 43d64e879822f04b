// The element type of a tensor: one enum, with the safetensors ("BF16", "F32") and NumPy
// ("<f4", "|b1") spellings as parse and print, and DLPack's (code, bits, lanes) triple, so the
// loader, the CLI and every binding name a type one way. docs/load.md has the table.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "sluice/export.hpp"

namespace sluice {

enum class DType : std::uint8_t {
  raw,  ///< bytes of a type sluice has no enum value for (NumPy strings, void, datetime, a
        ///< non-native byte order); TensorInfo::raw_dtype keeps the file's spelling
  bool_, u8, i8, u16, i16, u32, i32, u64, i64,
  f16, bf16, f32, f64, c64, c128,
  f8_e4m3fn, f8_e5m2, f8_e4m3fnuz, f8_e5m2fnuz, f8_e8m0fnu,
  f6_e2m3fn, f6_e3m2fn, f4_e2m1fn,
};

/// DLPack's DLDataType: code is a DLDataTypeCode (kDLInt=0, kDLUInt=1, kDLFloat=2, kDLBfloat=4,
/// kDLComplex=5, kDLBool=6, kDLFloat8_e4m3fn=10, ... as dlpack.h 1.1 numbers them).
struct DLPackType {
  std::uint8_t code = 0;
  std::uint8_t bits = 0;
  std::uint16_t lanes = 1;
  friend bool operator==(const DLPackType&, const DLPackType&) = default;
};

/// Sluice's own name: "bf16", "f32", "f8_e4m3fn", "raw".
[[nodiscard]] SLUICE_API std::string_view to_string(DType t) noexcept;
/// Bits per element (4 for f4_e2m1fn, 6 for the f6 types, 8 for bool); 0 for raw.
[[nodiscard]] SLUICE_API std::uint32_t element_bits(DType t) noexcept;

/// DLPack's triple for `t`; nullopt for raw, which DLPack cannot describe. One DType per triple.
[[nodiscard]] SLUICE_API std::optional<DLPackType> to_dlpack(DType t) noexcept;
/// The DType with DLPack's triple `d`; nullopt for a triple no DType has (lanes != 1 included).
[[nodiscard]] SLUICE_API std::optional<DType> from_dlpack(DLPackType d) noexcept;

/// The safetensors name ("BF16"); nullopt for an unknown name.
[[nodiscard]] SLUICE_API std::optional<DType> parse_safetensors_dtype(
    std::string_view name) noexcept;
/// "BF16"; empty where safetensors has no name (c128, raw).
[[nodiscard]] SLUICE_API std::string_view safetensors_name(DType t) noexcept;

/// A NumPy type string ("<f4", "|u1", "=i8"; byte order irrelevant for one-byte types); nullopt
/// for one with no DType: strings, void, datetime, float128, or a byte order other than little
/// endian for a wider type (sluice hosts and GPUs are little endian; bytes are never swapped).
[[nodiscard]] SLUICE_API std::optional<DType> parse_numpy_dtype(std::string_view descr) noexcept;
/// NumPy's canonical descr ("<f4", "|b1", "|u1"); empty where NumPy has no type (bf16, the f8,
/// f6 and f4 types, raw).
[[nodiscard]] SLUICE_API std::string_view numpy_name(DType t) noexcept;

}  // namespace sluice
