// The page-cache residency probe: cachestat and the mincore fallback agree with what a test put
// in the cache (a file dropped from the cache with fadvise, then pages read back with readahead
// off), and the reasons reads give for what they found. Needs a disk-backed folder whose cache
// can be dropped per file; skips elsewhere.
#include "sluice/residency.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "sluice/units.hpp"
#include "support/residency_util.hpp"
#include "support/test_util.hpp"
#include "transfer/pipeline.hpp"

namespace sluice {
namespace {

using test::Folder;

class ResidencyTest : public ::testing::TestWithParam<ResidencyMethod> {
 protected:
  void SetUp() override {
    std::string why;
    const auto root = test::folder_root(Folder::disk, &why);
    if (!root) GTEST_SKIP() << why;
    dir_ = std::make_unique<test::TempDir>(*root);
    path_ = dir_->file("resident.bin");
    test::write_file(path_, test::random_bytes(size, 7));
    if (!test::drop_cache(path_))
      GTEST_SKIP() << "the page cache of " << path_ << " cannot be dropped per file";
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_GE(fd_, 0);
  }
  void TearDown() override {
    if (fd_ >= 0) ::close(fd_);
  }

  [[nodiscard]] Residency probe(std::uint64_t offset, std::uint64_t n) const {
    const ResidencyProbe p(fd_, 0, size, GetParam());
    EXPECT_EQ(p.method(), GetParam());
    return p.probe(offset, n);
  }

  // Reads [offset, offset + n) into the page cache and keeps it there for the rest of the test
  // (test::pin_resident): the counts below are exact.
  void resident(std::uint64_t offset, std::uint64_t n) {
    pins_.push_back(test::pin_resident(path_, offset, n));
  }

