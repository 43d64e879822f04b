// Loading tensor files from URLs (Checkpoint::open of http:// and s3:// objects, sluice load URL)
// against nginx and the S3 emulator started here: every tensor equal to a local load of the same
// file, a --tensors subset reading only its ranges, a header larger than the first ranged read, a
// sharded index by URL, device memory (sim), and a missing object an error naming the URL.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "load/tensor_files.hpp"
#include "servers.hpp"
#include "sluice/load.hpp"
#include "sluice/remote.hpp"
#include "support/test_util.hpp"

namespace sluice {
namespace {

using nlohmann::json;

// A safetensors file of tensors t0..t{n-1}, t_i of sizes[i] random bytes (U8), with `pad` bytes
// of metadata so the header can be made larger than the loader's first ranged read (1 MiB).
void write_safetensors(const std::string& path, const std::vector<std::uint64_t>& sizes,
                       std::size_t pad, std::uint64_t seed) {
  std::uint64_t total = 0;
  for (std::uint64_t n : sizes) total += n;
  const auto data = test::random_bytes(static_cast<std::size_t>(total), seed);
  std::vector<test::StTensor> tensors;
  auto at = data.begin();
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const auto end = at + static_cast<std::ptrdiff_t>(sizes[i]);
    tensors.push_back({fmt::format("t{}", i), "U8", {sizes[i]}, {at, end}});
    at = end;
  }
  const json metadata = pad > 0 ? json{{"pad", std::string(pad, 'x')}} : json(nullptr);
  test::write_file(path, test::safetensors_file(tensors, metadata));
}

const std::vector<std::uint64_t> sizes = {3 * MiB + 13, 1000, 700 * KiB, 5, 2 * MiB};

LoadOptions host_options(std::vector<std::string> tensors = {}) {
  LoadOptions o;
  o.target = LoadTarget::pageable_host;
  o.tensors = std::move(tensors);
  return o;
}

// Every tensor of `got` holds the same bytes as the same tensor of a local load of `local_path`.
void expect_same_as_local(const LoadedTensors& got, const std::string& local_path) {
  const std::vector<std::string> paths{local_path};
  const Checkpoint local_cp = Checkpoint::open(paths);
  const LoadedTensors local = load(local_cp, host_options());
  ASSERT_FALSE(got.tensors().empty());
  for (const LoadedTensor& t : got.tensors()) {
    const LoadedTensor* l = local.find(t.info->name);
    ASSERT_NE(l, nullptr) << t.info->name;
    ASSERT_EQ(t.info->bytes, l->info->bytes);
    EXPECT_EQ(got.xxh3(t), local.xxh3(*l)) << t.info->name;
    if (got.target() != LoadTarget::device) {
      EXPECT_EQ(std::memcmp(t.data, l->data, t.info->bytes), 0);
    }
  }
}

class RemoteLoadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::make_unique<test::TempDir>("/tmp", "sluice-remote-load-");
    ::mkdir(dir_->file("www").c_str(), 0755);
    ::mkdir(dir_->file("nginx").c_str(), 0755);
    write_safetensors(dir_->file("www/m.safetensors"), sizes, 0, 3);
    write_safetensors(dir_->file("www/big-header.safetensors"), {4096, 77}, 1536 * 1024, 4);
    nginx_ = std::make_unique<test::Nginx>(dir_->file("www"), dir_->file("nginx"));
    if (!nginx_->ok()) SLUICE_SKIP_OR_FAIL(nginx_->why());
  }
  [[nodiscard]] Checkpoint open_url(const std::string& name) const {
    const std::vector<std::string> paths{nginx_->url(name)};
    return Checkpoint::open(paths);
  }
  std::unique_ptr<test::TempDir> dir_;
  std::unique_ptr<test::Nginx> nginx_;
};

TEST_F(RemoteLoadTest, EveryTensorEqualsALocalLoad) {
  const Checkpoint cp = open_url("m.safetensors");
  ASSERT_EQ(cp.tensors().size(), sizes.size());
  ASSERT_NE(cp.remote(0), nullptr);
  EXPECT_EQ(cp.remote(0)->stats().requests, 1U);  // the header came by one ranged GET
  EXPECT_THROW((void)cp.file(0), Error);
  const LoadedTensors got = load(cp, host_options());
  EXPECT_EQ(got.path_name(), "remote");
  EXPECT_NE(got.result().reason.find("ranged GET"), std::string::npos) << got.result().reason;
  expect_same_as_local(got, dir_->file("www/m.safetensors"));
}

TEST_F(RemoteLoadTest, TensorSubsetReadsOnlyItsRanges) {
  const Checkpoint cp = open_url("m.safetensors");
  const std::uint64_t after_header = cp.remote(0)->stats().bytes;
  const LoadedTensors got = load(cp, host_options({"t1", "t3"}));
  ASSERT_EQ(got.tensors().size(), 2U);
  EXPECT_EQ(cp.remote(0)->stats().bytes - after_header, sizes[1] + sizes[3]);
  expect_same_as_local(got, dir_->file("www/m.safetensors"));
}

