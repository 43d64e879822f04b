// SampleOrder (a permutation of [0, n) that depends only on (n, seed, epoch)) and LoaderState's
// JSON form.
#include <gtest/gtest.h>

#include <vector>

#include "sluice/error.hpp"
#include "sluice/ingest.hpp"
#include "support/test_util.hpp"

namespace sluice {
namespace {

std::vector<std::uint64_t> all(const SampleOrder& o) {
  std::vector<std::uint64_t> v;
  for (std::uint64_t p = 0; p < o.size(); ++p) v.push_back(o[p]);
  return v;
}

bool is_permutation(const std::vector<std::uint64_t>& v) {
  std::vector<bool> seen(v.size());
  for (std::uint64_t x : v) {
    if (x >= v.size() || seen[x]) return false;
    seen[x] = true;
  }
  return true;
}

TEST(SampleOrder, IsAPermutationForManySizes) {
  std::vector<std::uint64_t> sizes = {0, 1, 2, 3, 4, 5, 7, 8, 9, 13, 31, 97, 101, 1000, 4093, 65521, 100003};
  for (unsigned k = 2; k <= 17; ++k) {
    sizes.push_back((1ULL << k) - 1);
    sizes.push_back(1ULL << k);
    sizes.push_back((1ULL << k) + 1);
  }
  for (std::uint64_t n : sizes) {
    for (std::uint64_t seed : {0ULL, 1ULL, 0xdeadbeefULL}) {
      const SampleOrder o(n, seed, 3, true);
      EXPECT_EQ(o.size(), n);
      EXPECT_TRUE(is_permutation(all(o))) << "n=" << n << " seed=" << seed;
    }
  }
}

TEST(SampleOrder, DependsOnlyOnSizeSeedAndEpoch) {
  EXPECT_EQ(all(SampleOrder(1000, 42, 7, true)), all(SampleOrder(1000, 42, 7, true)));
  EXPECT_NE(all(SampleOrder(1000, 42, 7, true)), all(SampleOrder(1000, 42, 8, true)));
  EXPECT_NE(all(SampleOrder(1000, 42, 7, true)), all(SampleOrder(1000, 43, 7, true)));
  // Every pair of the first epochs differs, for small n too.
  for (std::uint64_t n : {5ULL, 17ULL, 256ULL}) {
    for (std::uint64_t a = 0; a < 4; ++a) {
      for (std::uint64_t b = a + 1; b < 4; ++b) {
        EXPECT_NE(all(SampleOrder(n, 0, a, true)), all(SampleOrder(n, 0, b, true))) << n << " " << a << " " << b;
      }
    }
  }
}

TEST(SampleOrder, ShuffledOrderIsNotNearlySorted) {
  // A weak mixer would keep neighbours together: count positions whose successor is the next index.
  const SampleOrder o(10000, 5, 0, true);
  unsigned runs = 0;
  for (std::uint64_t p = 0; p + 1 < o.size(); ++p) runs += o[p + 1] == o[p] + 1 ? 1 : 0;
  EXPECT_LT(runs, 50U);
}

TEST(SampleOrder, IdentityWithoutShuffle) {
  const SampleOrder o(77, 42, 9, false);
  for (std::uint64_t p = 0; p < 77; ++p) EXPECT_EQ(o[p], p);
}

TEST(SampleOrder, PositionPastTheEndIsAnError) {
  const SampleOrder o(3, 0, 0, true);
  EXPECT_THROW((void)o[3], Error);
  EXPECT_THROW((void)SampleOrder(0, 0, 0, true)[0], Error);
}

TEST(LoaderState, RoundTripsThroughJson) {
  LoaderState s;
  s.seed = 0xffffffffffffffffULL;
  s.shuffle = false;
  s.epoch = 12;
  s.consumed = 123456789;
  s.fingerprint = 0x0123456789abcdefULL;
  const std::string j = s.to_json();
  EXPECT_NE(j.find("\"format\":\"sluice-loader-state\""), std::string::npos) << j;
  EXPECT_NE(j.find("\"fingerprint\":\"0123456789abcdef\""), std::string::npos) << j;
  const LoaderState back = LoaderState::from_json(j);
  EXPECT_EQ(back.seed, s.seed);
  EXPECT_EQ(back.shuffle, s.shuffle);
  EXPECT_EQ(back.epoch, s.epoch);
  EXPECT_EQ(back.consumed, s.consumed);
  EXPECT_EQ(back.fingerprint, s.fingerprint);
}

TEST(LoaderState, RefusesMalformedStatesNamingTheField) {
  const std::string good = R"({"format":"sluice-loader-state","version":1,"seed":1,"shuffle":true,"epoch":0,"consumed":8,"fingerprint":"00000000000000ff"})";
  EXPECT_EQ(LoaderState::from_json(good).fingerprint, 0xffU);
  struct Case {
    std::string text;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"not json", "not JSON"},
      {"[1]", "not a JSON object"},
      {R"({"format":"other","version":1})", "format"},
      {R"({"format":"sluice-loader-state","version":2,"seed":1,"shuffle":true,"epoch":0,"consumed":8,"fingerprint":"00000000000000ff"})", "version"},
      {R"({"format":"sluice-loader-state","version":1,"shuffle":true,"epoch":0,"consumed":8,"fingerprint":"00000000000000ff"})", "'seed'"},
      {R"({"format":"sluice-loader-state","version":1,"seed":-1,"shuffle":true,"epoch":0,"consumed":8,"fingerprint":"00000000000000ff"})", "'seed'"},
      {R"({"format":"sluice-loader-state","version":1,"seed":1,"epoch":0,"consumed":8,"fingerprint":"00000000000000ff"})", "'shuffle'"},
      {R"({"format":"sluice-loader-state","version":1,"seed":1,"shuffle":true,"epoch":0,"consumed":"8","fingerprint":"00000000000000ff"})", "'consumed'"},
      {R"({"format":"sluice-loader-state","version":1,"seed":1,"shuffle":true,"epoch":0,"consumed":8,"fingerprint":"ff"})", "'fingerprint'"},
      {R"({"format":"sluice-loader-state","version":1,"seed":1,"shuffle":true,"epoch":0,"consumed":8,"fingerprint":"00000000000000zz"})", "'fingerprint'"},
  };
  for (const Case& c : cases) {
    try {
      (void)LoaderState::from_json(c.text);
      ADD_FAILURE() << "accepted " << c.text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(c.says), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace sluice
