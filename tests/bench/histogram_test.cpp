// The log-linear latency histogram: percentiles within 1% of exact nearest-rank percentiles on
// random data of several shapes, merging equal to recording everything in one, JSON round trip,
// and the edges (empty, zero, one value, huge values).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "sluice/error.hpp"
#include "sluice/histogram.hpp"

namespace sluice {
namespace {

std::uint64_t exact_percentile(std::vector<std::uint64_t> v, double p) {
  std::sort(v.begin(), v.end());
  auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  rank = std::clamp<std::size_t>(rank, 1, v.size());
  return v[rank - 1];
}

std::vector<std::uint64_t> sample(int shape, std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint64_t> v(n);
  std::lognormal_distribution<double> lognormal(11.0, 1.5);     // ~60 us, long tail
  std::uniform_int_distribution<std::uint64_t> uniform(0, 5'000'000);
  std::exponential_distribution<double> expo(1.0 / 200'000.0);
  for (auto& x : v) {
    switch (shape) {
      case 0: x = static_cast<std::uint64_t>(lognormal(rng)); break;
      case 1: x = uniform(rng); break;
      default: x = static_cast<std::uint64_t>(expo(rng)); break;
    }
  }
  return v;
}

TEST(Histogram, PercentilesWithinOnePercentOfExact) {
  for (int shape = 0; shape < 3; ++shape) {
    const auto values = sample(shape, 200'000, 42 + static_cast<std::uint64_t>(shape));
    LatencyHistogram h;
    for (auto v : values) h.record(v);
    ASSERT_EQ(h.count(), values.size());
    for (double p : {1.0, 10.0, 50.0, 90.0, 99.0, 99.9, 99.99, 100.0}) {
      const auto want = static_cast<double>(exact_percentile(values, p));
      const auto got = static_cast<double>(h.value_at_percentile(p));
      EXPECT_LE(std::abs(got - want), std::max(1.0, 0.01 * want))
          << "shape " << shape << " p" << p << ": got " << got << " want " << want;
    }
    EXPECT_EQ(h.min(), *std::min_element(values.begin(), values.end()));
    EXPECT_EQ(h.max(), *std::max_element(values.begin(), values.end()));
    double sum = 0;
    for (auto v : values) sum += static_cast<double>(v);
    EXPECT_NEAR(h.mean(), sum / static_cast<double>(values.size()), 1e-6 * h.mean());
  }
}

TEST(Histogram, BucketsCoverEveryValueWithBoundedWidth) {
  std::size_t prev = 0;
  for (std::uint64_t v : {0ULL, 1ULL, 127ULL, 128ULL, 129ULL, 255ULL, 256ULL, 1000ULL, 123456789ULL,
                          (1ULL << 44) - 1}) {
    const std::size_t i = LatencyHistogram::index_of(v);
    EXPECT_GE(i, prev);
    prev = i;
    EXPECT_LE(LatencyHistogram::lowest_in(i), v);
    EXPECT_GE(LatencyHistogram::highest_in(i), v);
    const auto width = static_cast<double>(LatencyHistogram::highest_in(i) - LatencyHistogram::lowest_in(i) + 1);
    EXPECT_LE(width, std::max(1.0, static_cast<double>(v) / 128.0 + 1)) << v;
  }
  EXPECT_LT(LatencyHistogram::index_of(UINT64_MAX), LatencyHistogram::bucket_count);
}

TEST(Histogram, MergeEqualsRecordingEverythingInOne) {
  const auto a = sample(0, 50'000, 1);
  const auto b = sample(2, 70'000, 2);
  LatencyHistogram ha, hb, all;
  for (auto v : a) {
    ha.record(v);
    all.record(v);
  }
  for (auto v : b) {
    hb.record(v);
    all.record(v);
  }
  LatencyHistogram merged;
  merged.merge(ha);
  merged.merge(hb);
  EXPECT_EQ(merged, all);
  for (double p : {50.0, 99.0, 99.9}) EXPECT_EQ(merged.value_at_percentile(p), all.value_at_percentile(p));
  LatencyHistogram empty;
  merged.merge(empty);
  EXPECT_EQ(merged, all);
}

TEST(Histogram, JsonRoundTripMergesAcrossProcesses) {
  LatencyHistogram h;
  for (auto v : sample(1, 10'000, 7)) h.record(v);
  const LatencyHistogram back = LatencyHistogram::from_json(h.to_json());
  EXPECT_EQ(back, h);
  EXPECT_EQ(LatencyHistogram::from_json(LatencyHistogram().to_json()), LatencyHistogram());
  EXPECT_THROW((void)LatencyHistogram::from_json("{\"format\":\"other\"}"), Error);
  EXPECT_THROW((void)LatencyHistogram::from_json("not json"), Error);
  EXPECT_THROW((void)LatencyHistogram::from_json(
                   R"({"format":"sluice-loglinear-v1","sub_bucket_bits":7,"count":5,"min":1,"max":1,"sum":5,"buckets":[[1,4]]})"),
               Error);
}

TEST(Histogram, Edges) {
  LatencyHistogram h;
  EXPECT_EQ(h.count(), 0U);
  EXPECT_EQ(h.value_at_percentile(50), 0U);
  EXPECT_EQ(h.min(), 0U);
  EXPECT_EQ(h.max(), 0U);
  EXPECT_EQ(h.mean(), 0.0);
  h.record(0);
  EXPECT_EQ(h.value_at_percentile(0), 0U);
  EXPECT_EQ(h.value_at_percentile(100), 0U);
  h.reset();
  h.record(1'000'003);  // one value: every percentile is that value (clamped to min/max)
  for (double p : {0.0, 50.0, 100.0, 250.0, -3.0}) EXPECT_EQ(h.value_at_percentile(p), 1'000'003U);
  h.record(UINT64_MAX);  // beyond the tracked range: counted, max exact, lands in the last bucket
  EXPECT_EQ(h.count(), 2U);
  EXPECT_EQ(h.max(), UINT64_MAX);
  h.record_n(5, 1000);
  EXPECT_EQ(h.count(), 1002U);
  EXPECT_EQ(h.value_at_percentile(50), 5U);
}

}  // namespace
}  // namespace sluice
