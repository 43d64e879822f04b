// The benchmark engine as a library: names and ranges parse as documented, the verification
// pattern, size-bound runs covering every block exactly once, verify catching a corrupted block,
// GPU types on the simulated device naming their path (and flagging a gpu-direct fallback),
// interleaved compare plans with medians, time-bound samples, a failure mid-run returning
// what was measured, and the page cache state each run starts in (cold by default, --warm).
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <vector>

#include <fmt/format.h>

#include "sluice/error.hpp"
#include "sluice/testing/faulty_engine.hpp"
#include "sluice/tools/bench.hpp"
#include "sluice/tools/bench_report.hpp"
#include "support/residency_util.hpp"
#include "support/test_util.hpp"

namespace sluice::bench {
namespace {

class BenchEngine : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = std::make_unique<test::TempDir>("/var/tmp", "sluice-bench-test-"); }

  Workload small(const std::string& name, std::uint64_t size = 2 * MiB) {
    Workload w;
    w.files = {dir_->file(name)};
    w.size = size;
    w.block_size = 64 * KiB;
    w.iodepth = 4;
    w.device = "sim";
    return w;
  }

  std::unique_ptr<test::TempDir> dir_;
};

TEST(BenchNames, TransferTypesByNameAndGdsioNumber) {
  EXPECT_EQ(parse_xfer("gpu-direct"), XferType::gpu_direct);
  EXPECT_EQ(parse_xfer("0"), XferType::gpu_direct);
  EXPECT_EQ(parse_xfer("1"), XferType::cpu_only);
  EXPECT_EQ(parse_xfer("CPUONLY"), XferType::cpu_only);
  EXPECT_EQ(parse_xfer("cpu_async_gpu"), XferType::cpu_async_gpu);
  EXPECT_EQ(parse_xfer("6"), XferType::gpu_batch);
  EXPECT_EQ(parse_xfer("auto"), XferType::automatic);
  EXPECT_THROW((void)parse_xfer("7"), Error);
  EXPECT_THROW((void)parse_xfer("warp-drive"), Error);
  for (XferType x : all_xfers()) EXPECT_EQ(parse_xfer(to_string(x)), x);
  EXPECT_EQ(parse_xfer_list("all").size(), all_xfers().size());
  EXPECT_EQ(parse_xfer_list("cpu-only,3").size(), 2U);
  EXPECT_EQ(parse_rw("2"), RwMode::randread);
  EXPECT_EQ(parse_rw("randwrite"), RwMode::randwrite);
  EXPECT_THROW((void)parse_rw("4"), Error);
}

TEST(BenchNames, BlockSizeSweeps) {
  EXPECT_EQ(parse_block_sizes("4K"), (std::vector<std::uint64_t>{4096}));
  EXPECT_EQ(parse_block_sizes("4K:32K:x2"), (std::vector<std::uint64_t>{4096, 8192, 16384, 32768}));
  EXPECT_EQ(parse_block_sizes("4K:16K:4K"), (std::vector<std::uint64_t>{4096, 8192, 12288, 16384}));
  EXPECT_EQ(parse_block_sizes("4K:16K").size(), 3U);  // default step x2
  EXPECT_THROW((void)parse_block_sizes("1M:4K"), Error);
  EXPECT_THROW((void)parse_block_sizes("4K:1M:x1"), Error);
  EXPECT_THROW((void)parse_block_sizes("lots"), Error);
}

TEST(BenchNames, PatternDependsOnOffsetAndSeedOnly) {
  std::vector<std::byte> a(1000), b(1000);
  fill_pattern(a.data(), 12345, a.size(), 9);
  fill_pattern(b.data(), 12345 + 3, b.size() - 3, 9);  // another alignment, same bytes
  EXPECT_TRUE(std::equal(a.begin() + 3, a.end(), b.begin()));
  EXPECT_FALSE(check_pattern(a.data(), 12345, a.size(), 9).has_value());
  EXPECT_TRUE(check_pattern(a.data(), 12345, a.size(), 10).has_value());
  a[500] ^= std::byte{1};
  EXPECT_EQ(check_pattern(a.data(), 12345, a.size(), 9), std::optional<std::uint64_t>(12345 + 500));
}

