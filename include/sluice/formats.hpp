// Tensor file formats: safetensors and NumPy .npy. The parsers turn a file's header into a
// layout (which tensor lies at which byte range, with which dtype and shape) and never trust the
// file: every length, offset, shape and dtype is checked against the limits below and against
// the file's size before anything is allocated or read, and every failure is an Error (domain
// data) naming the file and the header field. docs/load.md gives the formats and the checks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sluice/dtype.hpp"
#include "sluice/export.hpp"

namespace sluice {

class File;

enum class TensorFormat : std::uint8_t { safetensors, npy };

[[nodiscard]] SLUICE_API std::string_view to_string(TensorFormat f) noexcept;

/// One tensor of a file.
struct TensorInfo {
  std::string name;                   ///< safetensors key; for .npy the file name without ".npy"
  DType dtype = DType::raw;           ///< the element type (sluice/dtype.hpp)
  std::string raw_dtype;              ///< .npy only, for DType::raw: the descr ("|S5", ">i4")
  std::uint32_t element_bits = 0;     ///< bits per element (4 for F4, 6 for F6_*, 8 for BOOL)
  std::vector<std::uint64_t> shape;   ///< empty for a 0-d scalar
  std::uint64_t offset = 0;           ///< absolute byte offset of the first element in the file
  std::uint64_t bytes = 0;            ///< size of the byte range
  bool fortran_order = false;         ///< .npy only: the bytes are in column-major order
  std::size_t file_index = 0;         ///< which file of a checkpoint holds it (set by the loader)
};

/// The type as a file of `format` spells it: "BF16" (safetensors), "<f4" (.npy), or raw_dtype.
[[nodiscard]] SLUICE_API std::string dtype_text(const TensorInfo& t, TensorFormat format);

/// Everything a file's header says.
struct TensorFileLayout {
  std::string path;
  TensorFormat format = TensorFormat::safetensors;
  std::uint64_t file_size = 0;
  std::uint64_t data_offset = 0;      ///< first byte after the header
  std::uint64_t header_bytes = 0;     ///< N (safetensors) or HEADER_LEN (.npy), as stored
  std::string version;                ///< .npy: "1.0", "2.0" or "3.0"; safetensors: empty
  std::vector<TensorInfo> tensors;    ///< in file-offset order
  /// safetensors `__metadata__` (string to string), in key order.
  std::vector<std::pair<std::string, std::string>> metadata;
};

namespace formats {

/// Largest safetensors header accepted (the reference implementation's MAX_HEADER_SIZE).
inline constexpr std::uint64_t safetensors_max_header = 100'000'000;
/// Largest .npy header accepted. NumPy itself reads at most 10000 bytes unless told otherwise;
/// this limit leaves room for v2.0 headers NumPy can write.
inline constexpr std::uint64_t npy_max_header = 1 << 20;
/// Most dimensions a tensor may have (NumPy's NPY_MAXDIMS is 64).
inline constexpr std::size_t max_dims = 64;

/// Bits per element of a safetensors dtype ("F16" -> 16, "F4" -> 4), or 0 for an unknown name.
[[nodiscard]] SLUICE_API std::uint32_t safetensors_dtype_bits(std::string_view dtype) noexcept;
/// Every dtype name safetensors defines, in the specification's order.
[[nodiscard]] SLUICE_API std::span<const std::string_view> safetensors_dtypes() noexcept;

/// How many bytes a parser needs from the start of the file to see the whole header: 8 + N for
/// safetensors, 10/12 + HEADER_LEN for .npy. `prefix` must hold the first 16 bytes of the file
/// (or all of it when shorter). Throws an Error naming `path` when the length field is bad or
/// points past `file_size`.
[[nodiscard]] SLUICE_API std::uint64_t header_extent(TensorFormat format,
                                                     std::span<const std::byte> prefix,
                                                     std::uint64_t file_size,
                                                     const std::string& path);

/// Which format the first bytes say: .npy starts with "\x93NUMPY", anything else is taken as
/// safetensors (whose parser then judges it).
[[nodiscard]] SLUICE_API TensorFormat detect_format(std::span<const std::byte> prefix) noexcept;

/// Parses a header. `header` holds the first bytes of the file, at least header_extent() of them;
/// `file_size` is the size of the whole file, against which every byte range is checked.
/// `npy_name` names the one tensor of an .npy file. Throws an Error (domain data) naming `path`
/// and the field on anything the format does not allow.
[[nodiscard]] SLUICE_API TensorFileLayout parse_safetensors(std::span<const std::byte> header,
                                                            std::uint64_t file_size,
                                                            const std::string& path);
[[nodiscard]] SLUICE_API TensorFileLayout parse_npy(std::span<const std::byte> header,
                                                    std::uint64_t file_size,
                                                    const std::string& path,
                                                    const std::string& npy_name);

/// Reads and parses the header of an open file (format by its first bytes; an .npy tensor is
/// named after the file).
[[nodiscard]] SLUICE_API TensorFileLayout read_layout(const File& file);

}  // namespace formats
}  // namespace sluice
