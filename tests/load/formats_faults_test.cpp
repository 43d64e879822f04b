// Corrupted, truncated and hostile tensor files: each gives an Error (domain data) that names
// the file and the field, never a crash, a huge allocation or a read outside the file.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "sluice/error.hpp"
#include "sluice/formats.hpp"
#include "support/test_util.hpp"
#include "tensor_files.hpp"

namespace sluice {
namespace {

using test::pattern;

// The error for parsing `f` as safetensors; checks it names the file and holds `want`.
void st_rejects(const std::vector<std::byte>& f, const std::string& want) {
  auto e = test::error_of([&] { (void)formats::parse_safetensors(f, f.size(), "bad.safetensors"); });
  ASSERT_TRUE(e.has_value()) << want;
  EXPECT_EQ(e->domain(), ErrorDomain::data) << e->what();
  EXPECT_EQ(e->path(), "bad.safetensors");
  EXPECT_NE(std::string(e->what()).find(want), std::string::npos) << "want '" << want << "' in: " << e->what();
}

void st_header_rejects(const std::string& header, std::size_t data, const std::string& want) {
  st_rejects(test::safetensors_raw(header, pattern(data)), want);
}

TEST(SafetensorsFaults, LengthField) {
  st_rejects({}, "fewer than the 8-byte header length");
  st_rejects(pattern(5), "fewer than the 8-byte header length");
  st_rejects(test::le64(200'000'000), "larger than the limit");
  st_rejects(test::le64(~0ull), "larger than the limit");
  st_rejects(test::le64(1), "too small");
  auto f = test::safetensors_file({{"a", "U8", {4}, pattern(4)}});
  f.resize(20);
  st_rejects(f, "runs past the end of the file");
}

TEST(SafetensorsFaults, NotJsonOrNotAnObject) {
  st_header_rejects("[1, 2]  ", 0, "must start with '{'");
  st_header_rejects("{\"a\": ", 0, "not valid JSON");
  st_header_rejects("{\"a\":{}} trailing", 0, "not valid JSON");
  st_header_rejects(std::string("{\"a\xff\":1}"), 0, "not valid JSON");
  st_header_rejects("{\"a\": 1}", 0, "header field 'a': expected an object");
  st_header_rejects("{\"x\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},\"x\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}",
                    2, "key 'x' twice");
  st_header_rejects("{\"x\":{\"dtype\":\"U8\",\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, "key 'dtype' twice");
  st_header_rejects("{\"x\":{\"dtype\":\"U8\",\"shape\":[[1]],\"data_offsets\":[0,1]}}", 1, "nests deeper");
}

// A header of many tensors (the parser once walked the whole top object at the end of each
// tensor's object): every tensor parsed in order, and a duplicate after thousands still refused.
TEST(SafetensorsFaults, ManyTensorsParseAndTheirDuplicatesAreRefused) {
  constexpr int n = 5000;
  std::string header = "{";
  for (int i = 0; i < n; ++i) {
    header += fmt::format("{}\"t{}\":{{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[{},{}]}}",
                          i == 0 ? "" : ",", i, i, i + 1);
  }
  const auto f = test::safetensors_raw(header + "}", pattern(n));
  const auto layout = formats::parse_safetensors(f, f.size(), "many.safetensors");
  ASSERT_EQ(layout.tensors.size(), std::size_t{n});
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(layout.tensors[i].name, fmt::format("t{}", i));
    EXPECT_EQ(layout.tensors[i].offset, layout.data_offset + i);
  }
  st_header_rejects(header + ",\"t17\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", n,
                    "key 't17' twice");
}

TEST(SafetensorsFaults, TensorFields) {
  st_header_rejects(R"({"w":{"shape":[1],"data_offsets":[0,1]}})", 1, "'w'.dtype is missing");
  st_header_rejects(R"({"w":{"dtype":"U8","data_offsets":[0,1]}})", 1, "'w'.shape is missing");
  st_header_rejects(R"({"w":{"dtype":"U8","shape":[1]}})", 1, "'w'.data_offsets is missing");
  st_header_rejects(R"({"w":{"dtype":"F17","shape":[1],"data_offsets":[0,1]}})", 1, "unknown dtype 'F17'");
  st_header_rejects(R"({"w":{"dtype":3,"shape":[1],"data_offsets":[0,1]}})", 1, "'w'.dtype is not a string");
  st_header_rejects(R"({"w":{"dtype":"U8","shape":1,"data_offsets":[0,1]}})", 1, "'w'.shape is not an array");
  st_header_rejects(R"({"w":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}})", 1, "'w'.shape[0]");
  st_header_rejects(R"({"w":{"dtype":"U8","shape":[1.5],"data_offsets":[0,1]}})", 1, "not a non-negative integer");
  st_header_rejects(R"({"w":{"dtype":"U8","shape":[99999999999999999999],"data_offsets":[0,1]}})", 1, "'w'.shape[0]");
  st_header_rejects(R"({"w":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,1]}})", 1, "overflows");
  st_header_rejects(R"({"w":{"dtype":"F64","shape":[4294967296,536870912],"data_offsets":[0,1]}})", 1, "overflows");
  st_header_rejects(R"({"w":{"dtype":"F4","shape":[3],"data_offsets":[0,1]}})", 1, "not a whole number of bytes");
  st_header_rejects(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0]}})", 1, "two integers");
  st_header_rejects(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1,2]}})", 1, "two integers");
  st_header_rejects(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[1,0]}})", 1, "END is before BEGIN");
  st_header_rejects(R"({"w":{"dtype":"U16","shape":[2],"data_offsets":[0,3]}})", 3, "cover 3 bytes, but shape [2] x U16 needs 4");
  st_header_rejects(R"({"w":{"dtype":"U8","shape":[8],"data_offsets":[0,8]}})", 4, "end past the data section (4 bytes)");
  st_header_rejects(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[18446744073709551615,0]}})", 1, "END is before BEGIN");
  std::string dims = "[";
  for (int i = 0; i < 70; ++i) dims += i ? ",1" : "1";
  st_header_rejects(R"({"w":{"dtype":"U8","shape":)" + dims + R"(],"data_offsets":[0,1]}})", 1, "more than 64");
  st_header_rejects(R"({"__metadata__":{"a":1}})", 0, "__metadata__.'a' is not a string");
  st_header_rejects(R"({"__metadata__":[1]})", 0, "__metadata__ is not an object");
}