TEST(BenchNames, BadWorkloadsAreUsageErrors) {
  Workload w;
  EXPECT_THROW(validate(w), Error);  // no file
  w.files = {"/var/tmp/x"};
  w.rw = RwMode::randwrite;
  w.verify = true;
  w.time_s = 1;
  try {
    validate(w);
    FAIL() << "--verify --time randwrite accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.domain(), ErrorDomain::usage);
    EXPECT_NE(std::string(e.what()).find("--verify"), std::string::npos);
  }
}

TEST_F(BenchEngine, SizeBoundRunsCoverEveryBlockOnce) {
  for (RwMode rw : {RwMode::read, RwMode::randread}) {
    Workload w = small("data.bin");
    w.rw = rw;
    w.verify = true;  // the file is laid out with the pattern; every read is checked
    w.threads = 2;
    const RunResult r = run_workload(w);
    EXPECT_TRUE(r.error.empty()) << r.error;
    EXPECT_EQ(r.bytes, 2 * MiB);
    EXPECT_EQ(r.ios, 32U);
    EXPECT_EQ(r.latency.count(), 32U);
    EXPECT_EQ(r.path, "host");
    EXPECT_TRUE(r.verified);
    EXPECT_GT(r.seconds, 0);
  }
}

TEST_F(BenchEngine, VerifyCatchesACorruptedBlock) {
  Plan plan;
  plan.workload = small("written.bin");
  plan.workload.rw = RwMode::randwrite;
  plan.workload.verify = true;
  const auto runs = run_plan(plan);
  ASSERT_EQ(runs.size(), 2U);  // the write and its read-back
  EXPECT_TRUE(runs[0].error.empty()) << runs[0].error;
  EXPECT_EQ(runs[1].phase, "verify");
  EXPECT_TRUE(runs[1].error.empty()) << runs[1].error;
  EXPECT_EQ(runs[1].bytes, 2 * MiB);

  const std::uint64_t bad = 5 * 64 * KiB + 17;
  auto byte = test::pread_file(plan.workload.files[0], bad, 1);
  byte[0] ^= std::byte{0x40};
  test::pwrite_file(plan.workload.files[0], byte, bad);
  for (XferType x : {XferType::cpu_only, XferType::cpu_async_gpu}) {
    Workload w = plan.workload;
    w.rw = RwMode::read;
    w.xfer = x;
    const RunResult r = run_workload(w);
    EXPECT_NE(r.error.find("verify failed"), std::string::npos) << to_string(x) << ": " << r.error;
    EXPECT_NE(r.error.find(std::to_string(bad)), std::string::npos) << r.error;
  }
}

TEST_F(BenchEngine, GpuTypesOnTheSimDeviceNameTheirPath) {
  Workload w = small("gpu.bin");
  w.verify = true;
  for (XferType x : {XferType::cpu_gpu, XferType::cpu_async_gpu, XferType::cpu_cached_gpu,
                     XferType::gpu_direct, XferType::gpu_direct_async, XferType::gpu_batch,
                     XferType::automatic}) {
    w.xfer = x;
    const RunResult r = run_workload(w);
    EXPECT_TRUE(r.error.empty()) << to_string(x) << ": " << r.error;
    EXPECT_EQ(r.bytes, 2 * MiB) << to_string(x);
    EXPECT_FALSE(r.path.empty());
    EXPECT_FALSE(r.reason.empty());
    EXPECT_EQ(r.memory, "device");
    if (x == XferType::cpu_gpu) {
      EXPECT_EQ(r.path, "posix");
    }
    if (x == XferType::cpu_async_gpu) {
      EXPECT_EQ(r.path, "bounce");
    }
    if (x == XferType::gpu_direct || x == XferType::gpu_direct_async || x == XferType::gpu_batch) {
      EXPECT_EQ(r.fell_back, r.path != "direct") << r.path;
      if (r.fell_back) {
        EXPECT_NE(r.reason.find("FELL BACK"), std::string::npos) << r.reason;
      }
    }
  }
}

