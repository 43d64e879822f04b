// `sluice ingest` over real datasets (written by dataset_files.hpp, independently of the parsers):
// every sample of an epoch once across 1, 2 and 3 ranks for each format, with the XXH3 of each
// as landed in (sim) device memory equal to a hash of the bytes the writer put there; equal
// --emit files for one seed and different orders for two epochs; a run stopped and resumed
// (also with another world size) equals the uninterrupted one; a foreign state refused; the
// summary's stall figures.
#include <gtest/gtest.h>

#include <xxhash.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ingest/dataset_files.hpp"
#include "support/test_util.hpp"

#ifndef SLUICE_CLI_PATH
#error "SLUICE_CLI_PATH must name the built sluice binary"
#endif

namespace sluice {
namespace {

using test::CliRun;

std::string hex(const std::vector<std::byte>& b) { return fmt::format("{:016x}", XXH3_64bits(b.data(), b.size())); }

// What a dataset holds, from its writer: each sample's id (as --emit spells it) and hash.
struct Truth {
  std::string args;  // the PATHs and format options
  std::vector<nlohmann::json> ids;
  std::map<std::string, std::string> hash_of;  // id (dumped) -> xxh3
};

std::vector<nlohmann::json> lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<nlohmann::json> out;
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

class IngestCli : public ::testing::Test {
 protected:
  CliRun sluice(const std::string& args) {
    return test::run_captured(SLUICE_CLI_PATH, "ingest --device sim " + args, dir_.path());
  }
  std::string file(const std::string& name) const { return dir_.file(name); }

  // Two prefixes of u16 tokens, sequences of uneven lengths; samples of L + 1 = 32 tokens.
  Truth megatron() {
    Truth t;
    std::vector<std::byte> stream;
    for (int p = 0; p < 2; ++p) {
      std::vector<std::vector<std::int64_t>> seqs;
      for (int s = 0; s < 40; ++s) {
        std::vector<std::int64_t> seq;
        for (int i = 0; i < 5 + (s * 7 + p) % 29; ++i) seq.push_back((p * 1000 + s * 31 + i) % 65536);
        seqs.push_back(seq);
      }
      const auto w = test::write_megatron(file(fmt::format("m{}", p)), 8, seqs);
      stream.insert(stream.end(), w.stream.begin(), w.stream.end());
      t.args += " " + file(fmt::format("m{}", p));
    }
    t.args += " --seq-len 31";
    const std::uint64_t tokens = stream.size() / 2;
    for (std::uint64_t k = 0; k < (tokens - 1) / 31; ++k) {
      t.ids.emplace_back(k);
      t.hash_of[nlohmann::json(k).dump()] = hex({stream.begin() + static_cast<std::ptrdiff_t>(k * 62),
                                                 stream.begin() + static_cast<std::ptrdiff_t>(k * 62 + 64)});
    }
    return t;
  }
  // Two shards of int32 rows of 5.
  Truth npy() {
    Truth t;
    std::uint64_t k = 0;
    for (int s = 0; s < 2; ++s) {
      const std::uint64_t rows = 37 + s * 20;
      const auto data = test::random_bytes(rows * 20, 100 + s);
      test::write_npy_shard(file(fmt::format("n{}.npy", s)), "<i4", {rows, 5}, data);
      t.args += " " + file(fmt::format("n{}.npy", s));
      for (std::uint64_t r = 0; r < rows; ++r, ++k) {
        t.ids.emplace_back(k);
        t.hash_of[nlohmann::json(k).dump()] = hex({data.begin() + static_cast<std::ptrdiff_t>(r * 20),
                                                   data.begin() + static_cast<std::ptrdiff_t>(r * 20 + 20)});
      }
    }
    return t;
  }
  // Two shards of samples with a jpg of uneven size and a cls, some with a third field.
  std::optional<Truth> wds() {
    if (!test::have_python_tarfile()) return std::nullopt;
    Truth t;
    for (int s = 0; s < 2; ++s) {
      std::vector<test::WdsSample> samples;
      for (int i = 0; i < 23; ++i) {
        test::WdsSample x{fmt::format("k{:04d}", i), {}};
        x.fields.emplace_back("jpg", test::random_bytes(static_cast<std::size_t>(1 + (i * 997) % 9000), s * 100 + i));
        x.fields.emplace_back("cls", test::random_bytes(1 + i % 3, s * 100 + i + 50));
        if (i % 5 == 0) x.fields.emplace_back("seg.png", test::random_bytes(700, i));
        samples.push_back(x);
        const std::string id = fmt::format("w{}.tar/{}", s, x.key);
        t.ids.emplace_back(id);
        t.hash_of[nlohmann::json(id).dump()] = hex(test::wds_sample_bytes(x));
      }
      test::write_wds_shard(file(fmt::format("w{}.tar", s)), samples);
      t.args += " " + file(fmt::format("w{}.tar", s));
    }
    return t;
  }
  std::vector<Truth> all_formats() {
    std::vector<Truth> v = {megatron(), npy()};
    if (auto w = wds()) {
      v.push_back(*w);
    } else if (test::strict_mode()) {
      ADD_FAILURE() << test::strict_failure("python3 tarfile");
    }
    return v;
  }

