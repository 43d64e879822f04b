#include "sluice/stats.hpp"

#include <gtest/gtest.h>

#include "sluice/error.hpp"
#include "sluice/file.hpp"
#include "sluice/testing/faulty_engine.hpp"
#include "sluice/testing/stats.hpp"
#include "sluice/transfer.hpp"
#include "sluice/units.hpp"
#include "support/test_util.hpp"

namespace sluice {
namespace {

TEST(Stats, RecordSnapshotReset) {
  Stats s;
  s.record(Path::host, Direction::read, 4096, 2, 1000, false);
  s.record(Path::host, Direction::read, 100, 1, 500, false);
  s.record(Path::bounce, Direction::write, 0, 3, 70, true);
  s.count_staging_wait();
  const StatsSnapshot snap = s.snapshot();
  const PathCounters& hr = snap.at(Path::host, Direction::read);
  EXPECT_EQ(hr.bytes, 4196U);
  EXPECT_EQ(hr.ops, 2U);
  EXPECT_EQ(hr.ios, 3U);
  EXPECT_EQ(hr.errors, 0U);
  EXPECT_EQ(hr.nanoseconds, 1500U);
  const PathCounters& bw = snap.at(Path::bounce, Direction::write);
  EXPECT_EQ(bw.ops, 1U);
  EXPECT_EQ(bw.errors, 1U);
  EXPECT_EQ(bw.ios, 3U);
  EXPECT_EQ(snap.at(Path::host, Direction::write).ops, 0U);
  EXPECT_EQ(snap.at(Path::direct, Direction::read).ops, 0U);
  EXPECT_EQ(snap.staging_waits, 1U);

  reset_stats(s);
  const StatsSnapshot zero = s.snapshot();
  for (const Path p : {Path::host, Path::bounce, Path::posix, Path::direct}) {
    for (const Direction d : {Direction::read, Direction::write}) {
      EXPECT_EQ(zero.at(p, d).bytes, 0U);
      EXPECT_EQ(zero.at(p, d).ops, 0U);
      EXPECT_EQ(zero.at(p, d).errors, 0U);
    }
  }
  EXPECT_EQ(zero.staging_waits, 0U);
}

TEST(Stats, LatencyHistogramPerPathAndDirection) {
  Stats s;
  s.record(Path::bounce, Direction::read, 1, 1, 1000, false);
  s.record(Path::bounce, Direction::read, 1, 1, 3000, false);
  s.record(Path::bounce, Direction::read, 1, 1, 1'000'000, true);  // failures are timed too
  s.record(Path::direct, Direction::write, 1, 1, 50, false);
  const StatsSnapshot snap = s.snapshot();
  const LatencyHistogram& h = snap.latency_of(Path::bounce, Direction::read);
  EXPECT_EQ(h.count(), 3U);
  EXPECT_NEAR(static_cast<double>(h.value_at_percentile(50)), 3000, 3000 * 0.01);
  EXPECT_NEAR(static_cast<double>(h.value_at_percentile(100)), 1e6, 1e6 * 0.01);
  EXPECT_EQ(snap.latency_of(Path::direct, Direction::write).count(), 1U);
  EXPECT_EQ(snap.latency_of(Path::bounce, Direction::write).count(), 0U);
  reset_stats(s);
  EXPECT_EQ(s.snapshot().latency_of(Path::bounce, Direction::read).count(), 0U);
}

TEST(Stats, TargetsAreKeyedByDeviceAndFilesystem) {
  Stats s;
  s.record_target("host", "ext4", Direction::read, 100, 1, 10, false);
  s.record_target("sim", "ext4", Direction::read, 200, 2, 20, false);
  s.record_target("sim", "tmpfs", Direction::write, 300, 3, 30, true);
  const StatsSnapshot snap = s.snapshot();
  ASSERT_EQ(snap.devices.size(), 2U);
  EXPECT_EQ(snap.devices[0].key, "host");  // in the order first seen
  EXPECT_EQ(snap.devices[1].key, "sim");
  EXPECT_EQ(snap.devices[1].dirs[0].bytes, 200U);
  EXPECT_EQ(snap.devices[1].dirs[1].bytes, 300U);
  EXPECT_EQ(snap.devices[1].dirs[1].errors, 1U);
  ASSERT_EQ(snap.filesystems.size(), 2U);
  EXPECT_EQ(snap.filesystems[0].key, "ext4");
  EXPECT_EQ(snap.filesystems[0].dirs[0].bytes, 300U);
  EXPECT_EQ(snap.filesystems[0].dirs[0].ops, 2U);
  EXPECT_EQ(snap.filesystems[1].key, "tmpfs");
  EXPECT_EQ(snap.filesystems[1].dirs[1].ios, 3U);
}

TEST(Stats, KeysBeyondTheSlotsAreCountedAsOther) {
  Stats s;
  for (int i = 0; i < 12; ++i) {
    s.record_target("cuda:" + std::to_string(i), std::string(40, 'x'), Direction::read, 1, 1, 1, false);
  }
  const StatsSnapshot snap = s.snapshot();
  ASSERT_EQ(snap.devices.size(), 8U);
  EXPECT_EQ(snap.devices[6].key, "cuda:6");
  EXPECT_EQ(snap.devices[7].key, "other");
  EXPECT_EQ(snap.devices[7].dirs[0].bytes, 5U);  // cuda:7 .. cuda:11
  ASSERT_EQ(snap.filesystems.size(), 1U);
  EXPECT_EQ(snap.filesystems[0].key, std::string(31, 'x'));  // cut to 31 bytes
  EXPECT_EQ(snap.filesystems[0].dirs[0].ops, 12U);
  reset_stats(s);
  EXPECT_TRUE(s.snapshot().devices.empty());
}

TEST(Stats, FallbacksByReason) {
  Stats s;
  s.count_fallback(Fallback::no_cufile);
  s.count_fallback(Fallback::no_cufile);
  s.count_fallback(Fallback::offset_unaligned);
  const StatsSnapshot snap = s.snapshot();
  EXPECT_EQ(snap.fallbacks_for(Fallback::no_cufile), 2U);
  EXPECT_EQ(snap.fallbacks_for(Fallback::offset_unaligned), 1U);
  EXPECT_EQ(snap.fallbacks_for(Fallback::io_refused), 0U);
  for (std::size_t f = 0; f < fallback_count; ++f) {
    EXPECT_NE(to_string(static_cast<Fallback>(f)), "unknown");
  }
}

TEST(Stats, PathNames) {
  EXPECT_EQ(to_string(Path::host), "host");
  EXPECT_EQ(to_string(Path::bounce), "bounce");
  EXPECT_EQ(to_string(Path::posix), "posix");
  EXPECT_EQ(to_string(Path::direct), "direct");
  for (const Path p : {Path::host, Path::bounce, Path::posix, Path::direct}) {
    EXPECT_EQ(parse_path(to_string(p)), p);
  }
  EXPECT_EQ(parse_path("auto"), std::nullopt);
  EXPECT_EQ(parse_path("Host"), std::nullopt);
}

TEST(Stats, TransfersAreRecordedUnderTheirPathAndDirection) {
  const auto root = test::folder_root(test::Folder::disk);
  test::TempDir dir(root.value_or("/tmp"));
  const std::string path = dir.file("stats.bin");
  const auto data = test::random_bytes(300000, 7);
  test::write_file(path, data);
  const File f = File::open(path, OpenMode::read_write);
  const auto opts = test::options_for(test::make_config("psync", {.io_size = 64 * KiB, .threads = 2}));
  test::GuardedBuffer buf(data.size(), 3);

  const StatsSnapshot before = stats().snapshot();
  const TransferResult r = read(f, buf.data(), data.size(), 0, opts);
  const StatsSnapshot mid = stats().snapshot();
  EXPECT_EQ(mid.at(Path::host, Direction::read).bytes - before.at(Path::host, Direction::read).bytes,
            data.size());
  EXPECT_EQ(mid.at(Path::host, Direction::read).ops - before.at(Path::host, Direction::read).ops, 1U);
  EXPECT_EQ(mid.at(Path::host, Direction::read).ios - before.at(Path::host, Direction::read).ios, r.ios);
  EXPECT_GT(mid.at(Path::host, Direction::read).nanoseconds, before.at(Path::host, Direction::read).nanoseconds);
  EXPECT_EQ(mid.at(Path::host, Direction::write).ops, before.at(Path::host, Direction::write).ops);
  // The same transfer by device ("host") and by the file's file system.
  auto keyed_bytes = [](const std::vector<KeyedCounters>& list, std::string_view key) {
    for (const auto& k : list) {
      if (k.key == key) return k.dirs[0].bytes;
    }
    return std::uint64_t{0};
  };
  EXPECT_EQ(keyed_bytes(mid.devices, "host") - keyed_bytes(before.devices, "host"), data.size());
  EXPECT_EQ(keyed_bytes(mid.filesystems, f.fs_type()) - keyed_bytes(before.filesystems, f.fs_type()),
            data.size());

  // A short read at the end of the file records the bytes there were.
  (void)read(f, buf.data(), 5000, data.size() - 1000, opts);
  const StatsSnapshot eof = stats().snapshot();
  EXPECT_EQ(eof.at(Path::host, Direction::read).bytes - mid.at(Path::host, Direction::read).bytes, 1000U);

  (void)write(f, buf.data(), 12345, 7, opts);
  const StatsSnapshot after = stats().snapshot();
  EXPECT_EQ(after.at(Path::host, Direction::write).bytes - eof.at(Path::host, Direction::write).bytes, 12345U);
  EXPECT_EQ(after.at(Path::host, Direction::write).ops - eof.at(Path::host, Direction::write).ops, 1U);
  EXPECT_EQ(after.at(Path::host, Direction::write).errors, eof.at(Path::host, Direction::write).errors);
}

TEST(Stats, FailedTransfersCountAsErrors) {
  test::TempDir dir("/tmp");
  const std::string path = dir.file("stats-err.bin");
  test::write_file(path, test::random_bytes(64 * KiB, 8));
  const File f = File::open(path, OpenMode::read);
  const auto opts = test::options_for(test::make_config("psync", {.io_size = 4096, .threads = 1}));
  test::ScopedEngineFactory faults([](EngineKind kind, unsigned depth) -> std::unique_ptr<IoEngine> {
    return std::make_unique<FaultyEngine>(test::make_inner_engine(kind, depth),
                                          FaultPlan{.every = 1, .error = EIO});
  });
  test::GuardedBuffer buf(64 * KiB);
  const StatsSnapshot before = stats().snapshot();
  EXPECT_THROW((void)read(f, buf.data(), 64 * KiB, 0, opts), Error);
  const StatsSnapshot after = stats().snapshot();
  EXPECT_EQ(after.at(Path::host, Direction::read).errors - before.at(Path::host, Direction::read).errors, 1U);
  EXPECT_EQ(after.at(Path::host, Direction::read).bytes, before.at(Path::host, Direction::read).bytes);
}

}  // namespace
}  // namespace sluice
