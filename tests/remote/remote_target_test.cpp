// How URLs resolve to requests (src/io/remote_target.hpp): S3 endpoints, regions, addressing,
// key encoding and where the credentials come from; no request is sent.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "io/remote_target.hpp"
#include "sluice/remote.hpp"
#include "support/test_util.hpp"

namespace sluice::remote {
namespace {

class RemoteTarget : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* n :
         {"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_REGION", "AWS_DEFAULT_REGION",
          "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_CA_BUNDLE",
          "AWS_PROFILE", "AWS_NO_SIGN_REQUEST", "SLUICE_S3_ADDRESSING_STYLE"}) {
      env_.push_back(std::make_unique<test::ScopedEnv>(n, std::nullopt));
    }
    // No shared files: this machine's ~/.aws must not change the answers.
    set("AWS_CONFIG_FILE", "/nonexistent/sluice-test/config");
    set("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/sluice-test/credentials");
  }
  // Restored newest first: a variable set twice gets its first value back, not the middle one.
  void TearDown() override {
    while (!env_.empty()) env_.pop_back();
  }
  void set(const char* n, const char* v) {
    env_.push_back(std::make_unique<test::ScopedEnv>(n, v));
  }
  std::vector<std::unique_ptr<test::ScopedEnv>> env_;
};

TEST_F(RemoteTarget, HttpUrlsGoAsTheyAre) {
  const auto t = resolve_remote("https://example.com:8443/a/b.bin?x=1");
  EXPECT_EQ(t.request_url, "https://example.com:8443/a/b.bin?x=1");
  EXPECT_EQ(t.endpoint, "https://example.com:8443");
  EXPECT_FALSE(t.sign);
}

TEST_F(RemoteTarget, AwsDefaultsAreVirtualHostedAndUnsignedWithoutKeys) {
  const auto t = resolve_remote("s3://bucket/k/x.bin");
  EXPECT_EQ(t.request_url, "https://bucket.s3.us-east-1.amazonaws.com/k/x.bin");
  EXPECT_EQ(t.addressing, "virtual-hosted");
  EXPECT_FALSE(t.sign);
  set("AWS_DEFAULT_REGION", "eu-west-1");
  EXPECT_EQ(resolve_remote("s3://bucket/k").request_url,
            "https://bucket.s3.eu-west-1.amazonaws.com/k");
  set("AWS_REGION", "ap-south-1");  // wins over AWS_DEFAULT_REGION
  EXPECT_EQ(resolve_remote("s3://bucket/k").request_url,
            "https://bucket.s3.ap-south-1.amazonaws.com/k");
  // A bucket with a dot cannot be a TLS host name: path-style.
  EXPECT_EQ(resolve_remote("s3://my.bucket/k").request_url,
            "https://s3.ap-south-1.amazonaws.com/my.bucket/k");
}

TEST_F(RemoteTarget, CustomEndpointsAndCredentials) {
  set("AWS_ENDPOINT_URL", "http://127.0.0.1:9000/");
  set("AWS_ACCESS_KEY_ID", "AKID");
  set("AWS_SECRET_ACCESS_KEY", "SECRET");
  set("AWS_SESSION_TOKEN", "TOKEN");
  auto t = resolve_remote("s3://b/dir/a b+c.bin");
  EXPECT_EQ(t.request_url, "http://127.0.0.1:9000/b/dir/a%20b%2Bc.bin");
  EXPECT_EQ(t.addressing, "path-style");
  ASSERT_TRUE(t.sign);
  EXPECT_EQ(t.sign->region, "us-east-1");
  EXPECT_EQ(t.sign->session_token, "TOKEN");
  EXPECT_EQ(t.credentials.find("SECRET"), std::string::npos);
  set("AWS_ENDPOINT_URL_S3", "https://localhost:9443");  // wins over AWS_ENDPOINT_URL
  EXPECT_EQ(resolve_remote("s3://b/k").request_url, "https://localhost:9443/b/k");
  set("AWS_ENDPOINT_URL_S3", "https://minio.example.com");
  EXPECT_EQ(resolve_remote("s3://b/k").request_url, "https://b.minio.example.com/k");
}

TEST_F(RemoteTarget, InFlightFromATargetBandwidth) {
  EXPECT_EQ(RemoteOptions::in_flight_for(0), 8U);
  EXPECT_EQ(RemoteOptions::in_flight_for(85'000'000ULL * 12), 12U);
  EXPECT_EQ(RemoteOptions::in_flight_for(85'000'000ULL * 12 + 1), 13U);
  EXPECT_EQ(RemoteOptions::in_flight_for(100ULL << 30), 128U);
  const test::ScopedEnv no_in_flight("SLUICE_REMOTE_IN_FLIGHT", std::nullopt);
  const test::ScopedEnv bw("SLUICE_REMOTE_BANDWIDTH", "2G");  // 2 GiB/s: 25.3 -> 26
  EXPECT_EQ(RemoteOptions::from_environment().in_flight, 26U);
  const test::ScopedEnv in_flight("SLUICE_REMOTE_IN_FLIGHT", "5");  // the explicit one wins
  EXPECT_EQ(RemoteOptions::from_environment().in_flight, 5U);
}

TEST_F(RemoteTarget, KeyEncoding) {
  EXPECT_EQ(encode_key("a/b-c_d.e~f"), "a/b-c_d.e~f");
  EXPECT_EQ(encode_key("a b+c=d&é"), "a%20b%2Bc%3Dd%26%C3%A9");
}

}  // namespace
}  // namespace sluice::remote
