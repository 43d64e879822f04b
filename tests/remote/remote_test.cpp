// RemoteReader against independent servers started here on 127.0.0.1: nginx for the normal path
// (whole objects, random ranges, redirects, a missing object) and the scripted fault server for
// what nginx cannot do (503 bursts, resets, short bodies, Range ignored, a wrong Content-Range,
// the object replaced mid-read, stalls). Every case ends with the file's bytes or a clear Error,
// within a bounded time.
#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <random>

#include <nlohmann/json.hpp>

#include "servers.hpp"
#include "sluice/remote.hpp"
#include "support/test_util.hpp"

namespace sluice {
namespace {

constexpr std::uint64_t object_size = 3 * 1024 * 1024 + 12345;  // parts of 64 KiB: 49 of them

RemoteOptions small_parts() {
  RemoteOptions o;
  o.part_size = 64 * 1024;
  o.in_flight = 8;
  o.backoff_base_ms = 10;
  o.backoff_cap_ms = 100;
  o.low_speed_seconds = 1;
  return o;
}

class RemoteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::make_unique<test::TempDir>("/tmp", "sluice-remote-");
    ::mkdir(dir_->file("www").c_str(), 0755);
    ::mkdir(dir_->file("nginx").c_str(), 0755);
    data_ = test::random_bytes(object_size, 7);
    test::write_file(dir_->file("www/obj.bin"), data_);
  }
  [[nodiscard]] std::vector<std::byte> expected(std::uint64_t offset, std::uint64_t n) const {
    const std::uint64_t end = std::min<std::uint64_t>(offset + n, data_.size());
    if (offset >= end) return {};
    return {data_.begin() + static_cast<std::ptrdiff_t>(offset),
            data_.begin() + static_cast<std::ptrdiff_t>(end)};
  }
  std::unique_ptr<test::TempDir> dir_;
  std::vector<std::byte> data_;
};

std::vector<std::byte> read_range(RemoteReader& r, std::uint64_t offset, std::uint64_t n) {
  std::vector<std::byte> out(n);
  const TransferResult res = r.read(out.data(), n, offset);
  out.resize(res.bytes);
  return out;
}

#define START_NGINX(var)                                   \
  test::Nginx var(dir_->file("www"), dir_->file("nginx")); \
  if (!var.ok()) SLUICE_SKIP_OR_FAIL(var.why())

TEST_F(RemoteTest, WholeObjectFromNginxEqualsTheFile) {
  START_NGINX(nginx);
  RemoteReader r(nginx.url("obj.bin"), small_parts());
  std::vector<std::byte> out(object_size + 100);
  const TransferResult res = r.read(out.data(), out.size(), 0);
  EXPECT_EQ(res.bytes, object_size);
  out.resize(res.bytes);
  EXPECT_TRUE(out == data_);
  ASSERT_TRUE(r.size().has_value());
  EXPECT_EQ(*r.size(), object_size);
  EXPECT_NE(res.reason.find("remote: 49 ranged GETs of 64.0 KiB, 8 in flight"), std::string::npos)
      << res.reason;
  EXPECT_EQ(r.stats().requests, 49U);
  EXPECT_EQ(r.stats().retry_count(), 0U);
  EXPECT_EQ(r.stats().lowest_in_flight, 0U);
  EXPECT_EQ(r.stats().latency_us.count(), 49U);
  EXPECT_GT(r.stats().latency_us.max(), 0U);
  EXPECT_EQ(r.stats().bytes, object_size);
  EXPECT_GE(r.stats().connections, 1U);
  EXPECT_LE(r.stats().connections, 8U);  // at most one per request in flight
  EXPECT_GE(remote_endpoint_stats()[r.endpoint()].requests, 49U);
}

