// diagnose() on synthetic evidence: each cause is named from the evidence that should name it,
// ranked as the header says, and nothing is named where the evidence is within noise. Also the
// small fact readers (PCIe arithmetic, page-cache residency) that need no privileges.
#include <gtest/gtest.h>

#include <set>

#include "sluice/tools/doctor.hpp"
#include "sluice/units.hpp"
#include "support/test_util.hpp"

namespace sluice::doctor {
namespace {

// A read workload and its baseline at `gib_s`.
Evidence evidence(double gib_s, bench::RwMode rw = bench::RwMode::read, std::uint64_t bs = MiB,
                  unsigned iodepth = 1, unsigned threads = 1) {
  Evidence e;
  e.workload.files = {"/data/f"};
  e.workload.rw = rw;
  e.workload.block_size = bs;
  e.workload.iodepth = iodepth;
  e.workload.threads = threads;
  e.baseline.name = "baseline";
  e.baseline.workload = e.workload;
  e.baseline.gib_s = gib_s;
  e.baseline.seconds = 1;
  e.baseline.cpu_cores = 0.1;
  e.cpus = 8;
  e.fs_type = "ext4";
  e.cached_before = 0;
  return e;
}

// Adds a trial: the baseline's workload changed by `change`, measured at `gib_s`.
template <typename Fn>
Probe& trial(Evidence& e, std::string name, double gib_s, Fn change) {
  Probe p;
  p.name = std::move(name);
  p.change = p.name;
  p.workload = e.workload;
  change(p.workload);
  p.gib_s = gib_s;
  p.seconds = 1;
  e.trials.push_back(p);
  return e.trials.back();
}

std::vector<Cause> causes(const Diagnosis& d) {
  std::vector<Cause> v;
  for (const auto& f : d.findings) v.push_back(f.cause);
  return v;
}

TEST(DoctorDiagnose, QueueDepthOfRandomSmallReadsRanksBeforeLargerBlocks) {
  Evidence e = evidence(0.4, bench::RwMode::randread, 4 * KiB);
  trial(e, "iodepth", 1.9, [](bench::Workload& w) { w.iodepth = 16; });
  // Larger blocks measure faster still, but change a random workload's access pattern.
  trial(e, "block_size", 3.0, [](bench::Workload& w) { w.block_size = MiB; });
  trial(e, "threads", 0.7, [](bench::Workload& w) { w.threads = 2; });
  const Diagnosis d = diagnose(e);
  ASSERT_GE(d.findings.size(), 3U);
  EXPECT_EQ(d.findings[0].cause, Cause::queue_depth);
  EXPECT_EQ(d.findings[1].cause, Cause::threads);
  EXPECT_EQ(d.findings[2].cause, Cause::block_size);
  EXPECT_DOUBLE_EQ(*d.findings[0].expected_gib_s, 1.9);
  EXPECT_TRUE(d.findings[0].measured);
  EXPECT_NE(d.findings[0].recommendation.find(
                "raise iodepth from 1 to 16: 410 MiB/s -> 1.90 GiB/s measured (--iodepth 16)"),
            std::string::npos)
      << d.findings[0].recommendation;
  EXPECT_DOUBLE_EQ(d.ceiling_gib_s, 3.0);
  EXPECT_FALSE(d.near_ceiling);
}

TEST(DoctorDiagnose, BlockSizeOfSequentialReadsRanksByGain) {
  Evidence e = evidence(0.5, bench::RwMode::read, 64 * KiB, 4);
  trial(e, "iodepth", 0.8, [](bench::Workload& w) { w.iodepth = 16; });
  trial(e, "block_size", 2.0, [](bench::Workload& w) { w.block_size = MiB; });
  EXPECT_EQ(causes(diagnose(e)), (std::vector<Cause>{Cause::block_size, Cause::queue_depth}));
}

TEST(DoctorDiagnose, Alignment) {
  Evidence e = evidence(0.6, bench::RwMode::randread, MiB, 16);
  e.workload.unaligned = true;
  e.dio_align = 4096;
  trial(e, "aligned", 1.5, [](bench::Workload& w) { w.unaligned = false; });
  const Diagnosis d = diagnose(e);
  ASSERT_FALSE(d.findings.empty());
  EXPECT_EQ(d.findings[0].cause, Cause::alignment);
  EXPECT_NE(d.findings[0].recommendation.find("align offsets and sizes to 4096 bytes"),
            std::string::npos);
}

TEST(DoctorDiagnose, WarmPageCacheIsNamedFirstAndItsExpectationIsTheDevice) {
  Evidence e = evidence(6.0);
  e.workload.direct = false;
  e.cached_before = 1.0;
  trial(e, "direct", 1.0, [](bench::Workload& w) { w.direct = true; });
  trial(e, "iodepth", 7.5, [](bench::Workload& w) { w.iodepth = 16; });
  const Diagnosis d = diagnose(e);
  ASSERT_FALSE(d.findings.empty());
  EXPECT_EQ(d.findings[0].cause, Cause::page_cache);
  EXPECT_DOUBLE_EQ(*d.findings[0].expected_gib_s, 1.0);
  EXPECT_NE(d.findings[0].evidence.find("100% of the file"), std::string::npos);
}

TEST(DoctorDiagnose, ColdBufferedReadsAreBufferedIo) {
  Evidence e = evidence(0.5);
  e.workload.direct = false;
  e.cached_before = 0.02;
  trial(e, "direct", 1.5, [](bench::Workload& w) { w.direct = true; });
  const Diagnosis d = diagnose(e);
  EXPECT_EQ(causes(d), std::vector<Cause>{Cause::buffered_io});
}

TEST(DoctorDiagnose, ACachedFileOnTmpfsIsNotAPageCacheFinding) {
  Evidence e = evidence(5.0);
  e.workload.direct = false;
  e.memory_fs = true;
  e.o_direct = false;
  e.cached_before = 1.0;
  EXPECT_TRUE(diagnose(e).findings.empty());
}

TEST(DoctorDiagnose, OneCpuBoundThreadWhereMoreHelp) {
  Evidence e = evidence(2.0);
  e.cpus = 2;
  e.baseline.cpu_cores = 0.97;
  trial(e, "iodepth", 2.05, [](bench::Workload& w) { w.iodepth = 16; });
  trial(e, "threads", 3.6, [](bench::Workload& w) { w.threads = 2; });
  const Diagnosis d = diagnose(e);
  ASSERT_EQ(causes(d), std::vector<Cause>{Cause::threads});
  EXPECT_NE(d.findings[0].evidence.find("CPU-bound"), std::string::npos) << d.findings[0].evidence;
  EXPECT_NE(d.findings[0].recommendation.find("(--threads 2)"), std::string::npos);
}

TEST(DoctorDiagnose, SaturatedCpusWhereMoreThreadsDoNotHelpAreCpuBound) {
  Evidence e = evidence(2.0, bench::RwMode::read, MiB, 1, 2);
  e.cpus = 2;
  e.baseline.cpu_cores = 1.95;
  trial(e, "threads", 2.1, [](bench::Workload& w) { w.threads = 4; });
  const Diagnosis d = diagnose(e);
  ASSERT_EQ(causes(d), std::vector<Cause>{Cause::cpu_bound});
  EXPECT_FALSE(d.findings[0].expected_gib_s.has_value());
  EXPECT_FALSE(d.findings[0].measured);
}

TEST(DoctorDiagnose, CpusHeldByOtherProcessesAreCpuBound) {
  Evidence e = evidence(0.7);
  e.cpus = 2;
  e.baseline.cpu_cores = 0.5;
  e.baseline.system_busy = 1.0;
  trial(e, "threads", 0.72, [](bench::Workload& w) { w.threads = 2; });
  Diagnosis d = diagnose(e);
  ASSERT_EQ(causes(d), std::vector<Cause>{Cause::cpu_bound});
  EXPECT_NE(d.findings[0].evidence.find("other processes 1.50"), std::string::npos)
      << d.findings[0].evidence;
  // Threads mostly waiting for I/O on a busy machine are not short of CPU.
  e.baseline.cpu_cores = 0.2;
  EXPECT_TRUE(diagnose(e).findings.empty());
  // Busy with this workload alone is not contention.
  e.baseline.cpu_cores = 1.9;
  e.baseline.system_busy = 0.97;
  d = diagnose(e);
  ASSERT_EQ(causes(d), std::vector<Cause>{Cause::cpu_bound});
  EXPECT_EQ(d.findings[0].evidence.find("other processes"), std::string::npos);
}

TEST(DoctorDiagnose, SynchronousCopiesAreNotOverlapped) {
  Evidence e = evidence(1.0);
  e.workload.xfer = bench::XferType::cpu_gpu;
  trial(e, "async_copy", 1.8, [](bench::Workload& w) { w.xfer = bench::XferType::cpu_async_gpu; });
  EXPECT_EQ(causes(diagnose(e)), std::vector<Cause>{Cause::copy_not_overlapped});
}

TEST(DoctorDiagnose, ALinkTrainedLowThatBindsIsEstimated) {
  Evidence e = evidence(1.7, bench::RwMode::read, MiB, 16);
  e.links.push_back({.what = "nvme0n1 (0000:01:00.0)",
                     .speed = "8.0 GT/s PCIe",
                     .width = "2",
                     .max_speed = "8.0 GT/s PCIe",
                     .max_width = "4",
                     .gib_s = pcie_gib_s("8.0 GT/s PCIe", "2"),
                     .max_gib_s = pcie_gib_s("8.0 GT/s PCIe", "4")});
  const Diagnosis d = diagnose(e);
  ASSERT_EQ(causes(d), std::vector<Cause>{Cause::pcie_link});
  EXPECT_FALSE(d.findings[0].measured);
  EXPECT_NEAR(*d.findings[0].expected_gib_s, 3.4, 0.05);
}

TEST(DoctorDiagnose, ALinkTrainedLowThatDoesNotBindIsOnlyANote) {
  Evidence e = evidence(0.2, bench::RwMode::read, MiB, 16);
  e.links.push_back({.what = "nvme0n1",
                     .speed = "8.0 GT/s PCIe",
                     .width = "2",
                     .max_speed = "8.0 GT/s PCIe",
                     .max_width = "4",
                     .gib_s = 1.83,
                     .max_gib_s = 3.67});
  const Diagnosis d = diagnose(e);
  EXPECT_TRUE(d.findings.empty());
  ASSERT_EQ(d.notes.size(), 1U);
  EXPECT_NE(d.notes[0].find("not the limit"), std::string::npos);
}

TEST(DoctorDiagnose, NumaPlacementMeasured) {
  Evidence e = evidence(1.0, bench::RwMode::read, MiB, 16);
  e.numa_nodes = 2;
  e.device_numa_node = 1;
  trial(e, "numa", 1.4, [](bench::Workload& w) { w.numa_node = 1; });
  const Diagnosis d = diagnose(e);
  ASSERT_EQ(causes(d), std::vector<Cause>{Cause::numa_placement});
  EXPECT_NE(d.findings[0].recommendation.find("--numa-node 1"), std::string::npos);
}

TEST(DoctorDiagnose, IommuMattersForGpuDirectOnly) {
  Evidence e = evidence(1.0, bench::RwMode::read, MiB, 16);
  e.iommu = true;
  e.iommu_cmdline = "intel_iommu=on";
  e.workload.xfer = bench::XferType::gpu_direct;
  EXPECT_EQ(causes(diagnose(e)), std::vector<Cause>{Cause::iommu});
  e.iommu_cmdline = "intel_iommu=on iommu=pt";
  EXPECT_TRUE(diagnose(e).findings.empty());
  e.iommu_cmdline = "intel_iommu=on";
  e.workload.xfer = bench::XferType::cpu_only;
  const Diagnosis d = diagnose(e);
  EXPECT_TRUE(d.findings.empty());
  EXPECT_EQ(d.notes.size(), 1U);
}

TEST(DoctorDiagnose, NearTheCeilingBelowTheLinkIsTheDevice) {
  Evidence e = evidence(1.0, bench::RwMode::read, MiB, 16);
  trial(e, "iodepth", 1.05, [](bench::Workload& w) { w.iodepth = 32; });
  e.links.push_back({.what = "nvme0n1",
                     .speed = "8.0 GT/s PCIe",
                     .width = "4",
                     .max_speed = "8.0 GT/s PCIe",
                     .max_width = "4",
                     .gib_s = 3.67,
                     .max_gib_s = 3.67});
  const Diagnosis d = diagnose(e);
  EXPECT_TRUE(d.near_ceiling);
  EXPECT_EQ(causes(d), std::vector<Cause>{Cause::device_limit});
}

TEST(DoctorDiagnose, NearTheCeilingWithNothingToCompareSaysSoAndInventsNothing) {
  Evidence e = evidence(1.0, bench::RwMode::read, MiB, 16);
  trial(e, "iodepth", 1.1, [](bench::Workload& w) { w.iodepth = 32; });
  trial(e, "threads", 0.9, [](bench::Workload& w) { w.threads = 2; });
  const Diagnosis d = diagnose(e);
  EXPECT_TRUE(d.findings.empty());
  EXPECT_TRUE(d.near_ceiling);
  EXPECT_NE(d.summary.find("near the ceiling"), std::string::npos) << d.summary;
}

TEST(DoctorDiagnose, GainsWithinNoiseAreNotFindings) {
  Evidence e = evidence(1.0, bench::RwMode::read, MiB, 1);
  trial(e, "iodepth", 1.15, [](bench::Workload& w) { w.iodepth = 16; });
  EXPECT_TRUE(diagnose(e).findings.empty());
}

// Two interleaved rounds of the baseline and of every trial compared with it: confident. One
// round of any of them (a budget too small): low, naming those probes and the budget that would
// give two. The combined run (once, by design) and a failed trial never lower it.
TEST(DoctorDiagnose, ConfidenceNeedsTwoInterleavedRoundsOfEveryComparedProbe) {
  Evidence e = evidence(0.4, bench::RwMode::randread, 64 * KiB, 32);
  e.baseline.rounds = 2;
  trial(e, "iodepth", 0.5, [](bench::Workload& w) { w.iodepth = 64; }).rounds = 2;
  trial(e, "aligned", 0.9, [](bench::Workload& w) { w.unaligned = false; }).rounds = 2;
  trial(e, "threads", 0, [](bench::Workload& w) { w.threads = 2; }).error = "failed";
  trial(e, "combined", 1.0, [](bench::Workload& w) { w.unaligned = false; }).rounds = 1;
  const Diagnosis sure = diagnose(e);
  EXPECT_FALSE(sure.confidence.low) << sure.confidence.reason;
  EXPECT_TRUE(sure.confidence.reason.empty());
  EXPECT_TRUE(sure.confidence.few_rounds.empty());
  EXPECT_TRUE(sure.confidence.device_shared.empty());

  e.baseline.rounds = 1;
  e.trials[1].rounds = 1;
  e.two_round_budget_s = 9;
  const Diagnosis d = diagnose(e);
  EXPECT_TRUE(d.confidence.low);
  EXPECT_EQ(d.confidence.few_rounds, (std::vector<std::string>{"baseline", "aligned"}));
  EXPECT_TRUE(d.confidence.device_shared.empty());
  EXPECT_NE(d.confidence.reason.find("baseline, aligned measured in fewer than 2 interleaved "
                                     "rounds"),
            std::string::npos)
      << d.confidence.reason;
  EXPECT_NE(d.confidence.reason.find("--budget 9s"), std::string::npos) << d.confidence.reason;
  // The finding itself is still named: low confidence qualifies it, it does not hide it.
  ASSERT_FALSE(d.findings.empty());
  EXPECT_EQ(d.findings[0].cause, Cause::alignment);
}

// Other processes reading the same device while a compared probe ran (a quarter of its bytes or
// more): low, naming those probes; a smaller share, or one not known, is no reason.
TEST(DoctorDiagnose, ConfidenceNeedsTheDeviceToItself) {
  Evidence e = evidence(0.1, bench::RwMode::randread, 4 * KiB, 32);
  e.devno = "254:0";
  e.baseline.rounds = 2;
  e.baseline.others_read_share = 0.1;
  trial(e, "iodepth", 0.1, [](bench::Workload& w) { w.iodepth = 64; }).rounds = 2;
  trial(e, "aligned", 0.2, [](bench::Workload& w) { w.unaligned = false; }).rounds = 2;
  e.trials[1].others_read_share = 0.24;
  trial(e, "combined", 0.3, [](bench::Workload& w) { w.unaligned = false; }).others_read_share =
      0.9;
  e.trials.back().rounds = 1;
  EXPECT_FALSE(diagnose(e).confidence.low) << diagnose(e).confidence.reason;

  e.trials[1].others_read_share = 0.6;
  const Diagnosis d = diagnose(e);
  EXPECT_TRUE(d.confidence.low);
  EXPECT_TRUE(d.confidence.few_rounds.empty());
  EXPECT_EQ(d.confidence.device_shared, (std::vector<std::string>{"aligned"}));
  EXPECT_NE(d.confidence.reason.find("other processes read up to 60% of the bytes read from "
                                     "device 254:0 while aligned ran"),
            std::string::npos)
      << d.confidence.reason;
}

TEST(DoctorDiagnose, ABindingCgroupLimitComesFirst) {
  Evidence e = evidence(19.5 / 1024, bench::RwMode::randread, 4 * KiB);
  e.throttles.push_back({.file = "/sys/fs/cgroup/blkio/t/blkio.throttle.read_bps_device",
                         .devno = "7:3",
                         .read_bps = 20 * MiB});
  trial(e, "iodepth", 19.8 / 1024, [](bench::Workload& w) { w.iodepth = 16; });
  trial(e, "threads", 25.0 / 1024, [](bench::Workload& w) { w.threads = 2; });  // a burst
  const Diagnosis d = diagnose(e);
  ASSERT_FALSE(d.findings.empty());
  EXPECT_EQ(d.findings[0].cause, Cause::throttled);
  EXPECT_NE(d.findings[0].evidence.find("7:3"), std::string::npos);
  EXPECT_NE(d.findings[0].evidence.find("read_bps 20971520"), std::string::npos)
      << d.findings[0].evidence;
}

TEST(DoctorDiagnose, ACgroupLimitFarAboveTheThroughputIsANote) {
  Evidence e = evidence(0.1);
  e.throttles.push_back({.file = "f", .devno = "7:3", .read_bps = 10 * GiB});
  const Diagnosis d = diagnose(e);
  EXPECT_TRUE(d.findings.empty());
  EXPECT_EQ(d.notes.size(), 1U);
}

TEST(DoctorDiagnose, FlatAtARoundFigureWithoutACgroupLimitIsASuspectedThrottle) {
  Evidence e = evidence(100.0 / 1024, bench::RwMode::read, 64 * KiB, 4);
  trial(e, "iodepth", 100.4 / 1024, [](bench::Workload& w) { w.iodepth = 16; });
  trial(e, "block_size", 99.7 / 1024, [](bench::Workload& w) { w.block_size = MiB; });
  Diagnosis d = diagnose(e);
  ASSERT_EQ(causes(d), std::vector<Cause>{Cause::throttled});
  EXPECT_FALSE(d.findings[0].measured);
  // The same flatness at an unremarkable figure is not called a throttle.
  e.baseline.gib_s = 0.085;
  e.trials[0].gib_s = 0.0853;
  e.trials[1].gib_s = 0.0848;
  d = diagnose(e);
  EXPECT_TRUE(d.findings.empty());
}

TEST(DoctorDiagnose, EveryCauseHasItsDocumentedName) {
  const std::set<std::string_view> want{
      "queue_depth", "block_size",     "alignment", "page_cache",
      "buffered_io", "threads",        "cpu_bound", "copy_not_overlapped",
      "pcie_link",   "numa_placement", "iommu",     "device_limit",
      "throttled"};
  std::set<std::string_view> got;
  for (Cause c : all_causes()) got.insert(to_string(c));
  EXPECT_EQ(got, want);
}

TEST(DoctorFacts, PcieLinkArithmetic) {
  EXPECT_NEAR(pcie_gib_s("8.0 GT/s PCIe", "4"), 3.938e9 / GiB, 0.01);
  EXPECT_NEAR(pcie_gib_s("2.5 GT/s PCIe", "1"), 0.25e9 / GiB, 0.001);
  EXPECT_NEAR(pcie_gib_s("16.0 GT/s PCIe", "16"), 31.5e9 / GiB, 0.05);
  EXPECT_EQ(pcie_gib_s("Unknown", "4"), 0);
  EXPECT_EQ(pcie_gib_s("8.0 GT/s PCIe", ""), 0);
}

TEST(DoctorFacts, PageCacheResidencyOfAFileSeenAndDropped) {
  auto root = test::folder_root(test::Folder::disk);
  if (!root) GTEST_SKIP() << "no disk folder";
  test::TempDir dir(*root, "sluice-doctor-");
  const std::string f = dir.file("data");
  test::write_file(f, test::random_bytes(4 * MiB, 7));
  EXPECT_EQ(cached_fraction({dir.file("missing")}), -1);
  drop_file_cache({f});
  EXPECT_LT(cached_fraction({f}), 0.5);
  (void)test::read_whole(f);
  EXPECT_GT(cached_fraction({f}), 0.9);
}

}  // namespace
}  // namespace sluice::doctor
