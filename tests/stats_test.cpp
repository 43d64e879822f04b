#include "sluice/stats.hpp"

#include <gtest/gtest.h>

#include "sluice/error.hpp"
#include "sluice/faulty_engine.hpp"
#include "sluice/file.hpp"
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

  s.reset();
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