TEST_F(BenchEngine, CompareInterleavesRoundsAndSummarizes) {
  Plan plan;
  plan.workload = small("cmp.bin");
  plan.xfers = {XferType::cpu_only, XferType::cpu_async_gpu};
  plan.repeat = 2;
  plan.block_sizes = {32 * KiB, 64 * KiB};
  const auto runs = run_plan(plan);
  ASSERT_EQ(runs.size(), 8U);
  EXPECT_EQ(runs[0].xfer, XferType::cpu_only);
  EXPECT_EQ(runs[1].xfer, XferType::cpu_async_gpu);
  EXPECT_EQ(runs[2].xfer, XferType::cpu_only);
  EXPECT_EQ(runs[2].round, 2U);
  EXPECT_EQ(runs[4].block_size, 64 * KiB);
  // The summary against the runs themselves: each row's throughput is the mean of its two
  // rounds (the median of two), and its ratio that over the first type's at the same block size.
  auto mean_of = [&](XferType x, std::uint64_t bs) {
    double sum = 0;
    int n = 0;
    for (const RunResult& r : runs) {
      if (r.xfer != x || r.block_size != bs) continue;
      sum += static_cast<double>(r.bytes) / static_cast<double>(GiB) / r.seconds;
      ++n;
    }
    EXPECT_EQ(n, 2) << to_string(x) << " " << bs;
    return sum / n;
  };
  const auto s = summarize(runs);
  ASSERT_EQ(s.size(), 4U);
  const std::pair<XferType, std::uint64_t> rows[] = {{XferType::cpu_only, 32 * KiB}, {XferType::cpu_async_gpu, 32 * KiB},
                                                     {XferType::cpu_only, 64 * KiB}, {XferType::cpu_async_gpu, 64 * KiB}};
  for (std::size_t i = 0; i < 4; ++i) {
    const auto [x, bs] = rows[i];
    SCOPED_TRACE(fmt::format("{} {}", to_string(x), bs));
    EXPECT_EQ(s[i].xfer, x);
    EXPECT_EQ(s[i].block_size, bs);
    EXPECT_EQ(s[i].rounds, 2U);
    EXPECT_NEAR(s[i].gib_per_s, mean_of(x, bs), 1e-9 * s[i].gib_per_s);
    EXPECT_NEAR(s[i].ratio, mean_of(x, bs) / mean_of(XferType::cpu_only, bs), 1e-9);
  }
  const std::string table = summary_table(s);
  EXPECT_NE(table.find(fmt::format("{:.2f}x", s[1].ratio)), std::string::npos) << table;
}

