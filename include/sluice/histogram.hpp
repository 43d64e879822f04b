// A mergeable log-linear latency histogram (the HdrHistogram / fio design): values below 2^7
// are counted exactly; above that every power of two is cut into 128 equal buckets, so a bucket
// is at most 1/128 of its values wide and a reported value (the bucket's midpoint, clamped to
// the recorded min and max) is within 0.4% of any value in it. Memory is fixed (about 40 KiB)
// whatever the count. Two histograms merge exactly by adding buckets, so per-thread, per-process
// and per-host histograms combine into the histogram of everything, which averaged percentiles
// cannot do. Values are nanoseconds by convention; anything above 2^44 (about 4.9 hours) lands
// in the last bucket.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/export.hpp"

namespace sluice {

class SLUICE_API LatencyHistogram {
 public:
  static constexpr unsigned sub_bucket_bits = 7;
  static constexpr unsigned max_exponent = 44;
  static constexpr std::size_t sub_buckets = std::size_t{1} << sub_bucket_bits;
  static constexpr std::size_t bucket_count = sub_buckets * (max_exponent - sub_bucket_bits + 2);

  LatencyHistogram();

  void record(std::uint64_t value) noexcept { record_n(value, 1); }
  void record_n(std::uint64_t value, std::uint64_t n) noexcept;
  /// Adds every value recorded in `other`, exactly.
  void merge(const LatencyHistogram& other) noexcept;
  void reset() noexcept;

  [[nodiscard]] std::uint64_t count() const noexcept { return count_; }
  [[nodiscard]] std::uint64_t min() const noexcept { return count_ == 0 ? 0 : min_; }
  [[nodiscard]] std::uint64_t max() const noexcept { return max_; }
  /// Exact mean of the recorded values (0 when empty).
  [[nodiscard]] double mean() const noexcept;
  /// The value at percentile `p` (0..100) by nearest rank, within the bucket error: the
  /// smallest recorded value v such that at least p% of the values are <= v. 0 when empty.
  [[nodiscard]] std::uint64_t value_at_percentile(double p) const noexcept;

  /// {"format":"sluice-loglinear-v1","sub_bucket_bits":7,"count","min","max","sum",
  ///  "buckets":[[index,count],...]} with only non-empty buckets.
  [[nodiscard]] std::string to_json() const;
  /// The inverse of to_json(). Throws a usage Error on a document of another format.
  [[nodiscard]] static LatencyHistogram from_json(std::string_view text);

  /// Bucket index of a value, and the range of values [lowest, highest] a bucket holds.
  [[nodiscard]] static std::size_t index_of(std::uint64_t value) noexcept;
  [[nodiscard]] static std::uint64_t lowest_in(std::size_t index) noexcept;
  [[nodiscard]] static std::uint64_t highest_in(std::size_t index) noexcept;

  friend SLUICE_API bool operator==(const LatencyHistogram& a, const LatencyHistogram& b) noexcept;

 private:
  std::vector<std::uint64_t> buckets_;
  std::uint64_t count_ = 0;
  std::uint64_t min_ = UINT64_MAX;
  std::uint64_t max_ = 0;
  std::uint64_t sum_ = 0;  // saturating; 2^64 ns is 584 years
};

}  // namespace sluice
