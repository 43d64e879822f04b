// WebDataset shards: tar archives whose consecutive members sharing a key (the path up to the
// first dot of the last component) form one sample, whose id is "SHARD/KEY" (SHARD the shard's
// file name). The member table is read at open (tar_index.cpp) with reads through the library,
// a window at a time, so the contents between headers are skipped, not read.
//
// Stricter than WebDataset's own reader, so that ids stay unique and a sample's fields are
// known: a key that comes back after other keys, a field twice in one sample, and two shards of
// one file name are refused at open.
#include <algorithm>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>

#include "../formats/checked.hpp"
#include "dataset_parts.hpp"
#include "sluice/transfer.hpp"
#include "sluice/units.hpp"

namespace sluice::ingest {
namespace {

using formats::detail::bad_file;
using formats::detail::quote_for_message;

constexpr std::string_view wds_op = "wds";
// Bytes read at once while scanning headers: many small members share one read. After a jump
// past a window's worth of contents (large members), the next read is small, so that the scan
// does not read much of the contents it skips.
constexpr std::uint64_t scan_window = 256 * KiB;
constexpr std::uint64_t scan_window_after_jump = 16 * KiB;

// The archive's bytes a window at a time, for scan_tar.
class WindowReader {
 public:
  explicit WindowReader(const File& file, std::uint64_t file_size) : file_(file), size_(file_size) {}

  std::span<const std::byte> operator()(std::uint64_t offset, std::size_t n) {
    if (offset < start_ || offset + n > start_ + buffer_.size()) fill(offset, n);
    const std::size_t from = static_cast<std::size_t>(offset - start_);
    return std::span<const std::byte>(buffer_).subspan(from, std::min(n, buffer_.size() - from));
  }

 private:
  void fill(std::uint64_t offset, std::size_t n) {
    const std::uint64_t end = start_ + buffer_.size();
    const std::uint64_t window = offset > end && offset - end >= scan_window ? scan_window_after_jump : scan_window;
    const std::uint64_t want = std::min(std::max<std::uint64_t>(n, window), size_ - std::min(offset, size_));
    buffer_.resize(static_cast<std::size_t>(want));
    const auto got = read(file_, buffer_.data(), want, offset).bytes;
    buffer_.resize(static_cast<std::size_t>(got));
    start_ = offset;
  }

  const File& file_;
  std::uint64_t size_;
  std::uint64_t start_ = 0;
  std::vector<std::byte> buffer_;
};

struct Member {
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  std::string field;
};

struct Sample {
  std::uint32_t shard = 0;
  std::uint32_t members = 0;
  std::uint64_t first_member = 0;
  std::uint64_t bytes = 0;
  std::string key;
};

class WebDataset final : public DatasetBase {
 public:
  explicit WebDataset(std::span<const std::string> paths) {
    FingerprintBuilder fp(DatasetFormat::webdataset, 0);
    for (const std::string& path : paths) open_shard(path, fp);
    fingerprint_ = fp.digest();
  }

  [[nodiscard]] DatasetFormat format() const noexcept override { return DatasetFormat::webdataset; }
  [[nodiscard]] std::uint64_t size() const noexcept override { return samples_.size(); }
  [[nodiscard]] std::uint64_t sample_bytes(std::uint64_t k) const override { return sample(k).bytes; }
  void extents(std::uint64_t k, std::vector<SampleExtent>& out) const override {
    const Sample& s = sample(k);
    for (std::uint64_t m = s.first_member; m < s.first_member + s.members; ++m) {
      out.push_back({s.shard, members_[m].offset, members_[m].size});
    }
  }
  void fields(std::uint64_t k, std::vector<std::string>& out) const override {
    const Sample& s = sample(k);
    for (std::uint64_t m = s.first_member; m < s.first_member + s.members; ++m) out.push_back(members_[m].field);
  }
  [[nodiscard]] std::string sample_id(std::uint64_t k) const override {
    const Sample& s = sample(k);
    return shard_names_[s.shard] + "/" + s.key;
  }
  [[nodiscard]] std::optional<SampleShape> sample_shape() const override { return std::nullopt; }
  [[nodiscard]] std::string describe() const override {
    return fmt::format("wds: {} shard{}, {} samples ({} members, {})", grouped(files_.size()),
                       files_.size() == 1 ? "" : "s", grouped(samples_.size()), grouped(members_.size()),
                       format_size(bytes_));
  }

 private:
  const Sample& sample(std::uint64_t k) const {
    if (k >= samples_.size()) throw_no_sample(k, samples_.size());
    return samples_[static_cast<std::size_t>(k)];
  }

  void open_shard(const std::string& path, FingerprintBuilder& fp) {
    File file = File::open(path, OpenMode::read);
    const std::string name = base_name(path);
    if (const auto same = std::find(shard_names_.begin(), shard_names_.end(), name); same != shard_names_.end()) {
      throw_usage_error({.op = wds_op, .path = path},
                        fmt::format("another shard is named '{}' too: sample ids (SHARD/KEY) would not be unique",
                                    name));
    }
    const std::uint64_t size = file.size();
    WindowReader reader(file, size);
    const std::vector<TarMember> members =
        scan_tar(size, [&](std::uint64_t offset, std::size_t n) { return reader(offset, n); }, path);
    fp.add_file(path, size);
    fp.add(members.size());
    const auto shard = static_cast<std::uint32_t>(files_.size());
    std::unordered_set<std::string> keys;
    for (const TarMember& m : members) {
      fp.add(m.name);
      fp.add(m.offset);
      fp.add(m.size);
      add_member(m, shard, keys, path);
    }
    shard_names_.push_back(name);
    files_.push_back(std::move(file));
  }

  void add_member(const TarMember& m, std::uint32_t shard, std::unordered_set<std::string>& keys,
                  const std::string& path) {
    const auto [key, field] = split_member_name(m.name);
    const bool same_sample = !samples_.empty() && samples_.back().shard == shard && samples_.back().key == key;
    if (same_sample) {
      Sample& s = samples_.back();
      for (std::uint64_t i = s.first_member; i < s.first_member + s.members; ++i) {
        if (members_[i].field == field) {
          bad_file(wds_op, path, fmt::format("member '{}' at byte {}: sample '{}' already has the field '{}'",
                                         quote_for_message(m.name), m.offset, quote_for_message(key),
                                         quote_for_message(field)));
        }
      }
    } else {
      if (!keys.emplace(key).second) {
        bad_file(wds_op, path, fmt::format("member '{}' at byte {}: key '{}' comes back after other keys; a sample's "
                                       "members must be consecutive", quote_for_message(m.name), m.offset,
                                       quote_for_message(key)));
      }
      samples_.push_back({shard, 0, members_.size(), 0, std::string(key)});
    }
    Sample& s = samples_.back();
    ++s.members;
    s.bytes += m.size;
    bytes_ += m.size;
    members_.push_back({m.offset, m.size, std::string(field)});
  }

  std::vector<std::string> shard_names_;
  std::vector<Sample> samples_;
  std::vector<Member> members_;
  std::uint64_t bytes_ = 0;
};

}  // namespace

std::shared_ptr<const Dataset> open_webdataset(std::span<const std::string> paths) {
  return std::make_shared<const WebDataset>(paths);
}

}  // namespace sluice::ingest