TEST(SafetensorsFaults, LayoutOfTheDataSection) {
  st_header_rejects(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})",
                    6, "overlaps 'a'");
  st_header_rejects(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})",
                    4, "overlaps");
  st_header_rejects(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[4,6]}})",
                    6, "bytes [2, 4) of the data section belong to no tensor");
  st_header_rejects(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}})", 4, "bytes [0, 2)");
  st_header_rejects(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})", 5, "3 bytes after the last tensor");
  // Truncated data: the last tensor ends past the end of the file.
  auto f = test::safetensors_file({{"a", "F32", {100}, pattern(400)}});
  f.resize(f.size() - 1);
  st_rejects(f, "'a'.data_offsets [0, 400] end past the data section (399 bytes)");
}

void npy_rejects(const std::vector<std::byte>& f, const std::string& want) {
  auto e = test::error_of([&] { (void)formats::parse_npy(f, f.size(), "bad.npy", "bad"); });
  ASSERT_TRUE(e.has_value()) << want;
  EXPECT_EQ(e->domain(), ErrorDomain::data) << e->what();
  EXPECT_EQ(e->path(), "bad.npy");
  EXPECT_NE(std::string(e->what()).find(want), std::string::npos) << "want '" << want << "' in: " << e->what();
}

void npy_dict_rejects(const std::string& dict, std::size_t data, const std::string& want, int version = 1) {
  npy_rejects(test::npy_file(version, dict, pattern(data)), want);
}

