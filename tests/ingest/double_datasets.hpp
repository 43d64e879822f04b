// Test doubles of Dataset over files the tests write: the Loader's tests need samples at known
// offsets, not the real formats (tests/ingest/dataset_files.hpp writes those).
//   FixedDataset: n samples of `bytes` bytes, sample k at head + k * stride of one raw file
//     (stride < bytes: neighbours overlap, like Megatron samples sharing a token), each sample
//     optionally cut into two extents.
//   VarDataset: WebDataset-like: samples of members (field, size) laid out as in a tar (a
//     512-byte header before each member, members padded to 512), over several files.
#pragma once

#include <xxhash.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "sluice/file.hpp"
#include "sluice/ingest.hpp"
#include "support/test_util.hpp"

namespace sluice::test {

class FixedDataset : public Dataset {
 public:
  FixedDataset(const std::string& path, std::uint64_t n, std::uint64_t bytes, std::uint64_t stride,
               std::uint64_t head, bool two_extents, std::uint64_t seed = 1)
      : n_(n), bytes_(bytes), stride_(stride), head_(head), two_(two_extents) {
    const std::uint64_t size = n == 0 ? head : head + (n - 1) * stride + bytes;
    test::write_file(path, test::random_bytes(static_cast<std::size_t>(size), seed));
    file_ = File::open(path, OpenMode::read);
    fp_ = XXH3_64bits_withSeed(&size, sizeof size, n * 1000003 + bytes * 31 + stride + head);
  }
  [[nodiscard]] DatasetFormat format() const noexcept override { return DatasetFormat::npy; }
  [[nodiscard]] std::uint64_t size() const noexcept override { return n_; }
  [[nodiscard]] std::uint64_t sample_bytes(std::uint64_t) const override { return bytes_; }
  void extents(std::uint64_t k, std::vector<SampleExtent>& out) const override {
    const std::uint64_t at = head_ + k * stride_;
    if (two_ && bytes_ > 1) {
      out.push_back({0, at, bytes_ / 2});
      out.push_back({0, at + bytes_ / 2, bytes_ - bytes_ / 2});
    } else {
      out.push_back({0, at, bytes_});
    }
  }
  [[nodiscard]] std::string sample_id(std::uint64_t k) const override { return std::to_string(k); }
  [[nodiscard]] std::optional<SampleShape> sample_shape() const override { return SampleShape{DType::u8, {bytes_}}; }
  [[nodiscard]] std::size_t file_count() const noexcept override { return 1; }
  [[nodiscard]] const File& file(std::size_t) const override { return file_; }
  [[nodiscard]] std::uint64_t fingerprint() const noexcept override { return fp_; }
  [[nodiscard]] std::string describe() const override { return fmt::format("fixed: {} samples of {} bytes", n_, bytes_); }
  /// The sample's bytes, read with pread: the independent reading.
  [[nodiscard]] std::vector<std::byte> bytes_of(std::uint64_t k) const {
    return test::pread_file(file_.path(), head_ + k * stride_, bytes_);
  }

 private:
  std::uint64_t n_, bytes_, stride_, head_;
  bool two_;
  File file_;
  std::uint64_t fp_ = 0;
};

class VarDataset : public Dataset {
 public:
  struct Member {
    std::string field;
    std::uint64_t size;
  };
  using Sample = std::vector<Member>;

  /// Samples spread over `shards` files (sample k in shard k % shards).
  VarDataset(const std::string& dir, const std::vector<Sample>& samples, std::size_t shards)
      : samples_(samples) {
    std::vector<std::uint64_t> end(shards, 0);
    for (std::size_t k = 0; k < samples.size(); ++k) {
      const std::size_t s = k % shards;
      Placed p{static_cast<std::uint32_t>(s), {}};
      for (const Member& m : samples[k]) {
        end[s] += 512;  // the member's header
        p.at.push_back(end[s]);
        end[s] += (m.size + 511) / 512 * 512;
      }
      placed_.push_back(std::move(p));
    }
    std::uint64_t seed = 7;
    for (std::size_t s = 0; s < shards; ++s) {
      const std::string path = dir + fmt::format("/shard-{}.tar", s);
      test::write_file(path, test::random_bytes(static_cast<std::size_t>(end[s] + 1024), seed++));
      files_.push_back(File::open(path, OpenMode::read));
      fp_ ^= XXH3_64bits_withSeed(&end[s], sizeof end[s], s);
    }
  }
  [[nodiscard]] DatasetFormat format() const noexcept override { return DatasetFormat::webdataset; }
  [[nodiscard]] std::uint64_t size() const noexcept override { return samples_.size(); }
  [[nodiscard]] std::uint64_t sample_bytes(std::uint64_t k) const override {
    std::uint64_t n = 0;
    for (const Member& m : samples_[k]) n += m.size;
    return n;
  }
  void extents(std::uint64_t k, std::vector<SampleExtent>& out) const override {
    for (std::size_t i = 0; i < samples_[k].size(); ++i) {
      out.push_back({placed_[k].shard, placed_[k].at[i], samples_[k][i].size});
    }
  }
  void fields(std::uint64_t k, std::vector<std::string>& out) const override {
    for (const Member& m : samples_[k]) out.push_back(m.field);
  }
  [[nodiscard]] std::string sample_id(std::uint64_t k) const override {
    return fmt::format("shard-{}.tar/{:06d}", placed_[k].shard, k);
  }
  [[nodiscard]] std::optional<SampleShape> sample_shape() const override { return std::nullopt; }
  [[nodiscard]] std::size_t file_count() const noexcept override { return files_.size(); }
  [[nodiscard]] const File& file(std::size_t i) const override { return files_.at(i); }
  [[nodiscard]] std::uint64_t fingerprint() const noexcept override { return fp_; }
  [[nodiscard]] std::string describe() const override { return fmt::format("var: {} samples", samples_.size()); }
  /// Member i of sample k, read with pread.
  [[nodiscard]] std::vector<std::byte> member(std::uint64_t k, std::size_t i) const {
    return test::pread_file(files_[placed_[k].shard].path(), placed_[k].at[i], samples_[k][i].size);
  }
  [[nodiscard]] const Sample& sample(std::uint64_t k) const { return samples_[k]; }

 private:
  struct Placed {
    std::uint32_t shard;
    std::vector<std::uint64_t> at;
  };
  std::vector<Sample> samples_;
  std::vector<Placed> placed_;
  std::vector<File> files_;
  std::uint64_t fp_ = 0x9e3779b97f4a7c15ULL;
};

}  // namespace sluice::test
