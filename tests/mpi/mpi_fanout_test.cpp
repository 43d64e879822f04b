// `sluice load --fanout` under mpirun with 4 ranks on this machine (issue 34): a sharded
// safetensors checkpoint of several dtypes, cut into 1 MiB chunks, lands on every rank with the
// bytes a single-process load gives (per-tensor XXH3), while the ranks together read each byte
// once (scope job, and scope node: one host is one node); a rank that cannot open a shard, or
// whose reads fail with EIO (SLUICE_FAULTS on that rank only), makes every rank exit non-zero
// naming that rank and the file, within the timeout. Skips when this sluice was built without
// MPI or mpirun is missing (fails under SLUICE_TEST_STRICT=1).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "load/tensor_files.hpp"
#include "sluice/units.hpp"
#include "support/test_util.hpp"

#ifndef SLUICE_CLI_PATH
#error "SLUICE_CLI_PATH must name the built sluice binary"
#endif

namespace sluice {
namespace {

using nlohmann::json;
using test::pattern;
using test::shell_quote;

constexpr const char* mpirun_flags =
    "--allow-run-as-root --oversubscribe --mca btl self,vader --mca "
    "btl_vader_single_copy_mechanism none";

void write_file(const std::string& path, const std::vector<std::byte>& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
}

class MpiFanout : public ::testing::Test {
 protected:
  void SetUp() override {
#ifndef SLUICE_WITH_MPI
    SLUICE_SKIP_OR_FAIL(
        "this sluice was built without MPI (SLUICE_WITH_MPI=OFF, or no libopenmpi-dev)");
#endif
    if (!test::have_program("mpirun")) SLUICE_SKIP_OR_FAIL("mpirun is not installed (openmpi-bin)");
    dir_ = std::make_unique<test::TempDir>("/var/tmp", "sluice-fanout-");
    // Two shards, six dtypes; a 3 MiB tensor that the 1 MiB budget cuts into chunks; odd sizes.
    write_file(dir_->file("a.safetensors"),
               test::safetensors_file({{"big", "F32", {768, 1024}, pattern(3 * MiB, 1)},
                                       {"half", "F16", {333, 7}, pattern(333 * 7 * 2, 2)},
                                       {"mask", "U8", {1001}, pattern(1001, 3)}}));
    write_file(dir_->file("b.safetensors"),
               test::safetensors_file({{"bf", "BF16", {512, 513}, pattern(512 * 513 * 2, 4)},
                                       {"ids", "I64", {4097}, pattern(4097 * 8, 5)},
                                       {"w", "F64", {3, 5}, pattern(120, 6)}}));
    json index = {{"metadata", json::object()},
                  {"weight_map",
                   {{"big", "a.safetensors"},
                    {"half", "a.safetensors"},
                    {"mask", "a.safetensors"},
                    {"bf", "b.safetensors"},
                    {"ids", "b.safetensors"},
                    {"w", "b.safetensors"}}}};
    std::ofstream(dir_->file("model.safetensors.index.json")) << index.dump();
  }

  std::string index() const {
    return shell_quote(dir_->file("model.safetensors.index.json"));
  }

  // `sluice load` under mpirun; `per_rank` is shell run by each rank before sluice (it may set
  // PATH_ARG or export variables for that rank only).
  test::CliRun mpirun(const std::string& args, const std::string& per_rank = "") {
    const std::string script = dir_->file("rank.sh");
    std::ofstream(script) << fmt::format("PATH_ARG={}\n{}\nexec {} load \"$PATH_ARG\" {}\n",
                                         index(), per_rank, SLUICE_CLI_PATH, args);
    return test::run_captured(
        "timeout", fmt::format("60 mpirun {} -np 4 bash {}", mpirun_flags, shell_quote(script)),
        dir_->path());
  }

  // name -> XXH3 of a single-process load.
  std::map<std::string, std::string> single_load() {
    const auto r = test::run_captured(
        SLUICE_CLI_PATH, "load " + index() + " --device host --checksum --json", dir_->path());
    EXPECT_EQ(r.rc, 0) << r.out << r.err;
    std::map<std::string, std::string> out;
    const json doc = json::parse(r.out);  // kept: a range-for over a temporary's member dangles
    for (const json& t : doc["tensors"]) out[t["name"]] = t["xxh3"];
    return out;
  }