TEST(NpyFaults, PreambleAndLength) {
  npy_rejects({}, "fewer than the 10-byte");
  auto good = test::npy_file(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", pattern(4));
  auto f = good;
  f[0] = std::byte{'x'};
  npy_rejects(f, "magic");
  f = good;
  f[6] = std::byte{4};
  npy_rejects(f, "version 4.0");
  f = good;
  f[7] = std::byte{1};
  npy_rejects(f, "version 1.1");
  f = good;
  f.resize(30);
  npy_rejects(f, "runs past the end of the file");
  f = test::npy_file(2, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", pattern(4));
  f.resize(11);
  npy_rejects(f, "fewer than the 12-byte version 2.0 preamble");
  f = test::npy_file(2, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", pattern(4));
  f[11] = std::byte{0x7f};
  npy_rejects(f, "larger than the limit");
}

TEST(NpyFaults, DictLiteral) {
  npy_dict_rejects("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), ", 4, "not a Python dict literal");
  npy_dict_rejects("['descr']", 4, "is a list, not a dict");
  npy_dict_rejects("{'descr': '<f4' 'fortran_order': False}", 4, "expected ',' or '}'");
  npy_dict_rejects("{'descr': '<f4, 'fortran_order': False, 'shape': (1,)}", 4, "not a Python dict literal");
  npy_dict_rejects("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}", 4, "unexpected key 'x'");
  npy_dict_rejects("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,)}", 4, "'descr' twice");
  npy_dict_rejects("{'descr': '<f4', 'shape': (1,)}", 4, "'fortran_order' is missing");
  npy_dict_rejects("{'descr': '<f4', 'fortran_order': 0, 'shape': (1,)}", 4, "'fortran_order' is an integer");
  npy_dict_rejects("{'descr': '<f4', 'fortran_order': False, 'shape': [1]}", 4, "'shape' is a list, not a tuple");
  npy_dict_rejects("{'descr': '<f4', 'fortran_order': False, 'shape': (1)}", 4, "'shape' is an integer");
  npy_dict_rejects("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}", 4, "'shape[0]'");
  npy_dict_rejects("{'descr': '<f4', 'fortran_order': False, 'shape': (1.0,)}", 4, "plain decimal");
  npy_dict_rejects("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", 4, "'shape[0]'");
  npy_dict_rejects("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296)}", 4, "overflows");
  npy_dict_rejects("{'descr': '<f4', 'fortran_order': False, 'shape': ((((((((((((((((((1,),),),),),),),),),),),),),),),),),),)}", 4,
                   "nested deeper");
  npy_dict_rejects("{'descr': '<f4', 'fortran_order': False, 'shape': __import__('os')}", 4, "unexpected character");
  npy_dict_rejects("{'descr': '\xff<f4', 'fortran_order': False, 'shape': (1,)}", 4, "not valid UTF-8", 3);
}

TEST(NpyFaults, Descr) {
  npy_dict_rejects("{'descr': '|O', 'fortran_order': False, 'shape': (1,)}", 8, "object array");
  npy_dict_rejects("{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (1,)}", 4, "structured dtype");
  npy_dict_rejects("{'descr': 'float32', 'fortran_order': False, 'shape': (1,)}", 4, "'descr': 'float32'");
  npy_dict_rejects("{'descr': '<i3', 'fortran_order': False, 'shape': (1,)}", 4, "item size of 3");
  npy_dict_rejects("{'descr': '<q8', 'fortran_order': False, 'shape': (1,)}", 8, "unknown kind 'q'");
  npy_dict_rejects("{'descr': '<', 'fortran_order': False, 'shape': (1,)}", 4, "'descr'");
  npy_dict_rejects("{'descr': 5, 'fortran_order': False, 'shape': (1,)}", 4, "'descr' is an integer");
  npy_dict_rejects("{'descr': '<U99999999999999999', 'fortran_order': False, 'shape': (1,)}", 4, "'descr'");
}

TEST(NpyFaults, DataSize) {
  npy_dict_rejects("{'descr': '<f4', 'fortran_order': False, 'shape': (3,)}", 11, "needs 12 bytes of data but the file has 11");
  npy_dict_rejects("{'descr': '<f4', 'fortran_order': False, 'shape': (3,)}", 13, "1 bytes after the array data");
  npy_dict_rejects("{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904,)}", 8, "overflows");
}

}  // namespace
}  // namespace sluice