TEST_F(RemoteTest, RandomRangesFromNginxEqualTheFile) {
  START_NGINX(nginx);
  std::mt19937_64 rng(35);
  RemoteReader shared(nginx.url("obj.bin"), small_parts());
  for (int i = 0; i < 60; ++i) {
    const std::uint64_t offset = rng() % (object_size + 1000);
    const std::uint64_t n = 1 + rng() % (i % 3 == 0 ? 1000 : 700 * 1024);
    RemoteReader fresh(nginx.url("obj.bin"), small_parts());
    EXPECT_TRUE(read_range(fresh, offset, n) == expected(offset, n)) << offset << "+" << n;
    EXPECT_TRUE(read_range(shared, offset, n) == expected(offset, n)) << offset << "+" << n;
  }
  // The shared reader kept its connections: far fewer than one per request.
  EXPECT_LT(shared.stats().connections, shared.stats().requests / 4);
}

TEST_F(RemoteTest, RedirectIsFollowed) {
  START_NGINX(nginx);
  RemoteReader r(nginx.url("moved/obj.bin"), small_parts());
  EXPECT_TRUE(read_range(r, 1000, 500000) == expected(1000, 500000));
}

TEST_F(RemoteTest, MissingObjectIsAnErrorNamingTheUrl) {
  START_NGINX(nginx);
  const std::string url = nginx.url("no-such.bin");
  RemoteReader r(url, small_parts());
  std::vector<std::byte> out(1000);
  const auto e = test::error_of([&] { r.read(out.data(), out.size(), 0); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->errno_value(), ENOENT);
  EXPECT_EQ(e->path(), url);
  EXPECT_NE(std::string(e->what()).find("HTTP 404"), std::string::npos) << e->what();
  EXPECT_EQ(r.stats().requests, 1U);  // not retried
}

TEST_F(RemoteTest, CliReadsAUrlAndSaysRemote) {
  START_NGINX(nginx);
  const std::string out = dir_->file("out.bin");
  const test::CliRun run = test::run_captured(
      SLUICE_CLI_PATH,
      "read " + test::shell_quote(nginx.url("obj.bin")) + " --out " + out + " --json",
      dir_->path());
  ASSERT_EQ(run.rc, 0) << run.err;
  const auto j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["path"], "remote");
  EXPECT_EQ(j["bytes"], object_size);
  EXPECT_NE(j["reason"].get<std::string>().find("ranged GET"), std::string::npos);
  // Every request's latency is in the JSON, its percentiles in order.
  EXPECT_EQ(j["latency_us"]["count"], j["ios"]);
  EXPECT_GT(j["latency_us"]["p50"].get<std::uint64_t>(), 0U);
  EXPECT_LE(j["latency_us"]["p50"].get<std::uint64_t>(), j["latency_us"]["p99"].get<std::uint64_t>());
  EXPECT_LE(j["latency_us"]["p99"].get<std::uint64_t>(), j["latency_us"]["max"].get<std::uint64_t>());
  EXPECT_TRUE(test::pread_file(out, 0, object_size + 10) == data_);
  const test::CliRun missing = test::run_captured(
      SLUICE_CLI_PATH, "read " + test::shell_quote(nginx.url("nope")) + " --out " + out,
      dir_->path());
  EXPECT_EQ(missing.rc, 1);
  EXPECT_NE(missing.err.find(nginx.url("nope")), std::string::npos) << missing.err;
}

// --- faults ---

class RemoteFaultTest : public RemoteTest {
 protected:
  void SetUp() override {
    RemoteTest::SetUp();
    server_ = std::make_unique<test::FaultServer>(dir_->file("www/obj.bin"));
    if (!server_->ok())
      SLUICE_SKIP_OR_FAIL("the fault server (tests/remote/fault_server.py) did not start");
  }
  // A whole read of the fault's object, timed: every case must end well within the budget.
  std::vector<std::byte> read_all(const std::string& fault, RemoteReader** keep = nullptr) {
    reader_ = std::make_unique<RemoteReader>(server_->url(fault), small_parts());
    if (keep != nullptr) *keep = reader_.get();
    const auto t0 = std::chrono::steady_clock::now();
    struct Timer {
      std::chrono::steady_clock::time_point t0;
      ~Timer() { EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(60)); }
    } timer{t0};
    return read_range(*reader_, 0, object_size);
  }
  std::unique_ptr<test::FaultServer> server_;
  std::unique_ptr<RemoteReader> reader_;
};

