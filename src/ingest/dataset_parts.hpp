// What the Dataset formats share inside the library: the index parsers (pure functions over
// bytes, so the fuzz targets in tests/fuzz/ can drive them without files), the openers each
// format's file defines, a base class holding the files and the fingerprint, and small helpers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/dtype.hpp"
#include "sluice/ingest.hpp"

namespace sluice::ingest {

// --- Megatron/NeMo indexed datasets (megatron_index.cpp) ---

/// Bytes of an .idx header: magic (9), version (8), dtype code (1), sequence and document
/// counts (8 each).
inline constexpr std::size_t megatron_header_bytes = 34;

/// The DType of a Megatron dtype code (1 u8, 2 i8, 3 i16, 4 i32, 5 i64, 6 f64, 7 f32, 8 u16).
[[nodiscard]] std::optional<DType> megatron_dtype(std::uint8_t code) noexcept;

/// What an .idx says, checked against itself and against the size of its .bin.
struct MegatronIndex {
  DType dtype = DType::u16;
  std::uint32_t token_bytes = 2;
  std::uint64_t documents = 0;                ///< document_count as stored (entries, not documents)
  std::vector<std::uint64_t> cumulative;      ///< sequences + 1 entries: tokens before sequence i
  std::vector<std::uint64_t> pointers;        ///< byte offset of sequence i in the .bin
  [[nodiscard]] std::uint64_t sequences() const noexcept { return pointers.size(); }
  [[nodiscard]] std::uint64_t tokens() const noexcept { return cumulative.back(); }
};

/// Parses a whole .idx file. Throws an Error (domain data) naming the file (`idx_path`, or
/// `bin_path` for a sequence past the end of the .bin) and the field.
[[nodiscard]] MegatronIndex parse_megatron_index(std::span<const std::byte> idx, std::uint64_t bin_size,
                                                 const std::string& idx_path, const std::string& bin_path);

// --- tar archives (tar_index.cpp) ---

/// A regular file of a tar archive: its name (pax path or GNU long name applied) and the byte
/// range of its contents.
struct TarMember {
  std::string name;
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
};

/// Up to `size` bytes of the archive at `offset` (fewer only at its end), valid until the next
/// call.
using TarBytesAt = std::function<std::span<const std::byte>(std::uint64_t offset, std::size_t size)>;

/// Largest pax extended header or GNU long name accepted: bounds what a header makes us read.
inline constexpr std::uint64_t tar_max_meta_bytes = 1 << 20;

/// The regular files of a ustar/GNU/pax archive of `file_size` bytes, in archive order;
/// directories, links, devices and pax global headers skipped. Throws an Error (domain data)
/// naming `path`, the header's byte offset and the field (chksum, size, typeflag, pax record).
[[nodiscard]] std::vector<TarMember> scan_tar(std::uint64_t file_size, const TarBytesAt& bytes_at,
                                              const std::string& path);

/// A member name split for WebDataset: key = the path up to the first dot of its last
/// component, field = the rest after that dot ("a/b.c.jpg" -> "a/b", "c.jpg"; no dot: the whole
/// name and "").
struct KeyField {
  std::string_view key;
  std::string_view field;
};
[[nodiscard]] KeyField split_member_name(std::string_view name) noexcept;

// --- the datasets (one file each) ---

[[nodiscard]] std::shared_ptr<const Dataset> open_megatron(std::span<const std::string> paths,
                                                           std::uint64_t seq_len);
[[nodiscard]] std::shared_ptr<const Dataset> open_webdataset(std::span<const std::string> paths);
[[nodiscard]] std::shared_ptr<const Dataset> open_npy_shards(std::span<const std::string> paths);

/// The bytes a fingerprint covers, hashed at the end (XXH3-64): everything that decides the
/// samples, each piece length-prefixed so that no two inputs run together.
class FingerprintBuilder {
 public:
  explicit FingerprintBuilder(DatasetFormat format, std::uint64_t seq_len);
  void add(std::uint64_t v);
  void add(std::string_view text);
  /// A file: its base name and size.
  void add_file(const std::string& path, std::uint64_t size);
  [[nodiscard]] std::uint64_t digest() const noexcept;

 private:
  std::string bytes_;
};

/// XXH3-64 (seed 0) of `bytes`.
[[nodiscard]] std::uint64_t xxh3(std::span<const std::byte> bytes) noexcept;

/// The part of `path` after its last '/'.
[[nodiscard]] std::string base_name(const std::string& path);
/// 1234567 -> "1,234,567", for describe().
[[nodiscard]] std::string grouped(std::uint64_t v);
/// The usage Error of a sample index out of range.
[[noreturn]] void throw_no_sample(std::uint64_t k, std::uint64_t size);

/// What every format keeps: its files, in the order the extents number them, and the
/// fingerprint computed at open.
class DatasetBase : public Dataset {
 public:
  [[nodiscard]] std::size_t file_count() const noexcept override { return files_.size(); }
  [[nodiscard]] const File& file(std::size_t index) const override;
  [[nodiscard]] std::uint64_t fingerprint() const noexcept override { return fingerprint_; }

 protected:
  std::vector<File> files_;
  std::uint64_t fingerprint_ = 0;
};

}  // namespace sluice::ingest
