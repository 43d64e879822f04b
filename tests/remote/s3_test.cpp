// s3:// URLs against an S3 emulator that checks SigV4 signatures (@20minutes/s3rver), started
// here on 127.0.0.1, with the objects uploaded by an independent client (boto3): whole objects
// and random ranges equal to the file, and a wrong secret, a missing key and a missing bucket
// each a clear error naming the URL.
#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "servers.hpp"
#include "sluice/remote.hpp"
#include "sluice/remote_check.hpp"
#include "support/test_util.hpp"

namespace sluice {
namespace {

constexpr std::uint64_t object_size = 2 * 1024 * 1024 + 777;
const std::string key = "dir/a b+c=d.bin";  // encoded in the path, and signed as encoded

class S3Test : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::make_unique<test::TempDir>("/tmp", "sluice-s3-");
    ::mkdir(dir_->file("store").c_str(), 0755);
    server_ = std::make_unique<test::S3Server>(dir_->file("store"));
    if (!server_->ok()) SLUICE_SKIP_OR_FAIL(server_->why());
    data_ = test::random_bytes(object_size, 11);
    test::write_file(dir_->file("obj.bin"), data_);
    ASSERT_TRUE(server_->put(key, dir_->file("obj.bin")));
    for (const char* name :
         {"AWS_ENDPOINT_URL_S3", "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION", "AWS_CA_BUNDLE",
          "AWS_PROFILE", "AWS_NO_SIGN_REQUEST", "SLUICE_S3_ADDRESSING_STYLE"}) {
      env_.push_back(std::make_unique<test::ScopedEnv>(name, std::nullopt));
    }
    // Shared files in the test's folder (empty unless a test writes them), never ~/.aws.
    set_env("AWS_CONFIG_FILE", dir_->file("aws-config"));
    set_env("AWS_SHARED_CREDENTIALS_FILE", dir_->file("aws-credentials"));
    set_env("AWS_ENDPOINT_URL", server_->endpoint());
    set_env("AWS_REGION", "us-east-1");
    set_env("AWS_ACCESS_KEY_ID", "S3RVER");
    set_env("AWS_SECRET_ACCESS_KEY", "S3RVER");
  }
  // Restored newest first: a variable set twice gets its first value back, not the middle one.
  void TearDown() override {
    while (!env_.empty()) env_.pop_back();
  }
  // The emulator's keys and endpoint in a profile of temporary shared files, as a user configures
  // S3: nothing in the environment but AWS_PROFILE and the files' paths.
  void use_profile(const std::string& secret) {
    for (const char* name : {"AWS_ENDPOINT_URL", "AWS_REGION", "AWS_ACCESS_KEY_ID",
                             "AWS_SECRET_ACCESS_KEY"}) {
      env_.push_back(std::make_unique<test::ScopedEnv>(name, std::nullopt));
    }
    write_text(dir_->file("aws-credentials"),
               "[default]\naws_access_key_id = NOT-THIS-ONE\naws_secret_access_key = x\n"
               "[s3test]\naws_access_key_id = S3RVER\naws_secret_access_key = " + secret + "\n");
    write_text(dir_->file("aws-config"), "[profile s3test]\nregion = us-east-1\ns3 =\n"
                                         "  endpoint_url = " + server_->endpoint() + "\n");
    set_env("AWS_PROFILE", "s3test");
  }
  static void write_text(const std::string& path, const std::string& text) {
    const auto* b = reinterpret_cast<const std::byte*>(text.data());
    test::write_file(path, std::vector<std::byte>(b, b + text.size()));
  }
  void set_env(const std::string& name, const std::string& value) {
    env_.push_back(std::make_unique<test::ScopedEnv>(name, value));
  }
  static RemoteOptions options() {
    RemoteOptions o;
    o.part_size = 256 * 1024;
    o.in_flight = 8;
    return o;
  }
  std::unique_ptr<test::TempDir> dir_;
  std::unique_ptr<test::S3Server> server_;
  std::vector<std::unique_ptr<test::ScopedEnv>> env_;
  std::vector<std::byte> data_;
};

