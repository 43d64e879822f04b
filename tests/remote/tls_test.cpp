// TLS to an S3 endpoint signed by a private CA: nginx serving https with a self-signed
// certificate (openssl) stands in for the endpoint (path-style s3:// requests are plain GETs of
// /BUCKET/KEY, unsigned here). Without a CA bundle the check and a read fail naming the
// verification; with AWS_CA_BUNDLE, or the profile's ca_bundle, both succeed and say so.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cerrno>
#include <memory>
#include <vector>

#include "servers.hpp"
#include "sluice/remote.hpp"
#include "sluice/remote_check.hpp"
#include "support/test_util.hpp"

namespace sluice {
namespace {

constexpr std::uint64_t object_size = 300 * 1024 + 5;

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::make_unique<test::TempDir>("/tmp", "sluice-tls-");
    for (const char* d : {"www", "www/bucket", "nginx", "tls"})
      ::mkdir(dir_->file(d).c_str(), 0755);
    if (!test::make_test_certificate(dir_->file("tls")))
      SLUICE_SKIP_OR_FAIL("openssl (a test certificate)");
    data_ = test::random_bytes(object_size, 3);
    test::write_file(dir_->file("www/bucket/obj.bin"), data_);
    nginx_ =
        std::make_unique<test::Nginx>(dir_->file("www"), dir_->file("nginx"), dir_->file("tls"));
    if (!nginx_->ok()) SLUICE_SKIP_OR_FAIL(nginx_->why());
    for (const char* n : {"AWS_ENDPOINT_URL_S3", "AWS_REGION", "AWS_DEFAULT_REGION",
                          "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                          "AWS_CA_BUNDLE", "AWS_PROFILE", "SLUICE_S3_ADDRESSING_STYLE"}) {
      env_.push_back(std::make_unique<test::ScopedEnv>(n, std::nullopt));
    }
    const std::string url = nginx_->url("");  // https://127.0.0.1:PORT/
    set("AWS_ENDPOINT_URL", url.substr(0, url.size() - 1));
    set("AWS_NO_SIGN_REQUEST", "true");
    set("AWS_CONFIG_FILE", dir_->file("aws-config"));
    set("AWS_SHARED_CREDENTIALS_FILE", dir_->file("aws-credentials"));
  }
  void TearDown() override {
    while (!env_.empty()) env_.pop_back();  // newest first
  }
  void set(const char* n, const std::string& v) {
    env_.push_back(std::make_unique<test::ScopedEnv>(n, v));
  }
  void expect_read_ok() {
    RemoteReader r("s3://bucket/obj.bin", RemoteOptions{});
    std::vector<std::byte> out(object_size);
    EXPECT_EQ(r.read(out.data(), out.size(), 0).bytes, object_size);
    EXPECT_TRUE(out == data_);
  }
  void expect_verified(const std::string& bundle_from) {
    const RemoteCheck c = check_remote("s3://bucket/obj.bin");
    EXPECT_TRUE(c.tls);
    EXPECT_EQ(c.http_status, 206);
    EXPECT_TRUE(c.error.empty()) << c.error;
    EXPECT_EQ(c.tls_verify, "verified (certificate chain and host name)");
    EXPECT_EQ(c.ca_bundle, dir_->file("tls/cert.pem"));
    EXPECT_EQ(c.ca_bundle_from, bundle_from);
    EXPECT_GT(c.tls_ms, 0.0);
    ASSERT_TRUE(c.object_size);
    EXPECT_EQ(*c.object_size, object_size);
  }
  std::unique_ptr<test::TempDir> dir_;
  std::unique_ptr<test::Nginx> nginx_;
  std::vector<std::unique_ptr<test::ScopedEnv>> env_;
  std::vector<std::byte> data_;
};

TEST_F(TlsTest, UnknownCaFailsVerificationAndSaysWhatToSet) {
  const RemoteCheck c = check_remote("s3://bucket/obj.bin");
  EXPECT_TRUE(c.tls);
  EXPECT_EQ(c.http_status, 0);
  EXPECT_EQ(c.ca_bundle_from, "libcurl's default");
  EXPECT_TRUE(c.tls_verify.starts_with("failed: ")) << c.tls_verify;
  EXPECT_NE(c.tls_verify.find("AWS_CA_BUNDLE"), std::string::npos) << c.tls_verify;
  EXPECT_FALSE(c.error.empty());
  RemoteReader r("s3://bucket/obj.bin", RemoteOptions{});
  std::vector<std::byte> out(16);
  const auto e = test::error_of([&] { r.read(out.data(), out.size(), 0); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->path(), "s3://bucket/obj.bin");
  EXPECT_NE(std::string(e->what()).find("set AWS_CA_BUNDLE"), std::string::npos) << e->what();
}

TEST_F(TlsTest, CaBundleFromTheEnvironmentVerifies) {
  set("AWS_CA_BUNDLE", dir_->file("tls/cert.pem"));
  expect_verified("AWS_CA_BUNDLE");
  expect_read_ok();
}

TEST_F(TlsTest, CaBundleFromTheProfileVerifies) {
  const std::string conf = "[default]\nca_bundle = " + dir_->file("tls/cert.pem") + "\n";
  const auto* b = reinterpret_cast<const std::byte*>(conf.data());
  test::write_file(dir_->file("aws-config"), std::vector<std::byte>(b, b + conf.size()));
  expect_verified("profile default in " + dir_->file("aws-config"));
  expect_read_ok();
}

}  // namespace
}  // namespace sluice
