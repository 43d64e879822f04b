// The AWS shared configuration (src/io/aws_config.hpp) over temporary files, no request sent:
// the INI format, and each precedence rule of docs/remote.md's table (environment > credentials
// file > config file > default), as resolve_remote() applies them to s3:// URLs.
#include <gtest/gtest.h>

#include <cerrno>
#include <memory>
#include <vector>

#include "io/aws_config.hpp"
#include "io/remote_target.hpp"
#include "support/test_util.hpp"

namespace sluice::remote {
namespace {

class AwsConfig : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::make_unique<test::TempDir>("/tmp", "sluice-aws-");
    for (const char* n :
         {"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_REGION", "AWS_DEFAULT_REGION",
          "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_CA_BUNDLE",
          "AWS_PROFILE", "AWS_NO_SIGN_REQUEST", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS",
          "SLUICE_S3_ADDRESSING_STYLE"}) {
      env_.push_back(std::make_unique<test::ScopedEnv>(n, std::nullopt));
    }
    set("AWS_SHARED_CREDENTIALS_FILE", creds());
    set("AWS_CONFIG_FILE", config());
  }
  // Restored newest first: a variable set twice gets its first value back, not the middle one.
  void TearDown() override {
    while (!env_.empty()) env_.pop_back();
  }
  void set(const char* n, const std::string& v) {
    env_.push_back(std::make_unique<test::ScopedEnv>(n, v));
  }
  [[nodiscard]] std::string creds() const { return dir_->file("credentials"); }
  [[nodiscard]] std::string config() const { return dir_->file("config"); }
  static void write(const std::string& path, const std::string& text) {
    test::write_file(path, std::vector<std::byte>(
                               reinterpret_cast<const std::byte*>(text.data()),
                               reinterpret_cast<const std::byte*>(text.data()) + text.size()));
  }
  std::unique_ptr<test::TempDir> dir_;
  std::vector<std::unique_ptr<test::ScopedEnv>> env_;
};

TEST(AwsIni, SectionsCommentsAndNestedBlocks) {
  const IniSections ini = parse_aws_ini(
      "# comment\n[default]\nregion = eu-west-1\n; another\n  Aws_Access_Key_Id=AK \n"
      "s3 =\n  addressing_style = path\n  endpoint_url = http://x:1\nregion2 = r\n"
      "[profile dev]\nendpoint_url = https://e\n  indented_without_block = v\nstray line\n");
  ASSERT_EQ(ini.count("default"), 1U);
  const auto& d = ini.at("default");
  EXPECT_EQ(d.at("region"), "eu-west-1");
  EXPECT_EQ(d.at("aws_access_key_id"), "AK");  // keys lower-cased, values trimmed
  EXPECT_EQ(d.at("s3.addressing_style"), "path");
  EXPECT_EQ(d.at("s3.endpoint_url"), "http://x:1");
  EXPECT_EQ(d.at("region2"), "r");  // an unindented line ends the block
  EXPECT_EQ(d.count("s3"), 0U);
  const auto& dev = ini.at("profile dev");
  EXPECT_EQ(dev.at("endpoint_url"), "https://e");
  EXPECT_EQ(dev.at("indented_without_block"), "v");
  EXPECT_EQ(dev.size(), 2U);
}

TEST_F(AwsConfig, NoFilesNoEnvironmentMeansAnonymousDefaults) {
  const AwsSettings s = resolve_aws_settings();
  EXPECT_EQ(s.profile, "default");
  EXPECT_TRUE(s.key_id.empty());
  EXPECT_NE(s.credentials.find("none: anonymous"), std::string::npos) << s.credentials;
  EXPECT_EQ(s.region.value, "us-east-1");
  EXPECT_EQ(s.region.from, "default");
  EXPECT_TRUE(s.endpoint.value.empty());
  EXPECT_EQ(s.addressing.value, "auto");
  EXPECT_TRUE(s.ca_bundle.value.empty());
  EXPECT_FALSE(resolve_remote("s3://b/k").sign);
}