TEST_F(RemoteLoadTest, HeaderLargerThanTheFirstReadAndDeviceMemory) {
  const Checkpoint cp = open_url("big-header.safetensors");
  EXPECT_EQ(cp.remote(0)->stats().requests, 2U);  // the first MiB, then the rest of the header
  LoadOptions o;
  o.target = LoadTarget::device;
  o.device = open_device("sim");
  const LoadedTensors got = load(cp, o);
  EXPECT_EQ(got.path_name(), "remote");
  EXPECT_NE(got.result().reason.find("copied to the device"), std::string::npos)
      << got.result().reason;
  expect_same_as_local(got, dir_->file("www/big-header.safetensors"));
}

TEST_F(RemoteLoadTest, ShardedIndexByUrl) {
  ::mkdir(dir_->file("www/sharded").c_str(), 0755);
  write_safetensors(dir_->file("www/sharded/a.safetensors"), {100, 200}, 0, 5);
  const json index = {{"weight_map", {{"t0", "a.safetensors"}, {"t1", "a.safetensors"}}}};
  std::ofstream(dir_->file("www/sharded/model.safetensors.index.json")) << index.dump();
  const Checkpoint cp = open_url("sharded/model.safetensors.index.json");
  ASSERT_EQ(cp.tensors().size(), 2U);
  EXPECT_EQ(cp.layouts()[0].path, nginx_->url("sharded/a.safetensors"));
  expect_same_as_local(load(cp, host_options()), dir_->file("www/sharded/a.safetensors"));
}

TEST_F(RemoteLoadTest, MissingObjectIsAnErrorNamingTheUrl) {
  const auto e = test::error_of([&] { (void)open_url("nope.safetensors"); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->errno_value(), ENOENT) << e->what();
  EXPECT_EQ(e->path(), nginx_->url("nope.safetensors"));
}

TEST_F(RemoteLoadTest, CliLoadsAUrlAndSaysRemote) {
  const std::string url = test::shell_quote(nginx_->url("m.safetensors"));
  const test::CliRun local = test::run_captured(
      SLUICE_CLI_PATH,
      "load " + dir_->file("www/m.safetensors") + " --memory pageable --checksum --json",
      dir_->path());
  ASSERT_EQ(local.rc, 0) << local.err;
  for (const std::string where : {"--memory pageable", "--device sim"}) {
    const test::CliRun run = test::run_captured(
        SLUICE_CLI_PATH, "load " + url + " " + where + " --checksum --json --tensors t0,t2,t4",
        dir_->path());
    ASSERT_EQ(run.rc, 0) << run.err;
    const auto j = json::parse(run.out);
    const auto l = json::parse(local.out);
    EXPECT_EQ(j["summary"]["path"], "remote") << where;
    EXPECT_EQ(j["summary"]["bytes"], sizes[0] + sizes[2] + sizes[4]);
    ASSERT_EQ(j["tensors"].size(), 3U);
    for (const auto& t : j["tensors"]) {
      const int i = std::stoi(t["name"].get<std::string>().substr(1));
      EXPECT_EQ(t["xxh3"], l["tensors"][static_cast<std::size_t>(i)]["xxh3"]) << t["name"];
    }
  }
  const test::CliRun missing = test::run_captured(
      SLUICE_CLI_PATH,
      "load " + test::shell_quote(nginx_->url("nope.safetensors")) + " --memory pageable",
      dir_->path());
  EXPECT_EQ(missing.rc, 1);
  EXPECT_NE(missing.err.find(nginx_->url("nope.safetensors")), std::string::npos) << missing.err;
}

// --- S3 ---

TEST(RemoteLoadS3Test, S3ObjectEqualsALocalLoadAndAMissingKeyNamesTheUrl) {
  test::TempDir dir("/tmp", "sluice-s3-load-");
  ::mkdir(dir.file("store").c_str(), 0755);
  test::S3Server server(dir.file("store"));
  if (!server.ok()) SLUICE_SKIP_OR_FAIL(server.why());
  write_safetensors(dir.file("m.safetensors"), sizes, 0, 9);
  ASSERT_TRUE(server.put("models/m.safetensors", dir.file("m.safetensors")));
  test::ScopedEnv e0("AWS_ENDPOINT_URL_S3", std::nullopt), e1("AWS_SESSION_TOKEN", std::nullopt),
      e2("AWS_ENDPOINT_URL", server.endpoint()), e3("AWS_REGION", "us-east-1"),
      e4("AWS_ACCESS_KEY_ID", "S3RVER"), e5("AWS_SECRET_ACCESS_KEY", "S3RVER");
  const std::vector<std::string> paths{"s3://sluice-test/models/m.safetensors"};
  const Checkpoint cp = Checkpoint::open(paths);
  const LoadedTensors got = load(cp, host_options());
  EXPECT_EQ(got.path_name(), "remote");
  expect_same_as_local(got, dir.file("m.safetensors"));
  const LoadedTensors subset = load(cp, host_options({"t2"}));
  expect_same_as_local(subset, dir.file("m.safetensors"));

  const std::vector<std::string> missing{"s3://sluice-test/models/nope.safetensors"};
  const auto e = test::error_of([&] { (void)Checkpoint::open(missing); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->errno_value(), ENOENT) << e->what();
  EXPECT_EQ(e->path(), missing[0]);
}

}  // namespace
}  // namespace sluice
