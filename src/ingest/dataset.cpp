// Dataset::open: which format the paths are in, the options each format needs, and what the
// formats share (the fingerprint, names for messages). The formats themselves are in
// megatron.cpp, webdataset.cpp and npy_shards.cpp.
#include <fmt/format.h>

// Inlined (header-only): libsluice needs no libxxhash at run time (as src/load/loader.cpp).
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "dataset_parts.hpp"
#include "sluice/error.hpp"
#include "sluice/remote.hpp"

namespace sluice {

std::string_view to_string(DatasetFormat f) noexcept {
  switch (f) {
    case DatasetFormat::megatron: return "megatron";
    case DatasetFormat::webdataset: return "wds";
    case DatasetFormat::npy: return "npy";
  }
  return "megatron";
}

std::optional<DatasetFormat> parse_dataset_format(std::string_view name) noexcept {
  if (name == "megatron") return DatasetFormat::megatron;
  if (name == "wds" || name == "webdataset") return DatasetFormat::webdataset;
  if (name == "npy") return DatasetFormat::npy;
  return std::nullopt;
}

namespace {

const ErrorContext open_context{.op = "dataset"};
// Far beyond any context length; keeps (L + 1) x token bytes far from wrapping.
constexpr std::uint64_t max_seq_len = std::uint64_t{1} << 40;

DatasetFormat format_of_path(const std::string& path) {
  if (path.ends_with(".tar")) return DatasetFormat::webdataset;
  if (path.ends_with(".npy")) return DatasetFormat::npy;
  return DatasetFormat::megatron;
}

// The format the options name, or the one every path's name tells.
DatasetFormat decide_format(std::span<const std::string> paths, const DatasetOptions& options) {
  if (options.format) return *options.format;
  const DatasetFormat first = format_of_path(paths[0]);
  for (const std::string& p : paths) {
    if (const DatasetFormat f = format_of_path(p); f != first) {
      throw_usage_error(open_context,
                        fmt::format("'{}' looks like {} but '{}' like {}: give the format, or paths of one format",
                                    paths[0], to_string(first), p, to_string(f)));
    }
  }
  return first;
}

}  // namespace

std::shared_ptr<const Dataset> Dataset::open(std::span<const std::string> paths, const DatasetOptions& options) {
  if (paths.empty()) throw_usage_error(open_context, "no paths given");
  for (const std::string& p : paths) {
    // Said here, before a format opener reports a URL as a missing local file.
    if (is_remote_url(p)) {
      throw_usage_error({.op = "dataset", .path = p},
                        "datasets are read from local files only: ingesting a URL is not supported yet "
                        "(docs/remote.md); copy the shards to local storage");
    }
  }
  const DatasetFormat format = decide_format(paths, options);
  if (format == DatasetFormat::megatron && options.seq_len == 0) {
    throw_usage_error(open_context, "a megatron dataset needs seq_len (--seq-len L) larger than 0");
  }
  if (options.seq_len > max_seq_len) {
    throw_usage_error(open_context, fmt::format("seq_len {} is larger than {}", options.seq_len, max_seq_len));
  }
  if (format != DatasetFormat::megatron && options.seq_len != 0) {
    throw_usage_error(open_context, fmt::format("seq_len applies to megatron datasets only, not to {}",
                                                to_string(format)));
  }
  switch (format) {
    case DatasetFormat::megatron: return ingest::open_megatron(paths, options.seq_len);
    case DatasetFormat::webdataset: return ingest::open_webdataset(paths);
    case DatasetFormat::npy: return ingest::open_npy_shards(paths);
  }
  throw_usage_error(open_context, "unknown dataset format");
}

void Dataset::fields(std::uint64_t /*k*/, std::vector<std::string>& /*out*/) const {}

namespace ingest {

FingerprintBuilder::FingerprintBuilder(DatasetFormat format, std::uint64_t seq_len) {
  add("sluice-dataset-fingerprint-1");
  add(to_string(format));
  add(seq_len);
}

void FingerprintBuilder::add(std::uint64_t v) {
  for (int i = 0; i < 8; ++i) bytes_.push_back(static_cast<char>(v >> (8 * i)));
}

void FingerprintBuilder::add(std::string_view text) {
  add(static_cast<std::uint64_t>(text.size()));
  bytes_.append(text);
}

void FingerprintBuilder::add_file(const std::string& path, std::uint64_t size) {
  add(base_name(path));
  add(size);
}

std::uint64_t FingerprintBuilder::digest() const noexcept { return XXH3_64bits(bytes_.data(), bytes_.size()); }

std::uint64_t xxh3(std::span<const std::byte> bytes) noexcept { return XXH3_64bits(bytes.data(), bytes.size()); }

std::string base_name(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string grouped(std::uint64_t v) {
  std::string digits = std::to_string(v);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

void throw_no_sample(std::uint64_t k, std::uint64_t size) {
  throw_usage_error({.op = "dataset"}, fmt::format("sample {} is out of range: the dataset has {}", k, size));
}

const File& DatasetBase::file(std::size_t index) const {
  if (index >= files_.size()) {
    throw_usage_error({.op = "dataset"}, fmt::format("file {} is out of range: the dataset has {}", index,
                                                     files_.size()));
  }
  return files_[index];
}

}  // namespace ingest
}  // namespace sluice