TEST_F(AwsConfig, KeysFromEnvironmentThenCredentialsFileThenConfigFile) {
  write(creds(),
        "[default]\naws_access_key_id = CREDID\naws_secret_access_key = CREDSECRET\n"
        "aws_session_token = CREDTOKEN\n");
  write(config(), "[default]\naws_access_key_id = CONFID\naws_secret_access_key = CONFSECRET\n");
  AwsSettings s = resolve_aws_settings();
  EXPECT_EQ(s.key_id, "CREDID");
  EXPECT_EQ(s.secret, "CREDSECRET");
  EXPECT_EQ(s.session_token, "CREDTOKEN");
  EXPECT_EQ(s.credentials, "profile default in " + creds());
  set("AWS_ACCESS_KEY_ID", "ENVID");
  set("AWS_SECRET_ACCESS_KEY", "ENVSECRET");
  s = resolve_aws_settings();
  EXPECT_EQ(s.key_id, "ENVID");
  EXPECT_TRUE(s.session_token.empty());  // the file's token does not go with the variables' keys
  EXPECT_EQ(s.credentials.find("ENVSECRET"), std::string::npos);
  EXPECT_NE(s.credentials.find("environment"), std::string::npos);
  set("AWS_ACCESS_KEY_ID", "");  // half a pair in the environment is none
  write(creds(), "[other]\naws_access_key_id = X\naws_secret_access_key = Y\n");
  s = resolve_aws_settings();
  EXPECT_EQ(s.key_id, "CONFID");
  EXPECT_EQ(s.credentials, "profile default in " + config());
}

