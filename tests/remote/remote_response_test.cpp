// The remote reader's response parsers (src/io/remote_response.hpp) on good and bad input.
#include <gtest/gtest.h>

#include <cerrno>

#include "io/remote_response.hpp"

namespace sluice::remote {
namespace {

TEST(RemoteResponse, ContentRangeParses) {
  const auto r = parse_content_range("bytes 0-99/1000");
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->satisfied);
  EXPECT_EQ(r->first, 0U);
  EXPECT_EQ(r->last, 99U);
  EXPECT_EQ(r->total, 1000U);
  const auto unknown = parse_content_range(" bytes 5-9/*\r\n");
  ASSERT_TRUE(unknown);
  EXPECT_FALSE(unknown->total.has_value());
  const auto unsatisfied = parse_content_range("bytes */1000");
  ASSERT_TRUE(unsatisfied);
  EXPECT_FALSE(unsatisfied->satisfied);
  EXPECT_EQ(unsatisfied->total, 1000U);
}

TEST(RemoteResponse, BadContentRangesAreRejected) {
  for (const char* bad :
       {"", "bytes", "bytes 0-99", "items 0-99/1000", "bytes 10-5/1000", "bytes 0-1000/1000",
        "bytes -1-5/10", "bytes 0-5/x", "bytes */*", "bytes 0-99999999999999999999999/1"}) {
    EXPECT_FALSE(parse_content_range(bad)) << bad;
  }
}

TEST(RemoteResponse, HeaderLines) {
  const auto h = parse_header_line("ETag:  \"abc\"\r\n");
  ASSERT_TRUE(h);
  EXPECT_TRUE(header_is(h->name, "etag"));
  EXPECT_EQ(h->value, "\"abc\"");
  EXPECT_FALSE(parse_header_line("HTTP/1.1 206 Partial Content\r\n"));
  EXPECT_FALSE(parse_header_line("\r\n"));
  EXPECT_FALSE(header_is("ETags", "ETag"));
}

TEST(RemoteResponse, S3ErrorDocument) {
  const auto e = parse_s3_error(
      "<?xml version=\"1.0\"?><Error><Code>NoSuchKey</Code><Message>The specified key does not "
      "exist.</Message><Key>a</Key></Error>");
  EXPECT_EQ(e.code, "NoSuchKey");
  EXPECT_EQ(e.message, "The specified key does not exist.");
  EXPECT_TRUE(parse_s3_error("<html>404 Not Found</html>").code.empty());
}

TEST(RemoteResponse, WhatIsRetried) {
  EXPECT_EQ(retry_cause_of_status(503, {"SlowDown", "x"}), "503 SlowDown");
  EXPECT_EQ(retry_cause_of_status(500, {}), "HTTP 500");
  EXPECT_EQ(retry_cause_of_status(429, {}), "HTTP 429");
  for (long s : {400L, 403L, 404L, 412L, 416L}) EXPECT_FALSE(retry_cause_of_status(s, {})) << s;
  EXPECT_EQ(retry_cause_of_curl(56), "reset");       // CURLE_RECV_ERROR
  EXPECT_EQ(retry_cause_of_curl(18), "short body");  // CURLE_PARTIAL_FILE
  EXPECT_EQ(retry_cause_of_curl(28), "timeout or stall");
  EXPECT_FALSE(retry_cause_of_curl(6));  // could not resolve the host: another try cannot help
  EXPECT_EQ(errno_of_status(404), ENOENT);
  EXPECT_EQ(errno_of_status(403), EACCES);
}

// The one backoff of every remote request (reads and uploads): full jitter under the doubling
// ceiling, capped, and never below a server's Retry-After (bounded at 20 s).
TEST(RemoteResponse, BackoffIsJitteredCappedAndHonoursRetryAfter) {
  std::mt19937_64 rng(1);
  for (unsigned attempts = 1; attempts < 30; ++attempts) {
    for (int i = 0; i < 50; ++i) {
      const std::uint64_t w = backoff_ms(attempts, 100, 5000, 0, rng);
      EXPECT_LE(w, std::min<std::uint64_t>(5000, 100ULL << std::min(attempts - 1, 20U))) << attempts;
    }
  }
  EXPECT_GE(backoff_ms(1, 100, 5000, 3, rng), 3000U);
  EXPECT_EQ(backoff_ms(1, 100, 5000, 3600, rng), 20000U);
  EXPECT_TRUE(is_throttle_cause("503 SlowDown"));
  EXPECT_TRUE(is_throttle_cause("HTTP 429"));
  EXPECT_FALSE(is_throttle_cause("HTTP 500"));
  EXPECT_FALSE(is_throttle_cause("reset"));
}

TEST(RemoteResponse, EndpointOfAUrl) {
  EXPECT_EQ(endpoint_of("http://127.0.0.1:8080/a/b?x=1"), "http://127.0.0.1:8080");
  EXPECT_EQ(endpoint_of("https://example.com"), "https://example.com");
  EXPECT_EQ(endpoint_of("https://user:secret@example.com/k"), "https://example.com");
  EXPECT_EQ(endpoint_of("no-scheme"), "");
}

}  // namespace
}  // namespace sluice::remote