  std::unique_ptr<test::TempDir> dir_;
  test::CleanSluiceEnv clean_;
};

TEST_F(MpiFanout, EveryRankHoldsTheCheckpointReadOnce) {
  const auto expected = single_load();
  ASSERT_EQ(expected.size(), 6U);
  const std::uint64_t unique = 3 * MiB + 333 * 7 * 2 + 1001 + 512 * 513 * 2 + 4097 * 8 + 120;
  for (const char* scope : {"job", "node"}) {
    SCOPED_TRACE(scope);
    const auto r =
        mpirun(fmt::format("--fanout --scope {} --exchange-budget 1M --checksum --json", scope));
    ASSERT_EQ(r.rc, 0) << r.out << r.err;
    const json doc = json::parse(r.out);  // rank 0 alone prints
    const json& f = doc["summary"]["fanout"];
    EXPECT_EQ(f["scope"], scope);
    EXPECT_EQ(f["unique_bytes"].get<std::uint64_t>(), unique);
    EXPECT_EQ(f["read_bytes"].get<std::uint64_t>(), unique);
    EXPECT_DOUBLE_EQ(f["read_amplification"].get<double>(), 1.0);
    EXPECT_GT(f["reads"].get<std::size_t>(), 6U) << "the 3 MiB tensor goes in 1 MiB chunks";
    ASSERT_EQ(f["ranks"].size(), 4U);
    std::uint64_t read = 0, received = 0, sent = 0;
    for (const json& k : f["ranks"]) {
      read += k["read_bytes"].get<std::uint64_t>();
      received += k["received_bytes"].get<std::uint64_t>();
      sent += k["sent_bytes"].get<std::uint64_t>();
      // Every rank holds every tensor, byte for byte as one process loads it.
      using Hashes = std::map<std::string, std::string>;
      EXPECT_EQ(k["xxh3"].get<Hashes>(), expected) << "rank " << k["rank"];
      // The checkpoint is its reads plus what it received.
      EXPECT_EQ(k["read_bytes"].get<std::uint64_t>() + k["received_bytes"].get<std::uint64_t>(),
                unique);
    }
    EXPECT_EQ(read, unique);
    EXPECT_EQ(received, 3 * unique);
    EXPECT_EQ(sent, received);
    for (const json& t : doc["tensors"]) EXPECT_EQ(t["xxh3"], expected.at(t["name"])) << t["name"];
  }
}

TEST_F(MpiFanout, MissingShardOnOneRankFailsEveryRank) {
  // Rank 2 sees a copy of the checkpoint without b.safetensors.
  std::filesystem::create_directory(dir_->file("r2"));
  std::filesystem::copy_file(dir_->file("a.safetensors"), dir_->file("r2/a.safetensors"));
  std::filesystem::copy_file(dir_->file("model.safetensors.index.json"),
                             dir_->file("r2/model.safetensors.index.json"));
  const auto r = mpirun("--fanout --scope job --json",
                        fmt::format("[ \"$OMPI_COMM_WORLD_RANK\" = 2 ] && PATH_ARG={}",
                                    shell_quote(dir_->file("r2/model.safetensors.index.json"))));
  EXPECT_NE(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.rc, 124) << "the job hung until timeout(1) ended it";
  for (int k = 0; k < 4; ++k) {
    EXPECT_NE(r.err.find(fmt::format("rank {} on", k)), std::string::npos)
        << "rank " << k << " did not fail: " << r.err;
  }
  EXPECT_NE(r.err.find("rank 2: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("r2/b.safetensors"), std::string::npos) << r.err;
}

TEST_F(MpiFanout, ReadErrorOnOneRankFailsEveryRankNamingTheRange) {
  // EIO on every read of rank 1: its first read (the index's) fails, before any move. A
  // probability below 1, meant to hit a chunk read between moves, made the test flaky: rank 1
  // makes only a few reads, and with 30% none of them failed in about one run of three.
  const auto r = mpirun("--fanout --scope job --exchange-budget 1M",
                        "[ \"$OMPI_COMM_WORLD_RANK\" = 1 ] && export SLUICE_FAULTS=eio=1,only=read");
  EXPECT_NE(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.rc, 124) << "the job hung until timeout(1) ended it";
  for (int k = 0; k < 4; ++k) {
    EXPECT_NE(r.err.find(fmt::format("rank {} on", k)), std::string::npos)
        << "rank " << k << " did not fail: " << r.err;
  }
  EXPECT_NE(r.err.find("rank 1: read '"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("model.safetensors.index.json' [offset 0, "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("Input/output error"), std::string::npos) << r.err;
}

TEST(FanoutOneProcess, LoadsEverythingAloneAndRefusesWhatItCannotDo) {
  // Without a launcher, --fanout is a job of one rank: it reads everything and moves nothing.
  test::TempDir dir("/var/tmp", "sluice-fanout-");
  test::CleanSluiceEnv clean;
  const auto data = pattern(3 * MiB + 5, 9);
  write_file(dir.file("m.safetensors"), test::safetensors_file({{"x", "U8", {data.size()}, data}}));
  const std::string path = shell_quote(dir.file("m.safetensors"));
  auto r = test::run_captured(SLUICE_CLI_PATH,
                              "load " + path + " --fanout --exchange-budget 1M --json", dir.path());
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  const json f = json::parse(r.out)["summary"]["fanout"];
  EXPECT_EQ(f["reads"], 4);  // 3 MiB + 5 bytes in 1 MiB chunks
  ASSERT_EQ(f["ranks"].size(), 1U);
  EXPECT_EQ(f["ranks"][0]["read_bytes"].get<std::uint64_t>(), data.size());
  EXPECT_EQ(f["ranks"][0]["sent_bytes"], 0);
  for (const char* bad :
       {"--device sim", "--exchange-budget 0", "--rank 0 --world 1", "--list", "--scope rack"}) {
    r = test::run_captured(SLUICE_CLI_PATH, fmt::format("load {} --fanout {}", path, bad),
                           dir.path());
    EXPECT_EQ(r.rc, 2) << bad << ": " << r.out << r.err;
  }
}

}  // namespace
}  // namespace sluice