// fio's invalidate=1: the file is cached when the plan starts and the buffered types read it
// through the cache again, and still every run that reads starts with none of it cached,
// because the plan drops it first and measures that. (Something dropping caches beside the
// test only makes the runs colder.)
TEST_F(BenchEngine, DefaultPlanStartsEveryReadingRunCold) {
  Plan plan;
  plan.workload = small("cold.bin", 8 * MiB);
  plan.xfers = {XferType::cpu_gpu, XferType::cpu_cached_gpu, XferType::cpu_only};
  plan.repeat = 2;
  EXPECT_EQ(plan.cache, CacheState::cold);
  (void)run_workload(plan.workload);  // lays the file out
  if (!test::drop_cache(plan.workload.files[0])) GTEST_SKIP() << "this folder's file system keeps its pages cached";
  test::make_resident(plan.workload.files[0], 0, 8 * MiB);
  const auto runs = run_plan(plan);
  ASSERT_EQ(runs.size(), 6U);
  if (!runs[0].cache.known) GTEST_SKIP() << "no residency probe answers on this kernel";
  for (const RunResult& r : runs) {
    SCOPED_TRACE(fmt::format("{} round {}", to_string(r.xfer), r.round));
    ASSERT_TRUE(r.error.empty()) << r.error;
    EXPECT_EQ(r.cache.state, CacheState::cold);
    EXPECT_EQ(r.cache.pages, 8 * MiB / static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE)));
    EXPECT_LE(r.cache.start_fraction(), 0.01) << r.cache.label();
    EXPECT_TRUE(r.cache.held());
    EXPECT_FALSE(r.cache.rewarmed);  // size-bound: each block read once
    EXPECT_EQ(r.cache.label().substr(0, 5), "cold ");
  }
  const auto s = summarize(runs);
  ASSERT_EQ(s.size(), 3U);
  for (const Summary& x : s) EXPECT_EQ(x.cache, "cold") << to_string(x.xfer);
  EXPECT_NE(result_table(runs).find("cold 0%"), std::string::npos) << result_table(runs);
}

TEST_F(BenchEngine, WarmPlanStartsEveryRunWarm) {
  Plan plan;
  plan.workload = small("warm.bin", 8 * MiB);
  plan.workload.cache_policy = CachePolicy::automatic;  // as --warm sets it
  plan.xfers = {XferType::cpu_only, XferType::cpu_async_gpu, XferType::cpu_gpu};
  plan.cache = CacheState::warm;
  (void)run_workload(plan.workload);  // lays the file out
  // The pages a run reads in cannot be pinned from here: something dropping the whole cache
  // beside the test (tests/README.md) may take them between the read-in and the probe. The
  // row then says "NOT warm", which is checked too; a few tries find a plan it left alone.
  std::vector<RunResult> runs;
  for (int attempt = 0; attempt < 5; ++attempt) {
    if (!test::drop_cache(plan.workload.files[0])) GTEST_SKIP() << "this folder's file system keeps its pages cached";
    runs = run_plan(plan);
    ASSERT_EQ(runs.size(), 3U);
    if (!runs[0].cache.known) GTEST_SKIP() << "no residency probe answers on this kernel";
    bool all_held = true;
    for (const RunResult& r : runs) {
      ASSERT_TRUE(r.error.empty()) << r.error;
      EXPECT_EQ(r.cache.state, CacheState::warm);
      EXPECT_EQ(r.cache.held(), r.cache.start_fraction() >= 0.99);
      EXPECT_EQ(r.cache.label().substr(0, r.cache.held() ? 5 : 9), r.cache.held() ? "warm " : "NOT warm ");
      all_held = all_held && r.cache.held();
    }
    if (all_held) break;
  }
  for (const RunResult& r : runs) EXPECT_TRUE(r.cache.held()) << to_string(r.xfer) << ": " << r.cache.label();
  // The O_DIRECT engine loop read the cached blocks through the cache (cache_policy auto).
  const auto& paths = runs[0].paths;
  EXPECT_TRUE(std::any_of(paths.begin(), paths.end(), [](const PathShare& p) {
    return p.reason.find("page cache held the block") != std::string::npos && p.ios > 0;
  })) << runs[0].reason;
  EXPECT_EQ(summarize(runs)[0].cache, "warm");
}

// A file system that keeps its pages whatever it is told (tmpfs): the row says it did not
// start cold instead of passing a memory-speed figure off as a cold one.
TEST_F(BenchEngine, AColdStartThatDidNotHappenIsSaid) {
  const auto shm = test::folder_root(test::Folder::tmpfs);
  if (!shm) GTEST_SKIP() << "no tmpfs folder";
  test::TempDir mem(*shm, "sluice-bench-tmpfs-");
  Plan plan;
  plan.workload = small("x");
  plan.workload.files = {mem.file("kept.bin")};
  const auto runs = run_plan(plan);
  ASSERT_EQ(runs.size(), 1U);
  const RunResult& r = runs[0];
  if (!r.cache.known) GTEST_SKIP() << "no residency probe answers on this kernel";
  EXPECT_FALSE(r.cache.held());
  EXPECT_GT(r.cache.start_fraction(), 0.5);
  EXPECT_EQ(r.cache.label().substr(0, 9), "NOT cold ") << r.cache.label();
  EXPECT_NE(result_table(runs).find("was to start cold, but the page cache held"), std::string::npos)
      << result_table(runs);
  EXPECT_EQ(summarize(runs)[0].cache, r.cache.label());
}

