// .npy shards: one or more arrays of one dtype and one row shape (every dimension after the
// first), in C order; sample k is row k of their concatenation in the order given. Each header
// is read and checked by the .npy parser of src/formats/ (which also makes the data fill the
// file exactly), then the shards are checked against the first.
#include <algorithm>
#include <cstring>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "../formats/checked.hpp"
#include "dataset_parts.hpp"
#include "sluice/formats.hpp"
#include "sluice/transfer.hpp"
#include "sluice/units.hpp"

namespace sluice::ingest {
namespace {

using formats::detail::bad_file;

constexpr std::string_view shard_op = "npy";

struct Shard {
  std::uint64_t data_offset = 0;
  std::uint64_t first_row = 0;  // of the dataset
};

std::string shape_text(std::span<const std::uint64_t> shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

// The header of one shard, with what a shard needs beyond a valid .npy: a tensor dtype, C order,
// rows.
TensorInfo read_shard_header(const File& file) {
  std::byte magic[6] = {};
  const auto got = read(file, magic, sizeof magic, 0).bytes;
  if (got < sizeof magic || std::memcmp(magic, "\x93NUMPY", 6) != 0) {
    bad_file(shard_op, file.path(), "field 'magic' is not \\x93NUMPY: not an .npy file");
  }
  TensorInfo t = formats::read_layout(file).tensors.at(0);
  if (t.dtype == DType::raw) {
    bad_file(shard_op, file.path(), fmt::format("header field 'descr' '{}' has no tensor dtype (strings, void, datetime "
                                          "and big-endian types are not supported in shards)", t.raw_dtype));
  }
  if (t.shape.empty()) bad_file(shard_op, file.path(), "header field 'shape' is () (a scalar): a shard needs rows");
  if (t.fortran_order && t.shape.size() > 1) {
    bad_file(shard_op, file.path(), "header field 'fortran_order' is True: Fortran-order shards are not supported "
                              "(a row's bytes are not contiguous); save np.ascontiguousarray(a) instead");
  }
  return t;
}

class NpyShardsDataset final : public DatasetBase {
 public:
  explicit NpyShardsDataset(std::span<const std::string> paths) {
    FingerprintBuilder fp(DatasetFormat::npy, 0);
    for (const std::string& path : paths) open_shard(path, fp);
    fingerprint_ = fp.digest();
  }

  [[nodiscard]] DatasetFormat format() const noexcept override { return DatasetFormat::npy; }
  [[nodiscard]] std::uint64_t size() const noexcept override { return rows_; }
  [[nodiscard]] std::uint64_t sample_bytes(std::uint64_t k) const override {
    if (k >= rows_) throw_no_sample(k, rows_);
    return row_bytes_;
  }
  void extents(std::uint64_t k, std::vector<SampleExtent>& out) const override {
    if (k >= rows_) throw_no_sample(k, rows_);
    // The last shard whose first row is at or before k (shards without rows are passed over).
    const auto it = std::upper_bound(shards_.begin(), shards_.end(), k,
                                     [](std::uint64_t row, const Shard& s) { return row < s.first_row; });
    const auto index = static_cast<std::size_t>(it - shards_.begin() - 1);
    const Shard& s = shards_[index];
    out.push_back({static_cast<std::uint32_t>(index), s.data_offset + (k - s.first_row) * row_bytes_, row_bytes_});
  }
  [[nodiscard]] std::string sample_id(std::uint64_t k) const override {
    if (k >= rows_) throw_no_sample(k, rows_);
    return std::to_string(k);
  }
  [[nodiscard]] std::optional<SampleShape> sample_shape() const override { return SampleShape{dtype_, row_shape_}; }
  [[nodiscard]] std::string describe() const override {
    return fmt::format("npy: {} shard{}, {} rows of {} {}, {}", grouped(shards_.size()), shards_.size() == 1 ? "" : "s",
                       grouped(rows_), to_string(dtype_), shape_text(row_shape_), format_size(rows_ * row_bytes_));
  }

 private:
  void open_shard(const std::string& path, FingerprintBuilder& fp) {
    File file = File::open(path, OpenMode::read);
    const TensorInfo t = read_shard_header(file);
    const std::vector<std::uint64_t> row_shape(t.shape.begin() + 1, t.shape.end());
    const std::string descr = dtype_text(t, TensorFormat::npy);
    if (shards_.empty()) {
      dtype_ = t.dtype;
      row_shape_ = row_shape;
      first_path_ = path;
      row_bytes_ = t.shape[0] == 0 ? row_bytes_of(t, row_shape, path) : t.bytes / t.shape[0];
      if (row_bytes_ == 0) bad_file(shard_op, path, fmt::format("header field 'shape' {} has rows of 0 bytes",
                                                          shape_text(t.shape)));
    } else if (t.dtype != dtype_) {
      bad_file(shard_op, path, fmt::format("header field 'descr' is '{}' but the first shard '{}' has '{}': shards must "
                                     "share one dtype", descr, first_path_, numpy_name(dtype_)));
    } else if (row_shape != row_shape_) {
      bad_file(shard_op, path, fmt::format("header field 'shape' {} has rows of {} but the first shard '{}' has rows of "
                                     "{}: shards must share one row shape", shape_text(t.shape),
                                     shape_text(row_shape), first_path_, shape_text(row_shape_)));
    }
    fp.add_file(path, file.size());
    fp.add(descr);
    fp.add(t.offset);
    for (const std::uint64_t d : t.shape) fp.add(d);
    shards_.push_back({t.offset, rows_});
    rows_ += t.shape[0];
    files_.push_back(std::move(file));
  }

  // Bytes of a row when the first shard has none to divide by.
  static std::uint64_t row_bytes_of(const TensorInfo& t, std::span<const std::uint64_t> row_shape,
                                    const std::string& path) {
    std::uint64_t bytes = t.element_bits / 8;
    for (const std::uint64_t d : row_shape) {
      const auto b = formats::detail::mul(bytes, d);
      if (!b) bad_file(shard_op, path, "header field 'shape': a row's byte size overflows 64 bits");
      bytes = *b;
    }
    return bytes;
  }

  std::vector<Shard> shards_;
  std::string first_path_;
  DType dtype_ = DType::u8;
  std::vector<std::uint64_t> row_shape_;
  std::uint64_t row_bytes_ = 0;
  std::uint64_t rows_ = 0;
};

}  // namespace

std::shared_ptr<const Dataset> open_npy_shards(std::span<const std::string> paths) {
  return std::make_shared<const NpyShardsDataset>(paths);
}

}  // namespace sluice::ingest
