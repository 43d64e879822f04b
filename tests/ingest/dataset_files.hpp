// Test datasets for the ingest tests, written independently of the parsers under test:
// Megatron/NeMo indexed datasets byte by byte after Megatron's _IndexWriter, .npy shards with a
// hand-written v1.0 header, and WebDataset tar shards by Python's tarfile (or GNU tar), so the
// tar parser is never checked against a writer of its own. Each writer also says what the
// samples are (the token stream, the rows, the members) for the expectations.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace sluice::test {

// --- Megatron ---

/// Bytes per token of a Megatron dtype code (1 u8, 2 i8, 3 i16, 4 i32, 5 i64, 6 f64, 7 f32,
/// 8 u16), from the format's table, not the library's.
[[nodiscard]] std::size_t megatron_token_bytes(std::uint8_t dtype_code);
/// Token `value` as the dtype's little-endian bytes (floats hold the value converted).
[[nodiscard]] std::vector<std::byte> megatron_token(std::uint8_t dtype_code, std::int64_t value);

/// An .idx: magic, version, dtype code, counts, lengths, pointers, document indices, as given.
[[nodiscard]] std::vector<std::byte> megatron_idx_bytes(std::uint64_t version, std::uint8_t dtype_code,
                                                        const std::vector<std::int32_t>& lengths,
                                                        const std::vector<std::int64_t>& pointers,
                                                        const std::vector<std::int64_t>& documents);

struct MegatronWritten {
  std::vector<std::byte> bin;
  std::vector<std::byte> idx;
  /// The token stream of this prefix (every sequence, in order) as stored bytes.
  std::vector<std::byte> stream;
};

/// Writes PREFIX.bin and PREFIX.idx: the sequences in order, `gap` filler bytes (0xEE) before
/// each sequence after the first (0: back to back, as Megatron writes), one document per
/// sequence (document indices 0..N).
MegatronWritten write_megatron(const std::string& prefix, std::uint8_t dtype_code,
                               const std::vector<std::vector<std::int64_t>>& sequences, std::size_t gap = 0);

// --- .npy ---

/// Writes a version 1.0 .npy: {'descr': descr, 'fortran_order': ..., 'shape': shape} then
/// `data` as given (the caller makes it match the shape).
void write_npy_shard(const std::string& path, const std::string& descr, const std::vector<std::uint64_t>& shape,
                     const std::vector<std::byte>& data, bool fortran_order = false);

// --- WebDataset tar shards ---

/// A tar member: `name` and contents; a name ending in '/' is a directory entry.
struct TarEntry {
  std::string name;
  std::vector<std::byte> contents;
};

enum class TarFlavor { pax, gnu, ustar };

/// A WebDataset sample: a key and its fields ("jpg", "cls") in tar order.
struct WdsSample {
  std::string key;
  std::vector<std::pair<std::string, std::vector<std::byte>>> fields;
};

/// Whether Python's tarfile can be run here (/usr/bin/python3).
[[nodiscard]] bool have_python_tarfile();
/// Writes `entries` in order as a tar archive with Python's tarfile (pax is its default
/// format: long names go into pax records; gnu: into 'L' blocks; ustar: into the prefix field).
void write_tar(const std::string& path, const std::vector<TarEntry>& entries, TarFlavor flavor = TarFlavor::pax);
/// Writes the samples as a shard: member KEY.FIELD for each field, samples in order.
void write_wds_shard(const std::string& path, const std::vector<WdsSample>& samples,
                     TarFlavor flavor = TarFlavor::pax);
/// The members of the samples as write_wds_shard writes them.
[[nodiscard]] std::vector<TarEntry> wds_entries(const std::vector<WdsSample>& samples);
/// A sample's bytes: its fields' contents concatenated in tar order.
[[nodiscard]] std::vector<std::byte> wds_sample_bytes(const WdsSample& sample);

/// Recomputes the checksum of the tar header at `offset` of `archive` after a test changed it
/// (the unsigned byte sum with the field taken as spaces, written as six octal digits, NUL, space).
void fix_tar_checksum(std::vector<std::byte>& archive, std::size_t offset);

}  // namespace sluice::test