// A time-bound buffered run wraps around a small file: its first pass reads the storage, the
// others the cache it filled. The row says so.
TEST_F(BenchEngine, AColdRunServedFromMemoryLaterIsSaid) {
  Workload w = small("wrap.bin", 2 * MiB);
  w.xfer = XferType::cpu_gpu;
  w.time_s = 0.3;
  w.cache = CacheState::cold;
  const RunResult r = run_workload(w);
  ASSERT_TRUE(r.error.empty()) << r.error;
  if (!r.cache.known) GTEST_SKIP() << "no residency probe answers on this kernel";
  ASSERT_GT(r.reads.bytes, r.dataset_bytes) << "the run did not wrap around in 0.3 s";
  EXPECT_LE(r.cache.start_fraction(), 0.01);
  if (2 * r.cache.cached_end < r.cache.pages) GTEST_SKIP() << "memory pressure took the pages back";
  EXPECT_TRUE(r.cache.rewarmed);
  EXPECT_EQ(r.cache.label(), "cold->warm");
  EXPECT_NE(result_table({r}).find("later passes came from memory"), std::string::npos);
}

// Medians and ratios from hand-made runs: odd and even round counts, a failed run and a verify
// pass left out, a baseline per block size, a baseline that measured nothing.
TEST(BenchSummary, MediansAndRatiosFromKnownRuns) {
  auto run = [](XferType x, std::uint64_t bs, double gib, std::string phase = "run", std::string error = "") {
    RunResult r;
    r.xfer = x;
    r.block_size = bs;
    r.bytes = GiB;
    r.seconds = gib > 0 ? 1.0 / gib : 0;  // gib_per_s() = bytes / GiB / seconds
    r.phase = std::move(phase);
    r.error = std::move(error);
    return r;
  };
  const auto cpu = XferType::cpu_only, gpu = XferType::gpu_direct;
  const std::vector<RunResult> runs = {
      run(cpu, 4096, 2.0), run(gpu, 4096, 1.0), run(cpu, 4096, 8.0), run(gpu, 4096, 3.0),
      run(cpu, 4096, 4.0), run(gpu, 4096, 100.0, "verify"), run(gpu, 4096, 50.0, "run", "EIO"),
      run(cpu, 8192, 0.0), run(gpu, 8192, 5.0),
  };
  const auto s = summarize(runs);
  ASSERT_EQ(s.size(), 4U);
  EXPECT_EQ(s[0].xfer, cpu);
  EXPECT_EQ(s[0].rounds, 3U);
  EXPECT_DOUBLE_EQ(s[0].gib_per_s, 4.0);  // median of 2, 8, 4
  EXPECT_DOUBLE_EQ(s[0].ratio, 1.0);
  EXPECT_EQ(s[1].xfer, gpu);
  EXPECT_EQ(s[1].rounds, 2U);             // the verify pass and the failed run are not rounds
  EXPECT_DOUBLE_EQ(s[1].gib_per_s, 2.0);  // median of 1 and 3
  EXPECT_DOUBLE_EQ(s[1].ratio, 0.5);      // 2 / 4
  EXPECT_EQ(s[2].block_size, 8192U);
  EXPECT_DOUBLE_EQ(s[3].gib_per_s, 5.0);
  EXPECT_DOUBLE_EQ(s[3].ratio, 0.0);      // no ratio over a baseline of nothing
}

