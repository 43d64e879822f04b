// Megatron/NeMo indexed datasets as fixed-length samples: the tokens of every sequence, in index
// order and prefix after prefix, form one stream T, and sample k is T[k*L .. k*L + L] (L + 1
// tokens: inputs and the labels shifted by one), so consecutive samples share one token.
// A sample's bytes are the pieces of the sequences it spans, found by binary search over the
// cumulative token counts; pieces that lie back to back in a .bin (the usual layout, which
// Megatron's writer produces) are one extent.
//
// Files: the dataset's file i is prefix i's .bin; the .idx is read whole at open, checked
// (megatron_index.cpp), hashed into the fingerprint and kept as cumulative counts and pointers
// (16 bytes a sequence).
#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "../formats/checked.hpp"
#include "dataset_parts.hpp"
#include "sluice/transfer.hpp"
#include "sluice/units.hpp"

namespace sluice::ingest {
namespace {

using formats::detail::bad_file;

constexpr std::string_view megatron_op = "megatron";

struct Prefix {
  std::string name;
  MegatronIndex index;
  std::uint64_t first_token = 0;  // of the stream
};

// PREFIX, PREFIX.bin and PREFIX.idx all name PREFIX.
std::string prefix_of(const std::string& path) {
  if (path.ends_with(".bin") || path.ends_with(".idx")) return path.substr(0, path.size() - 4);
  return path;
}

std::vector<std::byte> read_whole(const File& file) {
  const std::uint64_t size = file.size();
  std::vector<std::byte> bytes(static_cast<std::size_t>(size));
  const auto got = read(file, bytes.data(), size, 0).bytes;
  if (got != size) {
    bad_file(megatron_op, file.path(), fmt::format("the file shrank while read ({} of {} bytes)", got, size));
  }
  return bytes;
}

class MegatronDataset final : public DatasetBase {
 public:
  MegatronDataset(std::span<const std::string> paths, std::uint64_t seq_len) : seq_len_(seq_len) {
    FingerprintBuilder fp(DatasetFormat::megatron, seq_len);
    for (const std::string& path : paths) open_prefix(prefix_of(path), fp);
    fingerprint_ = fp.digest();
    samples_ = tokens_ >= 1 ? (tokens_ - 1) / seq_len_ : 0;
  }

  [[nodiscard]] DatasetFormat format() const noexcept override { return DatasetFormat::megatron; }
  [[nodiscard]] std::uint64_t size() const noexcept override { return samples_; }
  [[nodiscard]] std::uint64_t sample_bytes(std::uint64_t k) const override {
    if (k >= samples_) throw_no_sample(k, samples_);
    return (seq_len_ + 1) * token_bytes_;
  }
  void extents(std::uint64_t k, std::vector<SampleExtent>& out) const override;
  [[nodiscard]] std::string sample_id(std::uint64_t k) const override {
    if (k >= samples_) throw_no_sample(k, samples_);
    return std::to_string(k);
  }
  [[nodiscard]] std::optional<SampleShape> sample_shape() const override {
    return SampleShape{dtype_, {seq_len_ + 1}};
  }
  [[nodiscard]] std::string describe() const override;

 private:
  void open_prefix(const std::string& prefix, FingerprintBuilder& fp) {
    File bin = File::open(prefix + ".bin", OpenMode::read);
    const File idx = File::open(prefix + ".idx", OpenMode::read);
    const std::vector<std::byte> idx_bytes = read_whole(idx);
    const std::uint64_t bin_size = bin.size();
    MegatronIndex index = parse_megatron_index(idx_bytes, bin_size, idx.path(), bin.path());
    if (!prefixes_.empty() && index.dtype != dtype_) {
      bad_file(megatron_op, idx.path(), fmt::format("header field 'dtype' is {} but '{}.idx' has {}: the prefixes of one "
                                           "dataset must share a token type", to_string(index.dtype),
                                           prefixes_[0].name, to_string(dtype_)));
    }
    dtype_ = index.dtype;
    token_bytes_ = index.token_bytes;
    fp.add_file(bin.path(), bin_size);
    fp.add_file(idx.path(), idx_bytes.size());
    fp.add(xxh3(idx_bytes));
    sequences_ += index.sequences();
    const std::uint64_t first = tokens_;
    tokens_ += index.tokens();
    prefixes_.push_back({prefix, std::move(index), first});
    files_.push_back(std::move(bin));
  }

  std::vector<Prefix> prefixes_;
  std::uint64_t seq_len_;
  DType dtype_ = DType::u16;
  std::uint32_t token_bytes_ = 2;
  std::uint64_t sequences_ = 0;
  std::uint64_t tokens_ = 0;
  std::uint64_t samples_ = 0;
};

void MegatronDataset::extents(std::uint64_t k, std::vector<SampleExtent>& out) const {
  if (k >= samples_) throw_no_sample(k, samples_);
  std::uint64_t token = k * seq_len_;  // k < (tokens - 1) / L: no wrap
  std::uint64_t left = seq_len_ + 1;
  // The last prefix starting at or before `token`, then its sequence holding `token`.
  auto p = static_cast<std::size_t>(
      std::upper_bound(prefixes_.begin(), prefixes_.end(), token,
                       [](std::uint64_t t, const Prefix& x) { return t < x.first_token; }) - prefixes_.begin() - 1);
  bool first_piece = true;
  std::size_t seq = 0;
  while (left > 0) {
    const MegatronIndex& ix = prefixes_[p].index;
    const std::uint64_t local = token - prefixes_[p].first_token;
    if (local >= ix.tokens()) {  // past this prefix (or an empty one): the next
      ++p;
      first_piece = true;
      continue;
    }
    if (first_piece) {
      seq = static_cast<std::size_t>(std::upper_bound(ix.cumulative.begin(), ix.cumulative.end(), local) -
                                     ix.cumulative.begin() - 1);
      first_piece = false;
    }
    while (ix.cumulative[seq + 1] <= local) ++seq;  // skip empty sequences
    const std::uint64_t take = std::min(left, ix.cumulative[seq + 1] - local);
    const SampleExtent piece{static_cast<std::uint32_t>(p), ix.pointers[seq] + (local - ix.cumulative[seq]) * token_bytes_,
                             take * token_bytes_};
    if (!out.empty() && out.back().file == piece.file && out.back().offset + out.back().size == piece.offset) {
      out.back().size += piece.size;
    } else {
      out.push_back(piece);
    }
    token += take;
    left -= take;
  }
}

std::string MegatronDataset::describe() const {
  return fmt::format("megatron: {} prefix{}, {} sequences, {} of {} tokens, {} samples of {} tokens",
                     grouped(prefixes_.size()), prefixes_.size() == 1 ? "" : "es", grouped(sequences_),
                     format_size(tokens_ * token_bytes_), to_string(dtype_), grouped(samples_), seq_len_ + 1);
}

}  // namespace

std::shared_ptr<const Dataset> open_megatron(std::span<const std::string> paths, std::uint64_t seq_len) {
  return std::make_shared<const MegatronDataset>(paths, seq_len);
}

}  // namespace sluice::ingest
