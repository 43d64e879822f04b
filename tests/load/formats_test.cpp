// The safetensors and .npy parsers on well-formed files: every safetensors dtype, zero-size and
// 0-d tensors, metadata, padded headers, every .npy version and the dtypes NumPy writes.
#include <gtest/gtest.h>

#include <algorithm>

#include <fmt/format.h>

#include "sluice/formats.hpp"
#include "tensor_files.hpp"

namespace sluice {
namespace {

using formats::parse_npy;
using formats::parse_safetensors;
using test::pattern;
using test::StTensor;

TensorFileLayout st(const std::vector<std::byte>& f) { return parse_safetensors(f, f.size(), "t.safetensors"); }
TensorFileLayout np(const std::vector<std::byte>& f) { return parse_npy(f, f.size(), "t.npy", "t"); }

// Sizes from the specification's table (tensor_files.hpp), offsets from how the file was
// written: the data is the file's tail, tensors back to back in the order given.
TEST(Safetensors, EveryDtypeWithItsSize) {
  std::vector<StTensor> ts;
  std::uint64_t data_bytes = 0;
  for (const test::StDtype& d : test::st_dtypes) {
    ts.push_back({std::string(d.name) + "_t", d.name, {4, 2}, pattern(8 * d.bits / 8)});
    data_bytes += 8 * d.bits / 8;
    EXPECT_EQ(formats::safetensors_dtype_bits(d.name), d.bits) << d.name;
  }
  ASSERT_EQ(ts.size(), 22u);
  const auto names = formats::safetensors_dtypes();
  ASSERT_EQ(names.size(), ts.size());
  for (std::size_t i = 0; i < names.size(); ++i) EXPECT_EQ(names[i], test::st_dtypes[i].name) << i;
  const auto f = test::safetensors_file(ts);
  const auto layout = st(f);
  ASSERT_EQ(layout.tensors.size(), ts.size());
  EXPECT_EQ(layout.data_offset, f.size() - data_bytes);
  std::uint64_t expect = f.size() - data_bytes;
  for (std::size_t i = 0; i < ts.size(); ++i) {
    EXPECT_EQ(layout.tensors[i].name, ts[i].name);
    EXPECT_EQ(dtype_text(layout.tensors[i], TensorFormat::safetensors), ts[i].dtype);
    EXPECT_EQ(layout.tensors[i].offset, expect);
    EXPECT_EQ(layout.tensors[i].bytes, ts[i].data.size());
    expect += ts[i].data.size();
  }
  EXPECT_EQ(formats::safetensors_dtype_bits("F4"), 4u);
  EXPECT_EQ(formats::safetensors_dtype_bits("F6_E3M2"), 6u);
  EXPECT_EQ(formats::safetensors_dtype_bits("C64"), 64u);
  EXPECT_EQ(formats::safetensors_dtype_bits("F128"), 0u);
}

TEST(Safetensors, ZeroSizeScalarsMetadataAndOddSizes) {
  const auto f = test::safetensors_file({{"empty", "F32", {0, 7}, {}},
                                         {"scalar", "F64", {}, pattern(8)},
                                         {"odd", "U8", {13}, pattern(13)},
                                         {"empty2", "I64", {3, 0}, {}},
                                         {"after", "BF16", {3}, pattern(6)}},
                                        {{"format", "pt"}, {"note", "x"}});
  const auto l = st(f);
  ASSERT_EQ(l.tensors.size(), 5u);
  EXPECT_EQ(l.header_bytes % 8, 0u);
  EXPECT_EQ(l.data_offset % 8, 0u);
  ASSERT_EQ(l.metadata.size(), 2u);
  EXPECT_EQ(l.metadata[0], (std::pair<std::string, std::string>{"format", "pt"}));
  const auto& scalar = *std::find_if(l.tensors.begin(), l.tensors.end(), [](auto& t) { return t.name == "scalar"; });
  EXPECT_TRUE(scalar.shape.empty());
  EXPECT_EQ(scalar.bytes, 8u);
  const auto& after = *std::find_if(l.tensors.begin(), l.tensors.end(), [](auto& t) { return t.name == "after"; });
  EXPECT_EQ(after.offset, l.data_offset + 21);  // 8-byte but not 4 KiB aligned
}

TEST(Safetensors, SubByteDtypesNeedWholeBytes) {
  EXPECT_EQ(st(test::safetensors_file({{"f4", "F4", {6}, pattern(3)}})).tensors[0].bytes, 3u);
  EXPECT_EQ(st(test::safetensors_file({{"f6", "F6_E2M3", {4}, pattern(3)}})).tensors[0].bytes, 3u);
}

TEST(Safetensors, LeadingWhitespaceAndNoTensors) {
  const auto f = test::safetensors_file({{"a", "I32", {2}, pattern(8)}}, nullptr, 8, "   \n");
  EXPECT_EQ(st(f).tensors.size(), 1u);
  const auto empty = test::safetensors_raw("{}", {});
  EXPECT_TRUE(st(empty).tensors.empty());
  const auto meta_only = test::safetensors_raw(R"({"__metadata__":{"a":"b"}})", {});
  EXPECT_EQ(st(meta_only).metadata.size(), 1u);
}

TEST(Safetensors, HeaderOrderIsNotFileOrder) {
  // data_offsets, not header order, decide the order.
  const std::string h = R"({"z":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"a":{"dtype":"U8","shape":[1],"data_offsets":[2,3]}})";
  const auto l = st(test::safetensors_raw(h, pattern(3)));
  ASSERT_EQ(l.tensors.size(), 2u);
  EXPECT_EQ(l.tensors[0].name, "z");
  EXPECT_EQ(l.tensors[1].name, "a");
}

TEST(Npy, EveryVersion) {
  for (int v : {1, 2, 3}) {
    const auto f = test::npy_file(v, "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", pattern(48));
    const auto l = np(f);
    EXPECT_EQ(l.version, fmt::format("{}.0", v));
    EXPECT_EQ(l.data_offset % 64, 0u);
    ASSERT_EQ(l.tensors.size(), 1u);
    EXPECT_EQ(l.tensors[0].name, "t");
    EXPECT_EQ(l.tensors[0].dtype, DType::f32);
    EXPECT_EQ(l.tensors[0].shape, (std::vector<std::uint64_t>{3, 4}));
    EXPECT_EQ(l.tensors[0].bytes, 48u);
    EXPECT_EQ(l.tensors[0].offset, f.size() - 48);  // the data is the file's tail
    EXPECT_EQ(l.data_offset, f.size() - 48);
  }
}

TEST(Npy, DtypesShapesAndOrders) {
  struct Case {
    const char* descr;
    std::uint64_t item;
  };
  for (auto c : {Case{"|b1", 1}, Case{"|i1", 1}, Case{"<i2", 2}, Case{"<i4", 4}, Case{">i8", 8}, Case{"|u1", 1},
                 Case{"<u2", 2}, Case{"<u4", 4}, Case{"<u8", 8}, Case{"<f2", 2}, Case{"<f8", 8}, Case{"<f16", 16},
                 Case{"<c8", 8}, Case{"<c16", 16}, Case{"|S5", 5}, Case{"<U3", 12}, Case{"|V16", 16},
                 Case{"<M8[ns]", 8}, Case{"<m8", 8}}) {
    for (const char* shape : {"()", "(5,)", "(2, 3)", "(0, 4)", "(2L, 1L, 3L)"}) {
      std::uint64_t n = std::string(shape) == "()" ? 1 : std::string(shape) == "(5,)" ? 5 : std::string(shape) == "(0, 4)" ? 0 : 6;
      const std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': True, 'shape': {}, }}", c.descr, shape);
      const auto l = np(test::npy_file(1, dict, pattern(n * c.item)));
      EXPECT_EQ(l.tensors[0].bytes, n * c.item) << dict;
      EXPECT_TRUE(l.tensors[0].fortran_order);
      EXPECT_EQ(dtype_text(l.tensors[0], TensorFormat::npy), c.descr);
    }
  }
}

TEST(Npy, KeyOrderQuotesAndOldAlignment) {
  const auto f = test::npy_file(1, "{\"shape\": (2,), \"fortran_order\": False, \"descr\": \"<i4\"}", pattern(8), 16);
  const auto l = np(f);
  EXPECT_EQ(l.data_offset % 16, 0u);
  EXPECT_EQ(l.tensors[0].bytes, 8u);
}

TEST(Formats, DetectAndHeaderExtent) {
  const auto n = test::npy_file(2, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", pattern(4));
  EXPECT_EQ(formats::detect_format(n), TensorFormat::npy);
  EXPECT_EQ(formats::header_extent(TensorFormat::npy, n, n.size(), "x"), n.size() - 4);
  const auto s = test::safetensors_file({{"a", "U8", {1}, pattern(1)}});
  EXPECT_EQ(formats::detect_format(s), TensorFormat::safetensors);
  EXPECT_EQ(formats::header_extent(TensorFormat::safetensors, s, s.size(), "x"), s.size() - 1);
}

}  // namespace
}  // namespace sluice