TEST_F(BenchEngine, TimeBoundRunsSampleThroughput) {
  Workload w = small("timed.bin");
  w.rw = RwMode::randread;
  w.time_s = 0.4;
  w.sample_interval_s = 0.1;
  const RunResult r = run_workload(w);
  EXPECT_TRUE(r.error.empty()) << r.error;
  EXPECT_GE(r.seconds, 0.4);
  // One sample per 0.1 s of the run's own clock, in order: the i-th ends no sooner than i+1
  // intervals in.
  EXPECT_GE(r.samples.size(), 2U);
  for (std::size_t i = 0; i < r.samples.size(); ++i) {
    EXPECT_GE(r.samples[i].t, 0.1 * static_cast<double>(i + 1) - 1e-9) << i;
    if (i > 0) {
      EXPECT_GT(r.samples[i].t, r.samples[i - 1].t) << i;
    }
  }
}

TEST_F(BenchEngine, FailureMidRunReportsWhatRan) {
  Workload w = small("faulty.bin");
  (void)run_workload(w);  // lay the file out before faults start
  test::ScopedEngineFactory faults([](EngineKind k, unsigned depth) -> std::unique_ptr<IoEngine> {
    return std::make_unique<FaultyEngine>(test::make_inner_engine(k, depth), FaultPlan{.every = 10, .error = EIO});
  });
  const RunResult r = run_workload(w);
  EXPECT_FALSE(r.error.empty());
  EXPECT_NE(r.error.find("Input/output error"), std::string::npos) << r.error;
  EXPECT_LT(r.bytes, 2 * MiB);
  EXPECT_NE(result_table({r}).find("FAILED"), std::string::npos);
}

TEST_F(BenchEngine, MixedRunsReportEachDirection) {
  for (XferType x : {XferType::cpu_only, XferType::cpu_async_gpu}) {
    Workload w = small("mixed.bin");
    w.rw = RwMode::randrw;
    w.mix_read = 70;
    w.xfer = x;
    w.verify = true;  // writes write the pattern, reads check it
    const RunResult r = run_workload(w);
    ASSERT_TRUE(r.error.empty()) << to_string(x) << ": " << r.error;
    EXPECT_EQ(r.ios, 32U);
    EXPECT_GT(r.reads.ios, 0U) << to_string(x);
    EXPECT_GT(r.writes.ios, 0U) << to_string(x);
    EXPECT_EQ(r.reads.ios + r.writes.ios, r.ios);
    EXPECT_EQ(r.reads.bytes, r.reads.ios * 64 * KiB);
    EXPECT_EQ(r.writes.bytes, r.writes.ios * 64 * KiB);
    EXPECT_EQ(r.reads.bytes + r.writes.bytes, r.bytes);
    EXPECT_EQ(r.reads.latency.count(), r.reads.ios);
    EXPECT_EQ(r.writes.latency.count(), r.writes.ios);
    LatencyHistogram both = r.reads.latency;
    both.merge(r.writes.latency);
    EXPECT_EQ(both, r.latency) << "the directions split the run's histogram exactly";
    EXPECT_NEAR(r.iops(r.reads) + r.iops(r.writes), r.iops(), 1e-9 * r.iops());
    EXPECT_NEAR(r.gib_per_s(r.reads) + r.gib_per_s(r.writes), r.gib_per_s(), 1e-9 * r.gib_per_s());
  }
  Workload w = small("reads-only.bin");
  w.rw = RwMode::rw;
  w.mix_read = 100;
  const RunResult r = run_workload(w);
  ASSERT_TRUE(r.error.empty()) << r.error;
  EXPECT_EQ(r.reads.ios, 32U);
  EXPECT_EQ(r.writes.ios, 0U);
  EXPECT_EQ(r.writes.latency.count(), 0U);
  EXPECT_EQ(r.reads.latency, r.latency);
}