  static constexpr std::uint64_t size = 8 * MiB;
  std::unique_ptr<test::TempDir> dir_;
  std::string path_;
  int fd_ = -1;
  std::vector<test::PinnedRange> pins_;
};

TEST_P(ResidencyTest, ColdFileHoldsNothing) {
  const Residency r = probe(0, size);
  EXPECT_EQ(r.pages, size / 4096);
  EXPECT_EQ(r.cached, 0U);
  EXPECT_EQ(r.fraction(), 0.0);
  EXPECT_EQ(r.method, GetParam());
}

TEST_P(ResidencyTest, CountsExactlyThePagesReadIn) {
  resident(MiB, 2 * MiB);          // pages 256..767
  resident(6 * MiB + 8192, 4096);  // page 1538
  EXPECT_EQ(probe(0, size).cached, 512U + 1U);
  EXPECT_EQ(probe(MiB, 2 * MiB).cached, 512U);
  EXPECT_EQ(probe(MiB, 2 * MiB).fraction(), 1.0);
  EXPECT_EQ(probe(0, MiB).cached, 0U);
  // A range half in: [512 KiB, 1.5 MiB).
  const Residency half = probe(MiB / 2, MiB);
  EXPECT_EQ(half.pages, 256U);
  EXPECT_EQ(half.cached, 128U);
  // Unaligned ends count their partly covered pages whole.
  const Residency odd = probe(6 * MiB + 8192 + 100, 10);
  EXPECT_EQ(odd.pages, 1U);
  EXPECT_EQ(odd.cached, 1U);
  const Residency straddle = probe(MiB - 1, 2);  // last cold page, first cached one
  EXPECT_EQ(straddle.pages, 2U);
  EXPECT_EQ(straddle.cached, 1U);
}

TEST_P(ResidencyTest, DirtyPagesAreCachedAndCountedWhereTheKernelSays) {
  const std::vector<std::byte> data = test::random_bytes(3 * 4096, 9);
  test::pwrite_file(path_, data, 4 * MiB);
  const Residency r = probe(4 * MiB, data.size());
  EXPECT_EQ(r.cached, 3U);
  if (GetParam() == ResidencyMethod::cachestat) {
    EXPECT_LE(r.dirty, 3U);  // dirty or under writeback; the flusher may already have cleaned them
  } else {
    EXPECT_EQ(r.dirty, 0U);  // mincore cannot tell
  }
}

TEST_P(ResidencyTest, EdgesFirstThenTheWholeRangeWhenTheyDisagree) {
  const ResidencyProbe p(fd_, 0, size, GetParam());
  resident(0, MiB);             // [0, 1 MiB) wholly
  resident(2 * MiB, MiB / 4);   // [2, 3) MiB: its first quarter
  resident(4 * MiB, 64 * KiB);  // [4, 5) MiB: both edges, not the middle
  resident(5 * MiB - 64 * KiB, 64 * KiB);
  EXPECT_EQ(p.probe_edges(0, MiB).cached, 256U);
  EXPECT_EQ(p.probe_edges(MiB, MiB).cached, 0U);
  EXPECT_EQ(p.probe_edges(2 * MiB, MiB).cached, 64U);   // edges disagree: every page counted
  EXPECT_EQ(p.probe_edges(4 * MiB, MiB).cached, 256U);  // edges agree: an estimate, hole missed
  EXPECT_EQ(p.probe(4 * MiB, MiB).cached, 32U);
  // Small ranges are probed whole.
  EXPECT_EQ(p.probe_edges(4 * MiB, 256 * KiB).cached, 16U);
}

// page_cache_residency asks cachestat first whatever the parameter: it runs twice, harmlessly.
TEST_P(ResidencyTest, OneShotProbeAgrees) {
  resident(0, MiB);
  const Residency r = page_cache_residency(fd_, 0, 0);  // 0: to the end of the file
  EXPECT_EQ(r.pages, size / 4096);
  EXPECT_EQ(r.cached, 256U);
  EXPECT_EQ(r.method, have_cachestat() ? ResidencyMethod::cachestat : ResidencyMethod::mincore);
  EXPECT_EQ(page_cache_residency(fd_, size, 0).pages, 0U);  // at the end: nothing to probe
}

std::vector<ResidencyMethod> methods() {
  std::vector<ResidencyMethod> m{ResidencyMethod::mincore};
  if (have_cachestat()) m.insert(m.begin(), ResidencyMethod::cachestat);
  return m;
}

INSTANTIATE_TEST_SUITE_P(Methods, ResidencyTest, ::testing::ValuesIn(methods()),
                         [](const auto& p) { return std::string(to_string(p.param)); });

TEST(ResidencyProbeTest, EmptyRangeAndBadDescriptor) {
  const ResidencyProbe empty(-1, 0, 0);
  EXPECT_EQ(empty.method(), ResidencyMethod::none);
  EXPECT_EQ(empty.probe(0, 0).pages, 0U);
  const ResidencyProbe bad(-1, 0, MiB);
  EXPECT_EQ(bad.method(), ResidencyMethod::none);
  const Residency r = bad.probe(0, MiB);
  EXPECT_EQ(r.pages, 256U);
  EXPECT_EQ(r.cached, 0U);  // unknown counts as not cached: reads stay O_DIRECT
}

TEST(ResidencyReasonTest, SaysWhatWasDone) {
  using detail::ResidencyTally;
  EXPECT_EQ(detail::residency_reason({}, "O_DIRECT"), "O_DIRECT");
  EXPECT_EQ(detail::residency_reason(ResidencyTally{4, 1024, 1024, 4 * MiB, 0}, "O_DIRECT"),
            "page cache held 100% of the range: buffered");
  EXPECT_EQ(detail::residency_reason(ResidencyTally{4, 1024, 0, 0, 4 * MiB}, "O_DIRECT"),
            "page cache held 0% of the range: O_DIRECT");
  EXPECT_EQ(detail::residency_reason(ResidencyTally{4, 1000, 620, 3 * MiB, MiB}, "O_DIRECT"),
            "page cache held 62% of the range: mixed: 3.00 MiB buffered, 1.00 MiB O_DIRECT");
  // Never "100%" unless every page was there, never "0%" when some were.
  EXPECT_EQ(detail::residency_reason(ResidencyTally{1, 1000, 999, MiB, 0}, "x"),
            "page cache held 99% of the range: buffered");
  EXPECT_EQ(detail::residency_reason(ResidencyTally{1, 1000, 1, 0, MiB}, "x"),
            "page cache held 1% of the range: x");
}

}  // namespace
}  // namespace sluice