TEST_F(S3Test, WholeObjectAndRandomRangesEqualTheFile) {
  RemoteReader r("s3://sluice-test/" + key, options());
  std::vector<std::byte> out(object_size);
  EXPECT_EQ(r.read(out.data(), out.size(), 0).bytes, object_size);
  EXPECT_TRUE(out == data_);
  std::mt19937_64 rng(5);
  for (int i = 0; i < 20; ++i) {
    const std::uint64_t offset = rng() % object_size, n = 1 + rng() % (600 * 1024);
    const std::uint64_t got = std::min(n, object_size - offset);
    std::vector<std::byte> part(n);
    ASSERT_EQ(r.read(part.data(), n, offset).bytes, got);
    EXPECT_TRUE(std::equal(part.begin(), part.begin() + static_cast<std::ptrdiff_t>(got),
                           data_.begin() + static_cast<std::ptrdiff_t>(offset)));
  }
  EXPECT_EQ(r.endpoint(), server_->endpoint());
}

void expect_error(const std::string& url, int err, const std::string& text) {
  RemoteReader r(url, RemoteOptions{});
  std::vector<std::byte> out(100);
  const auto e = test::error_of([&] { r.read(out.data(), out.size(), 0); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->errno_value(), err) << e->what();
  EXPECT_EQ(e->path(),
            url.substr(0, url.find('?')) + (url.find('?') == std::string::npos ? "" : "?..."));
  EXPECT_NE(std::string(e->what()).find(text), std::string::npos) << e->what();
  EXPECT_EQ(r.stats().requests, 1U);  // none of these is retried
}

TEST_F(S3Test, WrongSecretIsSignatureDoesNotMatch) {
  set_env("AWS_SECRET_ACCESS_KEY", "not-the-secret");
  expect_error("s3://sluice-test/" + key, EACCES, "HTTP 403 SignatureDoesNotMatch");
}

// Without keys the GETs go unsigned (public buckets); the emulator, like S3 for a public object,
// serves them (a wrong secret, above, shows that signed ones are checked).
TEST_F(S3Test, NoKeysMeansUnsignedRequests) {
  set_env("AWS_ACCESS_KEY_ID", "");
  set_env("AWS_SECRET_ACCESS_KEY", "");
  RemoteReader r("s3://sluice-test/" + key, options());
  std::vector<std::byte> out(object_size);
  EXPECT_EQ(r.read(out.data(), out.size(), 0).bytes, object_size);
  EXPECT_TRUE(out == data_);
}

TEST_F(S3Test, MissingKeyAndBucketAreErrors) {
  expect_error("s3://sluice-test/no/such/key", ENOENT, "HTTP 404 NoSuchKey");
  expect_error("s3://no-such-bucket/key", ENOENT, "HTTP 404 NoSuchBucket");
}

// A presigned URL is a plain https:// (here http://) URL: read unsigned, ranges and all; once
// expired, S3's 403 is an error at once.
TEST_F(S3Test, PresignedUrlsReadAndExpire) {
  const std::string url = server_->presign(key, 600);
  ASSERT_NE(url.find("X-Amz-Signature="), std::string::npos) << url;
  RemoteReader r(url, options());
  std::vector<std::byte> out(object_size);
  EXPECT_EQ(r.read(out.data(), out.size(), 0).bytes, object_size);
  EXPECT_TRUE(out == data_);
  const std::string expiring = server_->presign(key, 1);
  ASSERT_FALSE(expiring.empty());
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));
  expect_error(expiring, EACCES, "HTTP 403 AccessDenied");
  RemoteReader shown(expiring, options());
  EXPECT_EQ(shown.url(), expiring.substr(0, expiring.find('?')) + "?...");  // no signature shown
}

TEST_F(S3Test, ProfileInSharedFilesGivesKeysAndEndpoint) {
  use_profile("S3RVER");
  RemoteReader r("s3://sluice-test/" + key, options());
  std::vector<std::byte> out(object_size);
  EXPECT_EQ(r.read(out.data(), out.size(), 0).bytes, object_size);
  EXPECT_TRUE(out == data_);
  EXPECT_EQ(r.endpoint(), server_->endpoint());
  use_profile("not-the-secret");  // the profile's keys are the ones signing
  expect_error("s3://sluice-test/" + key, EACCES, "HTTP 403 SignatureDoesNotMatch");
}