TEST_F(RemoteFaultTest, BurstOf503IsRetriedToTheRightBytes) {
  EXPECT_TRUE(read_all("burst503") == data_);
  EXPECT_EQ(reader_->stats().retries.at("503 SlowDown"), 3U);
  EXPECT_NE(reader_->reason().find("3 retried after 503 SlowDown"), std::string::npos)
      << reader_->reason();  // The three 503s hit the first part (alone until the size is known): 8
                             // -> 4 -> 2 -> 1.
  EXPECT_EQ(reader_->stats().lowest_in_flight, 1U);
  EXPECT_NE(reader_->reason().find("in flight cut to 1 while throttled"), std::string::npos)
      << reader_->reason();
}

// The wait before the retry honours Retry-After (1 s), far above the test's 100 ms backoff cap.
TEST_F(RemoteFaultTest, RetryAfterIsHonoured) {
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(read_all("retryafter") == data_);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(950));
  EXPECT_EQ(reader_->stats().retries.at("503 SlowDown"), 1U);
}

// A slow body (about 40 KiB/s for 1.6 s, above the low-speed limit of 1 KiB/s over 1 s) is not a
// stall: no retry.
TEST_F(RemoteFaultTest, SlowServerIsNotAStall) {
  EXPECT_TRUE(read_all("slow") == data_);
  EXPECT_EQ(reader_->stats().retry_count(), 0U);
}

TEST_F(RemoteFaultTest, ResetMidBodyResumesFromTheLastGoodByte) {
  EXPECT_TRUE(read_all("reset") == data_);
  EXPECT_EQ(reader_->stats().retry_count(), 1U);
}

TEST_F(RemoteFaultTest, ShortBodiesAreResumed) {
  EXPECT_TRUE(read_all("short") == data_);
  EXPECT_EQ(reader_->stats().retry_count(), 1U);
  EXPECT_TRUE(read_all("shortlen") == data_);
  EXPECT_EQ(reader_->stats().retries.at("short body"), 1U);
}

TEST_F(RemoteFaultTest, StallIsCutAndRetried) {
  EXPECT_TRUE(read_all("stall") == data_);
  EXPECT_EQ(reader_->stats().retries.at("timeout or stall"), 1U);
}

void expect_error(RemoteFaultTest* t, const std::function<void()>& fn, int err,
                  const std::string& text) {
  (void)t;
  const auto e = test::error_of(fn);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->errno_value(), err) << e->what();
  EXPECT_NE(std::string(e->what()).find(text), std::string::npos) << e->what();
  EXPECT_TRUE(e->has_range());
}

TEST_F(RemoteFaultTest, ServerIgnoringRangeIsRefused) {
  expect_error(
      this, [&] { read_all("norange"); }, EPROTO, "ignored Range");
  EXPECT_EQ(server_->count("norange"), 1);
}

TEST_F(RemoteFaultTest, WrongContentRangeIsRefused) {
  expect_error(
      this, [&] { read_all("badrange"); }, EPROTO, "the server sent Content-Range 'bytes 1-");
}

TEST_F(RemoteFaultTest, ObjectReplacedMidReadIsAnError) {
  expect_error(
      this, [&] { read_all("replaced"); }, EPROTO, "the object changed during the read");
  expect_error(
      this, [&] { read_all("replaced412"); }, ESTALE, "HTTP 412 PreconditionFailed");
}

TEST_F(RemoteFaultTest, AccessDeniedIsAnErrorAtOnce) {
  expect_error(
      this, [&] { read_all("denied"); }, EACCES, "HTTP 403 AccessDenied: Access Denied");
  EXPECT_EQ(server_->count("denied"), 1);
}

TEST_F(RemoteFaultTest, RetriesEndWithAClearError) {
  expect_error(
      this, [&] { read_all("always500"); }, EIO,
      "gave up after 5 tries, the last failed with 500 InternalError");
  EXPECT_EQ(server_->count("always500"), 5);
  expect_error(
      this, [&] { read_all("stallalways"); }, ETIMEDOUT, "gave up after 5 tries");
}

}  // namespace
}  // namespace sluice
