// The .idx of a Megatron/NeMo indexed dataset (megatron/core/datasets/indexed_dataset.py,
// _IndexWriter): "MMIDIDX\0\0", u64 version (1), u8 dtype code, u64 sequence count N, u64
// document count D, then N int32 sequence lengths (tokens), N int64 byte pointers into the .bin,
// D int64 document indices, all little endian, and nothing after them.
//
// Nothing is trusted: the counts must give exactly the file's size (so no count can make us
// allocate more than the file holds), every sequence must lie inside the .bin and after the one
// before it, and the document indices must climb within [0, N].
#include <cstring>

#include <fmt/format.h>

#include "../formats/checked.hpp"
#include "dataset_parts.hpp"

namespace sluice::ingest {
namespace {

using formats::detail::bad_file;
using formats::detail::load_le;

constexpr std::string_view megatron_idx_op = "megatron";
constexpr char magic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};

struct Counts {
  std::uint64_t sequences = 0;
  std::uint64_t documents = 0;
};

// The header: magic, version, dtype; the counts, checked against the file's size.
Counts parse_header(std::span<const std::byte> idx, MegatronIndex& out, const std::string& path) {
  if (idx.size() < megatron_header_bytes) {
    bad_file(megatron_idx_op, path, fmt::format("the index is {} bytes, shorter than its {}-byte header: truncated",
                                   idx.size(), megatron_header_bytes));
  }
  if (std::memcmp(idx.data(), magic, sizeof magic) != 0) {
    bad_file(megatron_idx_op, path, "header field 'magic' is not MMIDIDX\\x00\\x00: not a Megatron/NeMo index");
  }
  const std::byte* p = idx.data();
  if (const auto version = load_le(p + 9, 8); version != 1) {
    bad_file(megatron_idx_op, path, fmt::format("header field 'version' is {}; only version 1 is supported", version));
  }
  const auto code = static_cast<std::uint8_t>(p[17]);
  const auto dtype = megatron_dtype(code);
  if (!dtype) {
    bad_file(megatron_idx_op, path, fmt::format("header field 'dtype' has the unknown code {} (known: 1 u8, 2 i8, 3 i16, "
                                   "4 i32, 5 i64, 6 f64, 7 f32, 8 u16)", code));
  }
  out.dtype = *dtype;
  out.token_bytes = element_bits(*dtype) / 8;
  Counts c{load_le(p + 18, 8), load_le(p + 26, 8)};
  // 34 + 12 N + 8 D, without wrapping.
  using formats::detail::add;
  using formats::detail::mul;
  const auto seq_bytes = mul(c.sequences, 12);
  const auto doc_bytes = mul(c.documents, 8);
  const auto body = seq_bytes && doc_bytes ? add(*seq_bytes, *doc_bytes) : std::nullopt;
  const auto total = body ? add(*body, megatron_header_bytes) : std::nullopt;
  if (!total || *total != idx.size()) {
    const std::string need = total ? fmt::format("{} bytes", *total) : std::string("more than 2^64 bytes");
    bad_file(megatron_idx_op, path, fmt::format("header fields 'sequence_count' ({}) and 'document_count' ({}) need an index "
                                   "of {} but the file has {} bytes{}", c.sequences, c.documents, need, idx.size(),
                                   total && *total > idx.size() ? ": truncated" : ""));
  }
  return c;
}

// Lengths and pointers: each sequence inside the .bin, after the end of the one before it.
void parse_sequences(std::span<const std::byte> idx, std::uint64_t n, std::uint64_t bin_size,
                     MegatronIndex& out, const std::string& idx_path, const std::string& bin_path) {
  const std::byte* lengths = idx.data() + megatron_header_bytes;
  const std::byte* pointers = lengths + 4 * n;
  out.cumulative.resize(n + 1);
  out.pointers.resize(n);
  out.cumulative[0] = 0;
  std::uint64_t previous_end = 0;
  for (std::uint64_t i = 0; i < n; ++i) {
    const auto length = static_cast<std::int32_t>(static_cast<std::uint32_t>(load_le(lengths + 4 * i, 4)));
    const auto pointer = static_cast<std::int64_t>(load_le(pointers + 8 * i, 8));
    if (length < 0) {
      bad_file(megatron_idx_op, idx_path, fmt::format("field 'sequence_lengths[{}]' is {}, negative", i, length));
    }
    if (pointer < 0) {
      bad_file(megatron_idx_op, idx_path, fmt::format("field 'sequence_pointers[{}]' is {}, negative", i, pointer));
    }
    const auto start = static_cast<std::uint64_t>(pointer);
    // length < 2^31 and token_bytes <= 8: bytes fits; start < 2^63: end fits.
    const std::uint64_t bytes = static_cast<std::uint64_t>(length) * out.token_bytes;
    const std::uint64_t end = start + bytes;
    if (end > bin_size) {
      bad_file(megatron_idx_op, bin_path, fmt::format("sequence {} ('{}' fields 'sequence_pointers[{}]' {} and "
                                         "'sequence_lengths[{}]' {} x {} bytes) ends at byte {}, past the end of "
                                         "the file ({} bytes): truncated .bin, or not this index's",
                                         i, idx_path, i, start, i, length, out.token_bytes, end, bin_size));
    }
    if (start < previous_end) {
      bad_file(megatron_idx_op, idx_path, fmt::format("field 'sequence_pointers[{}]' is {}, inside sequence {} (which ends at "
                                         "byte {}): pointers must climb", i, start, i - 1, previous_end));
    }
    previous_end = end;
    out.pointers[i] = start;
    out.cumulative[i + 1] = out.cumulative[i] + static_cast<std::uint64_t>(length);
  }
}

void check_documents(std::span<const std::byte> idx, std::uint64_t n, std::uint64_t d, const std::string& path) {
  const std::byte* docs = idx.data() + megatron_header_bytes + 12 * n;
  std::int64_t previous = 0;
  for (std::uint64_t j = 0; j < d; ++j) {
    const auto v = static_cast<std::int64_t>(load_le(docs + 8 * j, 8));
    if (v < 0 || static_cast<std::uint64_t>(v) > n) {
      bad_file(megatron_idx_op, path, fmt::format("field 'document_indices[{}]' is {}, outside 0..{} (the sequence count)",
                                     j, v, n));
    }
    if (v < previous) {
      bad_file(megatron_idx_op, path, fmt::format("field 'document_indices[{}]' is {}, less than 'document_indices[{}]' {}: "
                                     "document indices must not decrease", j, v, j - 1, previous));
    }
    previous = v;
  }
}

}  // namespace

std::optional<DType> megatron_dtype(std::uint8_t code) noexcept {
  switch (code) {
    case 1: return DType::u8;
    case 2: return DType::i8;
    case 3: return DType::i16;
    case 4: return DType::i32;
    case 5: return DType::i64;
    case 6: return DType::f64;
    case 7: return DType::f32;
    case 8: return DType::u16;
    default: return std::nullopt;
  }
}

MegatronIndex parse_megatron_index(std::span<const std::byte> idx, std::uint64_t bin_size,
                                   const std::string& idx_path, const std::string& bin_path) {
  MegatronIndex out;
  const Counts c = parse_header(idx, out, idx_path);
  out.documents = c.documents;
  parse_sequences(idx, c.sequences, bin_size, out, idx_path, bin_path);
  check_documents(idx, c.sequences, c.documents, idx_path);
  return out;
}

}  // namespace sluice::ingest
