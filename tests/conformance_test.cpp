// The host-path conformance suite, run for every engine x filesystem x configuration shape.
// The small shapes (4K..64K I/Os, 1..4 workers, queue depth 1..8) make chunking, head/tail
// staging and the multi-worker split all happen on files of a few MiB.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "support/conformance.hpp"
#include "support/test_util.hpp"

namespace sluice::test {
namespace {

struct Param {
  std::string engine;
  Folder folder;
  Shape shape;
};

void PrintTo(const Param& p, std::ostream* os) {
  *os << p.engine << " on " << to_string(p.folder) << ", " << p.shape.name;
}

std::vector<Param> all_params() {
  const Shape shapes[] = {
      {.name = "defaults", .io_size = 1 << 20, .threads = 0, .queue_depth = 16, .direct_io = true},
      {.name = "io4k_t1_qd1", .io_size = 4096, .threads = 1, .queue_depth = 1, .direct_io = true},
      {.name = "io16k_t4_qd8", .io_size = 16384, .threads = 4, .queue_depth = 8, .direct_io = true},
      {.name = "io64k_t2_qd2", .io_size = 65536, .threads = 2, .queue_depth = 2, .direct_io = true},
      {.name = "buffered_io8k_t3_qd4", .io_size = 8192, .threads = 3, .queue_depth = 4,
       .direct_io = false},
      // Files read right after they are written sit in the page cache: auto reads them buffered.
      {.name = "cache_auto_io16k_t2_qd4", .io_size = 16384, .threads = 2, .queue_depth = 4,
       .direct_io = true, .cache_policy = "auto"},
  };
  std::vector<Param> out;
  for (const char* engine : {"uring", "psync"}) {
    for (const Folder folder : {Folder::disk, Folder::tmpfs}) {
      for (const Shape& s : shapes) out.push_back({engine, folder, s});
    }
  }
  return out;
}

std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 1469598103934665603ULL;
  for (const char c : s) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  return h;
}

class Conformance : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    std::string why;
    if (!engine_usable(GetParam().engine, &why)) SLUICE_SKIP_OR_FAIL("io_uring unavailable: " + why);
    const auto root = folder_root(GetParam().folder, &why);
    if (!root) GTEST_SKIP() << why;
    dir_ = std::make_unique<TempDir>(*root);
    cfg_ = make_config(GetParam().engine, GetParam().shape);
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    seed_ = test_seed(fnv1a(fmt::format("{}.{}", info->test_suite_name(), info->name())));
    trace_ = std::make_unique<::testing::ScopedTrace>(
        __FILE__, __LINE__, fmt::format("folder {} seed {} (SLUICE_TEST_SEED)", dir_->path(), seed_));
  }

  std::unique_ptr<TempDir> dir_;
  std::shared_ptr<const Config> cfg_;
  std::uint64_t seed_ = 0;
  std::unique_ptr<::testing::ScopedTrace> trace_;
};

TEST_P(Conformance, ReadsMatchPread) { conformance::reads_match_pread(dir_->path(), cfg_, seed_); }
TEST_P(Conformance, RandomReads) { conformance::random_reads(dir_->path(), cfg_, seed_, 150); }
TEST_P(Conformance, WritesThenReads) { conformance::writes_then_reads(dir_->path(), cfg_, seed_); }
TEST_P(Conformance, ReadPastEof) { conformance::read_past_eof(dir_->path(), cfg_, seed_); }
TEST_P(Conformance, WriteExtendsFile) { conformance::write_extends_file(dir_->path(), cfg_, seed_); }
TEST_P(Conformance, AsyncRoundTrip) { conformance::async_round_trip(dir_->path(), cfg_, seed_); }
TEST_P(Conformance, SyncedWrites) { conformance::synced_writes(dir_->path(), cfg_, seed_); }
TEST_P(Conformance, PathAndReason) { conformance::path_and_reason(dir_->path(), cfg_, seed_); }

INSTANTIATE_TEST_SUITE_P(Host, Conformance, ::testing::ValuesIn(all_params()),
                         [](const ::testing::TestParamInfo<Param>& p) {
                           return fmt::format("{}_{}_{}", p.param.engine, to_string(p.param.folder),
                                              p.param.shape.name);
                         });

}  // namespace
}  // namespace sluice::test