  test::TempDir dir_{"/var/tmp", "sluice-ingest-cli-"};
  test::CleanSluiceEnv clean_env_;
};

TEST_F(IngestCli, EverySampleOnceAcrossRanksWithTheBytesAsWritten) {
  for (const Truth& t : all_formats()) {
    for (unsigned world : {1U, 2U, 3U}) {
      std::map<std::string, int> seen;
      for (unsigned r = 0; r < world; ++r) {
        const std::string emit = file(fmt::format("e{}-{}.jsonl", world, r));
        const CliRun run = sluice(fmt::format("{} --batch-size 4 --keep-last --rank {} --world {} --emit {}", t.args, r,
                                              world, emit));
        ASSERT_EQ(run.rc, 0) << run.err;
        for (const auto& j : lines(emit)) {
          EXPECT_EQ(j["rank"], r);
          ASSERT_EQ(j["samples"].size(), j["xxh3"].size());
          for (std::size_t i = 0; i < j["samples"].size(); ++i) {
            const std::string id = j["samples"][i].dump();
            ++seen[id];
            EXPECT_EQ(j["xxh3"][i], t.hash_of.at(id)) << t.args << " sample " << id;
          }
        }
      }
      EXPECT_EQ(seen.size(), t.ids.size()) << t.args << " world " << world;
      for (const auto& [id, n] : seen) EXPECT_EQ(n, 1) << id << " world " << world;
    }
  }
}

TEST_F(IngestCli, OneSeedOneEmitAndEpochsDiffer) {
  const Truth t = npy();
  const std::string a = file("a.jsonl");
  const std::string b = file("b.jsonl");
  ASSERT_EQ(sluice(t.args + " --batch-size 5 --seed 7 --epochs 2 --emit " + a).rc, 0);
  ASSERT_EQ(sluice(t.args + " --batch-size 5 --seed 7 --epochs 2 --memory pageable --prefetch 1 --emit " + b).rc, 0);
  EXPECT_EQ(test::read_text(a), test::read_text(b));
  const auto l = lines(a);
  ASSERT_EQ(l.size(), 2 * (t.ids.size() / 5));
  const std::size_t per_epoch = l.size() / 2;
  EXPECT_EQ(l[0]["epoch"], 0);
  EXPECT_EQ(l[per_epoch]["epoch"], 1);
  EXPECT_NE(l[0]["samples"], l[per_epoch]["samples"]);
  ASSERT_EQ(sluice(t.args + " --batch-size 5 --seed 8 --emit " + b).rc, 0);
  EXPECT_NE(lines(b)[0]["samples"], l[0]["samples"]);
}

TEST_F(IngestCli, AStoppedRunResumedEqualsTheUninterruptedRun) {
  for (const Truth& t : all_formats()) {
    const std::string whole = file("whole.jsonl");
    ASSERT_EQ(sluice(t.args + " --batch-size 3 --seed 5 --epochs 2 --emit " + whole).rc, 0);
    const std::string head = file("head.jsonl");
    const std::string tail = file("tail.jsonl");
    const std::string state = file("state.json");
    const CliRun first = sluice(t.args + " --batch-size 3 --seed 5 --stop-after-steps 4 --save-state " + state +
                                " --emit " + head);
    ASSERT_EQ(first.rc, 0) << first.err;
    EXPECT_NE(test::read_text(state).find("\"consumed\":12"), std::string::npos) << test::read_text(state);
    // The rest of epoch 0 and all of epoch 1.
    const CliRun second = sluice(t.args + " --batch-size 3 --seed 5 --epochs 2 --resume " + state + " --emit " + tail);
    ASSERT_EQ(second.rc, 0) << second.err;
    std::vector<nlohmann::json> joined = lines(head);
    for (auto& j : lines(tail)) {
      if (j["epoch"] == 2) break;  // --epochs 2 from epoch 0 resumed runs into epoch 2
      joined.push_back(j);
    }
    EXPECT_EQ(joined, lines(whole)) << t.args;
  }
}

TEST_F(IngestCli, ResumingWithAnotherWorldSizeSeesEverySampleOnce) {
  const Truth t = megatron();
  std::map<std::string, int> seen;
  const std::string state = file("state.json");
  for (unsigned r = 0; r < 2; ++r) {
    const std::string emit = file(fmt::format("a{}.jsonl", r));
    const std::string save = r == 0 ? " --save-state " + state : "";
    ASSERT_EQ(sluice(fmt::format("{} --batch-size 4 --keep-last --rank {} --world 2 --stop-after-steps 3 --emit {}{}",
                                 t.args, r, emit, save)).rc, 0);
    for (const auto& j : lines(emit)) for (const auto& id : j["samples"]) ++seen[id.dump()];
  }
  for (unsigned r = 0; r < 3; ++r) {
    const std::string emit = file(fmt::format("b{}.jsonl", r));
    const CliRun run = sluice(fmt::format("{} --batch-size 4 --keep-last --rank {} --world 3 --resume {} --emit {}",
                                          t.args, r, state, emit));
    ASSERT_EQ(run.rc, 0) << run.err;
    for (const auto& j : lines(emit)) for (const auto& id : j["samples"]) ++seen[id.dump()];
  }
  EXPECT_EQ(seen.size(), t.ids.size());
  for (const auto& [id, n] : seen) EXPECT_EQ(n, 1) << id;
}

TEST_F(IngestCli, RefusesAStateOfOtherData) {
  const Truth m = megatron();
  const Truth n = npy();
  const std::string state = file("state.json");
  ASSERT_EQ(sluice(m.args + " --batch-size 2 --stop-after-steps 1 --save-state " + state).rc, 0);
  const CliRun run = sluice(n.args + " --batch-size 2 --resume " + state);
  EXPECT_EQ(run.rc, 2);
  EXPECT_NE(run.err.find("other data"), std::string::npos) << run.err;
}

TEST_F(IngestCli, JsonSummaryHasTheStallFigures) {
  const Truth t = npy();
  const CliRun run = sluice(t.args + " --batch-size 4 --steps 30 --step-time 1ms --memory-budget 4M --json");
  ASSERT_EQ(run.rc, 0) << run.err;
  const auto j = nlohmann::json::parse(run.out);
  EXPECT_EQ(j["steps"], 30);
  EXPECT_EQ(j["samples"], 120);
  for (const char* k : {"wait_p50_seconds", "wait_p99_seconds", "stall_fraction", "samples_per_second", "gib_per_s",
                        "cpu_seconds", "wall_seconds"}) {
    EXPECT_TRUE(j[k].is_number()) << k;
  }
  EXPECT_GE(j["wall_seconds"].get<double>(), 0.029);  // 30 steps of at least 1 ms each
  EXPECT_EQ(j["path"], "bounce");
  EXPECT_TRUE(j["stall_cause"].is_string());
  EXPECT_LE(j["memory_high_water"].get<std::uint64_t>(), 4U << 20);
  EXPECT_EQ(j["state"]["format"], "sluice-loader-state");
  // Plain text names the same figures.
  const CliRun text = sluice(t.args + " --batch-size 4 --steps 3");
  ASSERT_EQ(text.rc, 0) << text.err;
  EXPECT_NE(text.out.find("stall: waited"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("path: bounce"), std::string::npos) << text.out;
}

TEST_F(IngestCli, BadArgumentsAndBadFiles) {
  const Truth t = npy();
  EXPECT_EQ(sluice(t.args + " --batch-size 0").rc, 2);
  EXPECT_EQ(sluice(t.args + " --batch-size 2 --format tfrecord").rc, 2);
  EXPECT_EQ(sluice(t.args + " --batch-size 2 --rank 3 --world 2").rc, 2);
  // A truncated .bin fails at open, naming the file.
  const Truth m = megatron();
  std::filesystem::resize_file(file("m1.bin"), 10);
  const CliRun run = sluice(m.args + " --batch-size 2");
  EXPECT_EQ(run.rc, 1) << run.err;
  EXPECT_NE(run.err.find("m1.bin"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace sluice