TEST_F(BenchEngine, EveryLoopShapeCoversEveryBlockOnce) {
  struct Shape {
    unsigned submit, reap;
    bool huge;
  };
  for (const Shape sh : {Shape{0, 0, true}, Shape{1, 1, false}, Shape{3, 2, true}, Shape{1, 0, false},
                         Shape{0, 1, true}}) {
    Workload w = small("shape.bin");
    w.rw = RwMode::randread;
    w.iodepth = 8;
    w.verify = true;
    w.submit_batch = sh.submit;
    w.reap_batch = sh.reap;
    w.huge_pages = sh.huge;
    const RunResult r = run_workload(w);
    const std::string what = fmt::format("submit {} reap {} huge {}", sh.submit, sh.reap, sh.huge);
    ASSERT_TRUE(r.error.empty()) << what << ": " << r.error;
    EXPECT_EQ(r.ios, 32U) << what;
    EXPECT_EQ(r.bytes, 2 * MiB) << what;
    EXPECT_EQ(r.latency.count(), 32U) << what;
    EXPECT_TRUE(r.verified) << what;
    EXPECT_NE(r.reason.find(sh.huge ? "huge-page buffers" : "4 KiB-page buffers"), std::string::npos)
        << what << ": " << r.reason;
  }
}

TEST_F(BenchEngine, DirAndSeveralFilesGiveEachThreadItsFile) {
  // --dir: one file per thread, created by a write run, then read back and checked.
  const std::string dir = dir_->file("per-thread");
  std::filesystem::create_directory(dir);
  Workload w;
  w.dir = dir;
  w.threads = 3;
  w.size = 256 * KiB;
  w.block_size = 64 * KiB;
  w.rw = RwMode::write;
  w.verify = true;
  RunResult r = run_workload(w);
  ASSERT_TRUE(r.error.empty()) << r.error;
  EXPECT_EQ(r.bytes, 3 * 256 * KiB);
  for (unsigned t = 0; t < 3; ++t) {
    const auto path = std::filesystem::path(dir) / fmt::format("sluice-bench.{}", t);
    ASSERT_TRUE(std::filesystem::exists(path)) << path;
    EXPECT_EQ(std::filesystem::file_size(path), 256 * KiB) << path;
  }
  w.rw = RwMode::randread;
  r = run_workload(w);
  ASSERT_TRUE(r.error.empty()) << r.error;
  EXPECT_EQ(r.reads.bytes, 3 * 256 * KiB);

  // Several files: thread t works on file t mod n, and threads sharing a file split it.
  Workload s;
  s.files = {dir_->file("a.bin"), dir_->file("b.bin")};
  s.threads = 4;
  s.size = 512 * KiB;
  s.block_size = 64 * KiB;
  s.iodepth = 2;
  s.verify = true;
  r = run_workload(s);
  ASSERT_TRUE(r.error.empty()) << r.error;
  EXPECT_EQ(r.bytes, 2 * 512 * KiB);  // each file covered once, by its two threads
  EXPECT_EQ(r.ios, 16U);
  EXPECT_EQ(r.dataset_bytes, 2 * 512 * KiB);
  for (const auto& f : s.files) EXPECT_EQ(std::filesystem::file_size(f), 512 * KiB) << f;
}

TEST_F(BenchEngine, BadFilesAreUsageErrors) {
  Workload w = small("missing.bin");
  w.size = 0;
  EXPECT_THROW((void)run_workload(w), Error);  // no such file and no --size
  w = small("tiny.bin", 16 * KiB);             // block 64K > 16K file
  try {
    (void)run_workload(w);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.domain(), ErrorDomain::usage);
    EXPECT_NE(std::string(e.what()).find("larger than the file"), std::string::npos) << e.what();
  }
  w = small("x");
  w.files.clear();
  w.dir = dir_->file("no-such-dir");
  EXPECT_THROW((void)run_workload(w), Error);
}

}  // namespace
}  // namespace sluice::bench