TEST_F(S3Test, CheckSaysWhereRequestsGoAndTheirAnswer) {
  use_profile("S3RVER");
  const RemoteCheck c = check_remote("s3://sluice-test/" + key);
  EXPECT_EQ(c.endpoint, server_->endpoint());
  EXPECT_EQ(c.endpoint_from, "profile s3test in " + dir_->file("aws-config"));
  EXPECT_EQ(c.region, "us-east-1");
  EXPECT_EQ(c.addressing, "path-style");
  EXPECT_EQ(c.credentials, "profile s3test in " + dir_->file("aws-credentials"));
  EXPECT_EQ(c.access_key, "**RVER");
  EXPECT_FALSE(c.tls);
  EXPECT_TRUE(c.probed);
  EXPECT_EQ(c.http_status, 206);
  EXPECT_TRUE(c.error.empty()) << c.error;
  ASSERT_TRUE(c.object_size);
  EXPECT_EQ(*c.object_size, object_size);
  EXPECT_GT(c.total_ms, 0.0);
  const test::CliRun run = test::run_captured(
      SLUICE_CLI_PATH, "check " + test::shell_quote("s3://sluice-test/" + key), dir_->path());
  ASSERT_EQ(run.rc, 0) << run.err;
  for (const std::string& want : std::vector<std::string>{
           "Remote s3://sluice-test/" + key, "endpoint: " + server_->endpoint(),
        std::string("addressing: path-style (auto: the endpoint's host is an IP address or localhost)"),
        "credentials: profile s3test in " + dir_->file("aws-credentials"),
        std::string("TLS: none (http)"), std::string("-> HTTP 206 in "),
        "object " + std::to_string(object_size) + " bytes"}) {
    EXPECT_NE(run.out.find(want), std::string::npos) << want << "\n" << run.out;
  }
  EXPECT_EQ(run.out.find("S3RVER"), std::string::npos) << run.out;  // the secret (and whole key id)
}

TEST_F(S3Test, CheckReportsAWrongSecretClearlyAndNeverPrintsIt) {
  const std::string secret = "wrong-secret-7f3a9c";
  use_profile(secret);
  const test::CliRun run = test::run_captured(
      SLUICE_CLI_PATH, "check --json " + test::shell_quote("s3://sluice-test/" + key),
      dir_->path());
  EXPECT_EQ(run.rc, 1);
  EXPECT_NE(run.err.find("HTTP 403 SignatureDoesNotMatch"), std::string::npos) << run.err;
  const auto j = nlohmann::json::parse(run.out);
  ASSERT_EQ(j["remote"].size(), 1U);
  EXPECT_EQ(j["remote"][0]["request"]["http_status"], 403);
  EXPECT_EQ(j["remote"][0]["request"]["s3_code"], "SignatureDoesNotMatch");
  const test::CliRun text = test::run_captured(
      SLUICE_CLI_PATH, "check " + test::shell_quote("s3://sluice-test/" + key), dir_->path());
  EXPECT_NE(text.out.find("-> HTTP 403 SignatureDoesNotMatch"), std::string::npos) << text.out;
  for (const std::string* o : {&run.out, &run.err, &text.out, &text.err})
    EXPECT_EQ(o->find(secret), std::string::npos) << *o;
  // A missing key is S3's NoSuchKey, from the environment's keys this time.
  set_env("AWS_ACCESS_KEY_ID", "S3RVER");
  set_env("AWS_SECRET_ACCESS_KEY", "S3RVER");
  const RemoteCheck c = check_remote("s3://sluice-test/no/such/key");
  EXPECT_EQ(c.http_status, 404);
  EXPECT_EQ(c.s3_code, "NoSuchKey");
  EXPECT_NE(c.credentials.find("environment"), std::string::npos);
}

TEST_F(S3Test, BadUrlsAreUsageErrors) {
  for (const char* bad : {"s3://", "s3://bucket-only", "s3://bucket/", "ftp://host/x"}) {
    const auto e = test::error_of([&] { RemoteReader r(bad, RemoteOptions{}); });
    ASSERT_TRUE(e) << bad;
    EXPECT_EQ(e->errno_value(), EINVAL) << bad;
  }
}

}  // namespace
}  // namespace sluice