TEST_F(AwsConfig, ProfileSelectsSectionsOfBothFiles) {
  write(creds(), "[dev]\naws_access_key_id = DEVID\naws_secret_access_key = DEVSECRET\n");
  write(config(),
        "[default]\nregion = eu-west-1\n[profile dev]\nregion = ap-south-1\n"
        "endpoint_url = http://127.0.0.1:9000\n[dev]\nregion = wrong\n");
  set("AWS_PROFILE", "dev");
  const AwsSettings s = resolve_aws_settings();
  EXPECT_EQ(s.profile, "dev");
  EXPECT_EQ(s.key_id, "DEVID");
  EXPECT_EQ(s.credentials, "profile dev in " + creds());
  EXPECT_EQ(s.region.value, "ap-south-1");  // [profile dev], not [dev], in the config file
  EXPECT_EQ(s.region.from, "profile dev in " + config());
  const RemoteTarget t = resolve_remote("s3://bucket/k");
  EXPECT_EQ(t.request_url, "http://127.0.0.1:9000/bucket/k");
  ASSERT_TRUE(t.sign);
  EXPECT_EQ(t.sign->region, "ap-south-1");
  set("AWS_PROFILE", "missing");
  const auto e = test::error_of([] { (void)resolve_aws_settings(); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->errno_value(), EINVAL);
  EXPECT_NE(std::string(e->what()).find("'missing'"), std::string::npos) << e->what();
}

TEST_F(AwsConfig, DefaultProfileAlsoAsProfileDefault) {
  write(config(), "[profile default]\nregion = ca-central-1\n");
  EXPECT_EQ(resolve_aws_settings().region.value, "ca-central-1");
}

TEST_F(AwsConfig, RegionPrecedence) {
  write(config(), "[default]\nregion = eu-west-1\n");
  EXPECT_EQ(resolve_aws_settings().region.value, "eu-west-1");
  set("AWS_DEFAULT_REGION", "eu-north-1");
  EXPECT_EQ(resolve_aws_settings().region.value, "eu-north-1");
  set("AWS_REGION", "us-west-2");
  const AwsSettings s = resolve_aws_settings();
  EXPECT_EQ(s.region.value, "us-west-2");
  EXPECT_EQ(s.region.from, "AWS_REGION");
  EXPECT_EQ(resolve_remote("s3://bucket/k").request_url,
            "https://bucket.s3.us-west-2.amazonaws.com/k");
}

TEST_F(AwsConfig, EndpointPrecedence) {
  write(config(), "[default]\nendpoint_url = http://10.0.0.1:1\n");
  EXPECT_EQ(resolve_aws_settings().endpoint.value, "http://10.0.0.1:1");
  write(config(),
        "[default]\nendpoint_url = http://10.0.0.1:1\ns3 =\n  endpoint_url = http://10.0.0.2:2\n");
  EXPECT_EQ(resolve_aws_settings().endpoint.value, "http://10.0.0.2:2");
  write(config(),
        "[default]\nendpoint_url = http://10.0.0.1:1\nservices = local\n"
        "s3 =\n  endpoint_url = http://10.0.0.2:2\n"
        "[services local]\ns3 =\n  endpoint_url = http://10.0.0.3:3\n");
  AwsSettings s = resolve_aws_settings();
  EXPECT_EQ(s.endpoint.value, "http://10.0.0.3:3");
  EXPECT_EQ(s.endpoint.from, "services local (of profile default) in " + config());
  set("AWS_ENDPOINT_URL", "http://10.0.0.4:4");
  EXPECT_EQ(resolve_aws_settings().endpoint.value, "http://10.0.0.4:4");
  set("AWS_ENDPOINT_URL_S3", "http://10.0.0.5:5");
  s = resolve_aws_settings();
  EXPECT_EQ(s.endpoint.value, "http://10.0.0.5:5");
  EXPECT_EQ(s.endpoint.from, "AWS_ENDPOINT_URL_S3");
  set("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true");  // all of them, variables included
  EXPECT_TRUE(resolve_aws_settings().endpoint.value.empty());
  EXPECT_EQ(resolve_remote("s3://b/k").request_url, "https://b.s3.us-east-1.amazonaws.com/k");
}

TEST_F(AwsConfig, AddressingStyle) {
  set("AWS_ENDPOINT_URL", "http://127.0.0.1:9000");
  EXPECT_EQ(resolve_remote("s3://b/k").addressing, "path-style");  // auto: an IP address
  write(config(), "[default]\ns3 =\n  addressing_style = virtual\n");
  RemoteTarget t = resolve_remote("s3://b/k");
  EXPECT_EQ(t.addressing, "virtual-hosted");
  EXPECT_EQ(t.request_url, "http://b.127.0.0.1:9000/k");
  EXPECT_EQ(t.addressing_from, "addressing_style virtual (profile default in " + config() + ")");
  set("AWS_ENDPOINT_URL", "https://minio.example.com");
  EXPECT_EQ(resolve_remote("s3://b.dotted/k").request_url, "https://b.dotted.minio.example.com/k");
  set("SLUICE_S3_ADDRESSING_STYLE", "path");  // wins over the file
  t = resolve_remote("s3://b/k");
  EXPECT_EQ(t.request_url, "https://minio.example.com/b/k");
  EXPECT_EQ(t.addressing_from, "addressing_style path (SLUICE_S3_ADDRESSING_STYLE)");
  set("SLUICE_S3_ADDRESSING_STYLE", "auto");
  EXPECT_EQ(resolve_remote("s3://b/k").request_url, "https://b.minio.example.com/k");
  set("SLUICE_S3_ADDRESSING_STYLE", "sideways");
  const auto e = test::error_of([] { (void)resolve_remote("s3://b/k"); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->errno_value(), EINVAL);
}

TEST_F(AwsConfig, CaBundlePrecedence) {
  write(config(), "[default]\nca_bundle = /etc/corp-ca.pem\n");
  RemoteTarget t = resolve_remote("s3://b/k");
  EXPECT_EQ(t.ca_bundle, "/etc/corp-ca.pem");
  EXPECT_EQ(t.ca_bundle_from, "profile default in " + config());
  set("AWS_CA_BUNDLE", "/tmp/other.pem");
  t = resolve_remote("s3://b/k");
  EXPECT_EQ(t.ca_bundle, "/tmp/other.pem");
  EXPECT_EQ(t.ca_bundle_from, "AWS_CA_BUNDLE");
}

TEST_F(AwsConfig, NoSignRequestWinsOverKeys) {
  set("AWS_ACCESS_KEY_ID", "ENVID");
  set("AWS_SECRET_ACCESS_KEY", "ENVSECRET");
  set("AWS_NO_SIGN_REQUEST", "true");
  const RemoteTarget t = resolve_remote("s3://b/k");
  EXPECT_FALSE(t.sign);
  EXPECT_NE(t.credentials.find("AWS_NO_SIGN_REQUEST"), std::string::npos) << t.credentials;
}

TEST_F(AwsConfig, ProfilesThatRunSomethingAreRefusedNotSentUnsigned) {
  write(config(),
        "[profile sso]\nsso_session = corp\n[profile proc]\n"
        "credential_process = /usr/bin/get-keys\n");
  for (const char* p : {"sso", "proc"}) {
    set("AWS_PROFILE", p);
    const auto e = test::error_of([] { (void)resolve_remote("s3://b/k"); });
    ASSERT_TRUE(e) << p;
    EXPECT_EQ(e->errno_value(), EINVAL);
    EXPECT_NE(std::string(e->what()).find("export-credentials --profile"), std::string::npos)
        << e->what();
  }
}

}  // namespace
}  // namespace sluice::remote
