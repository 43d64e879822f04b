#include "sluice/histogram.hpp"

#include <algorithm>
#include <bit>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sluice/error.hpp"

namespace sluice {
namespace {

constexpr std::string_view format_name = "sluice-loglinear-v1";
constexpr std::uint64_t largest = (std::uint64_t{1} << (LatencyHistogram::max_exponent + 1)) - 1;

}  // namespace

LatencyHistogram::LatencyHistogram() : buckets_(bucket_count, 0) {}

std::size_t LatencyHistogram::index_of(std::uint64_t v) noexcept {
  if (v < sub_buckets) return static_cast<std::size_t>(v);
  v = std::min(v, largest);
  const unsigned e = static_cast<unsigned>(std::bit_width(v)) - 1;  // v in [2^e, 2^(e+1))
  const unsigned shift = e - sub_bucket_bits;
  const std::size_t sub = static_cast<std::size_t>(v >> shift) - sub_buckets;
  return sub_buckets + static_cast<std::size_t>(shift) * sub_buckets + sub;
}

std::uint64_t LatencyHistogram::lowest_in(std::size_t index) noexcept {
  if (index < sub_buckets) return index;
  const std::size_t shift = (index - sub_buckets) / sub_buckets;
  const std::size_t sub = (index - sub_buckets) % sub_buckets;
  return static_cast<std::uint64_t>(sub_buckets + sub) << shift;
}

std::uint64_t LatencyHistogram::highest_in(std::size_t index) noexcept {
  if (index < sub_buckets) return index;
  const std::size_t shift = (index - sub_buckets) / sub_buckets;
  return lowest_in(index) + ((std::uint64_t{1} << shift) - 1);
}

void LatencyHistogram::record_n(std::uint64_t v, std::uint64_t n) noexcept {
  if (n == 0) return;
  buckets_[index_of(v)] += n;
  count_ += n;
  min_ = std::min(min_, v);
  max_ = std::max(max_, v);
  const bool overflow = v != 0 && (n > UINT64_MAX / v || v * n > UINT64_MAX - sum_);
  sum_ = overflow ? UINT64_MAX : sum_ + v * n;
}

void LatencyHistogram::merge(const LatencyHistogram& o) noexcept {
  if (o.count_ == 0) return;
  for (std::size_t i = 0; i < bucket_count; ++i) buckets_[i] += o.buckets_[i];
  count_ += o.count_;
  min_ = std::min(min_, o.min_);
  max_ = std::max(max_, o.max_);
  sum_ = sum_ > UINT64_MAX - o.sum_ ? UINT64_MAX : sum_ + o.sum_;
}

void LatencyHistogram::reset() noexcept {
  std::fill(buckets_.begin(), buckets_.end(), 0);
  count_ = 0;
  min_ = UINT64_MAX;
  max_ = 0;
  sum_ = 0;
}

double LatencyHistogram::mean() const noexcept {
  return count_ == 0 ? 0.0 : static_cast<double>(sum_) / static_cast<double>(count_);
}

std::uint64_t LatencyHistogram::value_at_percentile(double p) const noexcept {
  if (count_ == 0) return 0;
  p = std::clamp(p, 0.0, 100.0);
  auto rank = static_cast<std::uint64_t>(std::ceil(p / 100.0 * static_cast<double>(count_)));
  rank = std::clamp<std::uint64_t>(rank, 1, count_);
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < bucket_count; ++i) {
    seen += buckets_[i];
    if (seen >= rank) {
      const std::uint64_t lo = lowest_in(i);
      const std::uint64_t mid = lo + (highest_in(i) - lo) / 2;
      return std::clamp(mid, min_, max_);
    }
  }
  return max_;
}

std::string LatencyHistogram::to_json() const {
  nlohmann::json b = nlohmann::json::array();
  for (std::size_t i = 0; i < bucket_count; ++i) {
    if (buckets_[i] != 0) b.push_back({i, buckets_[i]});
  }
  nlohmann::json j = {{"format", format_name}, {"sub_bucket_bits", sub_bucket_bits},
                      {"count", count_},       {"min", min()},
                      {"max", max_},           {"sum", sum_},
                      {"buckets", std::move(b)}};
  return j.dump();
}

LatencyHistogram LatencyHistogram::from_json(std::string_view text) {
  const ErrorContext ctx{.op = "histogram"};
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw_usage_error(ctx, fmt::format("not JSON: {}", e.what()));
  }
  if (!j.is_object() || j.value("format", "") != format_name ||
      j.value("sub_bucket_bits", 0U) != sub_bucket_bits) {
    throw_usage_error(ctx, fmt::format("not a {} histogram", format_name));
  }
  LatencyHistogram h;
  try {
    std::uint64_t total = 0;
    for (const auto& e : j.at("buckets")) {
      const auto i = e.at(0).get<std::size_t>();
      const auto n = e.at(1).get<std::uint64_t>();
      if (i >= bucket_count) throw_usage_error(ctx, fmt::format("bucket index {} out of range", i));
      h.buckets_[i] += n;
      total += n;
    }
    h.count_ = j.at("count").get<std::uint64_t>();
    if (total != h.count_) throw_usage_error(ctx, "bucket counts do not add up to count");
    h.min_ = h.count_ == 0 ? UINT64_MAX : j.at("min").get<std::uint64_t>();
    h.max_ = j.at("max").get<std::uint64_t>();
    h.sum_ = j.at("sum").get<std::uint64_t>();
  } catch (const nlohmann::json::exception& e) {
    throw_usage_error(ctx, fmt::format("malformed histogram: {}", e.what()));
  }
  return h;
}

bool operator==(const LatencyHistogram& a, const LatencyHistogram& b) noexcept {
  return a.count_ == b.count_ && a.min() == b.min() && a.max_ == b.max_ && a.sum_ == b.sum_ &&
         a.buckets_ == b.buckets_;
}

}  // namespace sluice
