// DType: every value's name, bits, DLPack triple and file spellings, against literal values
// written from the specifications (dlpack.h 1.1 DLDataTypeCode; safetensors/src/tensor.rs;
// NumPy's dtype_to_descr), never from the table under test.
#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <set>
#include <tuple>

#include "sluice/dtype.hpp"

namespace sluice {
namespace {

struct Want {
  DType type;
  const char* name;
  int code, bits, lanes;
  const char* safetensors;
  const char* numpy;
};

constexpr Want kTable[] = {
    {DType::bool_, "bool", 6, 8, 1, "BOOL", "|b1"},
    {DType::u8, "u8", 1, 8, 1, "U8", "|u1"},
    {DType::i8, "i8", 0, 8, 1, "I8", "|i1"},
    {DType::u16, "u16", 1, 16, 1, "U16", "<u2"},
    {DType::i16, "i16", 0, 16, 1, "I16", "<i2"},
    {DType::u32, "u32", 1, 32, 1, "U32", "<u4"},
    {DType::i32, "i32", 0, 32, 1, "I32", "<i4"},
    {DType::u64, "u64", 1, 64, 1, "U64", "<u8"},
    {DType::i64, "i64", 0, 64, 1, "I64", "<i8"},
    {DType::f16, "f16", 2, 16, 1, "F16", "<f2"},
    {DType::bf16, "bf16", 4, 16, 1, "BF16", ""},
    {DType::f32, "f32", 2, 32, 1, "F32", "<f4"},
    {DType::f64, "f64", 2, 64, 1, "F64", "<f8"},
    {DType::c64, "c64", 5, 64, 1, "C64", "<c8"},
    {DType::c128, "c128", 5, 128, 1, "", "<c16"},
    {DType::f8_e4m3fn, "f8_e4m3fn", 10, 8, 1, "F8_E4M3", ""},
    {DType::f8_e5m2, "f8_e5m2", 12, 8, 1, "F8_E5M2", ""},
    {DType::f8_e4m3fnuz, "f8_e4m3fnuz", 11, 8, 1, "F8_E4M3FNUZ", ""},
    {DType::f8_e5m2fnuz, "f8_e5m2fnuz", 13, 8, 1, "F8_E5M2FNUZ", ""},
    {DType::f8_e8m0fnu, "f8_e8m0fnu", 14, 8, 1, "F8_E8M0", ""},
    {DType::f6_e2m3fn, "f6_e2m3fn", 15, 6, 1, "F6_E2M3", ""},
    {DType::f6_e3m2fn, "f6_e3m2fn", 16, 6, 1, "F6_E3M2", ""},
    {DType::f4_e2m1fn, "f4_e2m1fn", 17, 4, 1, "F4", ""},
};

TEST(DType, EveryValueAgainstTheSpecifications) {
  for (const Want& w : kTable) {
    SCOPED_TRACE(w.name);
    EXPECT_EQ(to_string(w.type), w.name);
    EXPECT_EQ(element_bits(w.type), static_cast<std::uint32_t>(w.bits));
    const auto dl = to_dlpack(w.type);
    ASSERT_TRUE(dl.has_value());
    EXPECT_EQ(dl->code, w.code);
    EXPECT_EQ(dl->bits, w.bits);
    EXPECT_EQ(dl->lanes, w.lanes);
    EXPECT_EQ(from_dlpack(*dl), w.type);
    EXPECT_EQ(safetensors_name(w.type), w.safetensors);
    EXPECT_EQ(numpy_name(w.type), w.numpy);
    if (*w.safetensors != '\0') {
      EXPECT_EQ(parse_safetensors_dtype(w.safetensors), w.type);
    }
    if (*w.numpy != '\0') {
      EXPECT_EQ(parse_numpy_dtype(w.numpy), w.type);
    }
  }
}

TEST(DType, OneToOneWithDLPack) {
  std::set<std::tuple<int, int, int>> seen;
  for (const Want& w : kTable) {
    EXPECT_TRUE(seen.emplace(w.code, w.bits, w.lanes).second) << w.name << " shares its triple";
  }
  EXPECT_EQ(seen.size(), 23u);
  // Every safetensors type has a DType (the specification's 22).
  EXPECT_EQ(std::count_if(std::begin(kTable), std::end(kTable), [](const Want& w) { return *w.safetensors != '\0'; }), 22);
}

TEST(DType, RawHasNoDLPackTypeNorSpelling) {
  EXPECT_EQ(to_string(DType::raw), "raw");
  EXPECT_EQ(element_bits(DType::raw), 0u);
  EXPECT_FALSE(to_dlpack(DType::raw).has_value());
  EXPECT_EQ(safetensors_name(DType::raw), "");
  EXPECT_EQ(numpy_name(DType::raw), "");
  EXPECT_FALSE(from_dlpack({2, 32, 4}).has_value()) << "vectors (lanes 4) are not tensor dtypes";
  EXPECT_FALSE(from_dlpack({2, 80, 1}).has_value());
  EXPECT_FALSE(from_dlpack({3, 64, 1}).has_value()) << "kDLOpaqueHandle";
}

TEST(DType, NumpyByteOrders) {
  EXPECT_EQ(parse_numpy_dtype("=f4"), DType::f32);
  EXPECT_EQ(parse_numpy_dtype("<u1"), DType::u8) << "one byte: any order";
  EXPECT_EQ(parse_numpy_dtype(">i1"), DType::i8);
  EXPECT_FALSE(parse_numpy_dtype(">f4").has_value()) << "big endian: bytes are never swapped";
  EXPECT_FALSE(parse_numpy_dtype("|f4").has_value());
  for (const char* raw : {"<f16", "|S5", "<U3", "|V16", "<M8[ns]", "<m8", "f4", "", "<"}) {
    EXPECT_FALSE(parse_numpy_dtype(raw).has_value()) << raw;
  }
  EXPECT_FALSE(parse_safetensors_dtype("bf16").has_value()) << "names are case-sensitive";
  EXPECT_FALSE(parse_safetensors_dtype("C128").has_value());
}

}  // namespace
}  // namespace sluice
