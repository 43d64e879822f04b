// The Datasets of issue 17 on well-formed files: sample counts, ids, shapes, and the bytes their
// extents name, compared with what the test wrote (the token stream, the rows, the members).
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "ingest/dataset_files.hpp"
#include "sluice/ingest.hpp"
#include "support/test_util.hpp"

namespace sluice::test {
namespace {

std::shared_ptr<const Dataset> open(const std::vector<std::string>& paths, DatasetOptions o = {}) {
  return Dataset::open(paths, o);
}

DatasetOptions seq(std::uint64_t L) { return {.seq_len = L}; }

std::string base_name_of(const std::string& path) { return path.substr(path.rfind('/') + 1); }

// Sample k's bytes as its extents name them, read with plain pread.
std::vector<std::byte> sample_bytes_of(const Dataset& d, std::uint64_t k) {
  std::vector<SampleExtent> ext;
  d.extents(k, ext);
  std::vector<std::byte> out;
  for (const auto& e : ext) {
    auto piece = pread_file(d.file(e.file).path(), e.offset, e.size);
    EXPECT_EQ(piece.size(), e.size);
    out.insert(out.end(), piece.begin(), piece.end());
  }
  return out;
}

std::vector<std::byte> slice(const std::vector<std::byte>& v, std::size_t from, std::size_t n) {
  return {v.begin() + static_cast<std::ptrdiff_t>(from), v.begin() + static_cast<std::ptrdiff_t>(from + n)};
}

std::vector<std::vector<std::int64_t>> random_sequences(std::size_t n, std::size_t max_len, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<std::int64_t>> seqs(n);
  for (auto& s : seqs) {
    s.resize(rng() % (max_len + 1));  // some empty
    for (auto& t : s) t = static_cast<std::int64_t>(rng() % 100);
  }
  return seqs;
}

class IngestDataset : public ::testing::Test {
 protected:
  TempDir dir_{"/tmp"};
};

// --- Megatron ---

TEST_F(IngestDataset, MegatronEveryDtypeEverySampleHasItsStreamSlice) {
  for (std::uint8_t code = 1; code <= 8; ++code) {
    SCOPED_TRACE(code);
    const std::string prefix = dir_.file("m" + std::to_string(code));
    const auto w = write_megatron(prefix, code, random_sequences(40, 30, test_seed(code)));
    const std::size_t tb = megatron_token_bytes(code);
    const std::uint64_t tokens = w.stream.size() / tb;
    for (const std::uint64_t L : {1, 7, 64}) {
      const auto d = open({prefix}, seq(L));
      ASSERT_EQ(d->size(), (tokens - 1) / L);
      EXPECT_EQ(d->format(), DatasetFormat::megatron);
      ASSERT_TRUE(d->sample_shape());
      EXPECT_EQ(d->sample_shape()->shape, std::vector<std::uint64_t>{L + 1});
      EXPECT_EQ(element_bits(d->sample_shape()->dtype) / 8, tb);
      for (std::uint64_t k = 0; k < d->size(); ++k) {
        EXPECT_EQ(d->sample_bytes(k), (L + 1) * tb);
        EXPECT_EQ(d->sample_id(k), std::to_string(k));
        ASSERT_TRUE(same_bytes(sample_bytes_of(*d, k), slice(w.stream, k * L * tb, (L + 1) * tb))) << "k=" << k;
      }
    }
  }
}

TEST_F(IngestDataset, MegatronDtypesAreTheFormatsTable) {
  const std::pair<std::uint8_t, DType> table[] = {{1, DType::u8},  {2, DType::i8},  {3, DType::i16}, {4, DType::i32},
                                                  {5, DType::i64}, {6, DType::f64}, {7, DType::f32}, {8, DType::u16}};
  for (const auto& [code, dtype] : table) {
    const std::string prefix = dir_.file("t" + std::to_string(code));
    write_megatron(prefix, code, {{1, 2, 3}});
    EXPECT_EQ(open({prefix}, seq(1))->sample_shape()->dtype, dtype) << int(code);
  }
}

TEST_F(IngestDataset, MegatronPrefixBinAndIdxNameOneDataset) {
  const std::string prefix = dir_.file("p");
  write_megatron(prefix, 8, random_sequences(10, 20, 3));
  const auto a = open({prefix}, seq(4));
  const auto b = open({prefix + ".bin"}, seq(4));
  const auto c = open({prefix + ".idx"}, seq(4));
  EXPECT_EQ(a->size(), b->size());
  EXPECT_EQ(a->fingerprint(), b->fingerprint());
  EXPECT_EQ(a->fingerprint(), c->fingerprint());
  ASSERT_EQ(a->file_count(), 1U);
  EXPECT_EQ(a->file(0).path(), prefix + ".bin");
}

TEST_F(IngestDataset, MegatronPrefixesConcatenateInTheOrderGiven) {
  const auto w1 = write_megatron(dir_.file("a"), 3, random_sequences(7, 9, 11));
  const auto w2 = write_megatron(dir_.file("b"), 3, random_sequences(5, 9, 12));
  write_megatron(dir_.file("empty"), 3, {});
  std::vector<std::byte> stream = w1.stream;
  stream.insert(stream.end(), w2.stream.begin(), w2.stream.end());
  const std::uint64_t tokens = stream.size() / 2;
  const std::uint64_t L = 5;
  const auto d = open({dir_.file("a"), dir_.file("empty"), dir_.file("b")}, seq(L));
  ASSERT_EQ(d->file_count(), 3U);
  ASSERT_EQ(d->size(), (tokens - 1) / L);
  bool crossed = false;
  for (std::uint64_t k = 0; k < d->size(); ++k) {
    ASSERT_TRUE(same_bytes(sample_bytes_of(*d, k), slice(stream, k * L * 2, (L + 1) * 2))) << "k=" << k;
    std::vector<SampleExtent> ext;
    d->extents(k, ext);
    crossed = crossed || (ext.size() == 2 && ext[0].file == 0 && ext[1].file == 2);
  }
  EXPECT_TRUE(crossed) << "no sample spans the two prefixes: the test data does not cover that case";
  const auto reversed = open({dir_.file("b"), dir_.file("a")}, seq(L));
  EXPECT_NE(reversed->fingerprint(), d->fingerprint());
}

TEST_F(IngestDataset, MegatronBackToBackPiecesAreOneExtentGapsSplitThem) {
  const std::vector<std::vector<std::int64_t>> seqs{{1, 2, 3}, {4, 5}, {}, {6, 7, 8, 9}};
  const auto packed = write_megatron(dir_.file("packed"), 4, seqs);
  const auto gapped = write_megatron(dir_.file("gapped"), 4, seqs, 12);
  const auto p = open({dir_.file("packed")}, seq(8));
  const auto g = open({dir_.file("gapped")}, seq(8));
  ASSERT_EQ(p->size(), 1U);
  ASSERT_EQ(g->size(), 1U);
  std::vector<SampleExtent> pe;
  std::vector<SampleExtent> ge;
  p->extents(0, pe);
  g->extents(0, ge);
  ASSERT_EQ(pe.size(), 1U);
  EXPECT_EQ(pe[0].offset, 0U);
  EXPECT_EQ(pe[0].size, 9U * 4);
  ASSERT_EQ(ge.size(), 3U);  // three non-empty sequences, 12 filler bytes between each
  EXPECT_EQ(ge[1].offset, 3U * 4 + 12);
  EXPECT_TRUE(same_bytes(sample_bytes_of(*g, 0), packed.stream));
  EXPECT_NE(p->fingerprint(), g->fingerprint());
}

TEST_F(IngestDataset, MegatronSeqLenEdges) {
  const std::string prefix = dir_.file("e");
  write_megatron(prefix, 1, {{1, 2, 3, 4}, {5, 6, 7}});  // 7 tokens
  EXPECT_EQ(open({prefix}, seq(3))->size(), 2U);         // 7 = 2 * 3 + 1: the last sample ends on the last token
  EXPECT_EQ(open({prefix}, seq(2))->size(), 3U);
  EXPECT_EQ(open({prefix}, seq(6))->size(), 1U);
  EXPECT_EQ(open({prefix}, seq(7))->size(), 0U);  // L + 1 tokens do not fit
  EXPECT_EQ(open({prefix}, seq(100))->size(), 0U);
  const auto d = open({prefix}, seq(3));
  EXPECT_TRUE(same_bytes(sample_bytes_of(*d, 1), std::vector<std::byte>{std::byte{4}, std::byte{5}, std::byte{6},
                                                                          std::byte{7}}));
  const auto none = dir_.file("none");
  write_megatron(none, 1, {});
  EXPECT_EQ(open({none}, seq(1))->size(), 0U);
  write_megatron(none, 1, {{9}});
  EXPECT_EQ(open({none}, seq(1))->size(), 0U);  // one token: no (input, label) pair
}

TEST_F(IngestDataset, MegatronFingerprintFollowsSeqLenAndIndex) {
  const std::string prefix = dir_.file("f");
  write_megatron(prefix, 8, {{1, 2, 3, 4, 5}, {6, 7}});
  const auto a = open({prefix}, seq(2));
  EXPECT_EQ(a->fingerprint(), open({prefix}, seq(2))->fingerprint());
  EXPECT_NE(a->fingerprint(), open({prefix}, seq(3))->fingerprint());
  write_megatron(prefix, 8, {{1, 2, 3, 4}, {5, 6, 7}});  // same bytes in the .bin, another index
  EXPECT_NE(a->fingerprint(), open({prefix}, seq(2))->fingerprint());
  EXPECT_NE(a->describe().find("megatron: 1 prefix, 2 sequences"), std::string::npos) << a->describe();
  EXPECT_NE(a->describe().find("u16"), std::string::npos) << a->describe();
  EXPECT_NE(a->describe().find("3 samples of 3 tokens"), std::string::npos) << a->describe();
}

// --- WebDataset ---

std::vector<std::byte> bytes_of(std::string_view s) {
  std::vector<std::byte> out;
  for (char c : s) out.push_back(static_cast<std::byte>(c));
  return out;
}

std::vector<WdsSample> some_samples(const std::string& key_prefix, std::size_t n, std::uint64_t seed) {
  std::vector<WdsSample> out;
  for (std::size_t i = 0; i < n; ++i) {
    WdsSample s{key_prefix + std::to_string(i), {}};
    s.fields.push_back({"jpg", random_bytes((seed + i * 977) % 1500, seed + i)});  // sizes around 512
    s.fields.push_back({"cls", bytes_of(std::to_string(i % 10))});
    if (i % 3 == 0) s.fields.push_back({"seg.png", random_bytes(512, seed + 1000 + i)});
    if (i % 4 == 0) s.fields.push_back({"empty", {}});
    out.push_back(std::move(s));
  }
  return out;
}

void expect_wds(const Dataset& d, const std::vector<std::pair<std::string, std::vector<WdsSample>>>& shards) {
  std::uint64_t k = 0;
  for (const auto& [shard, samples] : shards) {
    for (const auto& s : samples) {
      ASSERT_LT(k, d.size());
      EXPECT_EQ(d.sample_id(k), shard + "/" + s.key);
      std::vector<std::string> fields;
      d.fields(k, fields);
      std::vector<std::string> want;
      for (const auto& f : s.fields) want.push_back(f.first);
      EXPECT_EQ(fields, want) << s.key;
      const auto bytes = wds_sample_bytes(s);
      EXPECT_EQ(d.sample_bytes(k), bytes.size());
      EXPECT_TRUE(same_bytes(sample_bytes_of(d, k), bytes)) << s.key;
      std::vector<SampleExtent> ext;
      d.extents(k, ext);
      EXPECT_EQ(ext.size(), s.fields.size());
      ++k;
    }
  }
  EXPECT_EQ(k, d.size());
}

TEST_F(IngestDataset, WebDatasetSamplesAreRunsOfOneKeyInEveryTarFlavor) {
  if (!have_python_tarfile()) GTEST_SKIP() << "no /usr/bin/python3 tarfile";
  for (const auto flavor : {TarFlavor::pax, TarFlavor::gnu, TarFlavor::ustar}) {
    SCOPED_TRACE(static_cast<int>(flavor));
    // Keys past 100 bytes go to pax records, GNU 'L' blocks or the ustar prefix; a dotted folder
    // keeps its dots in the key.
    const std::string deep = std::string(60, 'd') + "/" + std::string(70, 'e') + ".v1/";
    std::vector<WdsSample> samples = some_samples("s", 9, 5);
    samples.push_back({deep + "x" + std::string(40, 'k'), {{"txt", bytes_of("long")}, {"a.b.c", bytes_of("dots")}}});
    samples.push_back({"noext", {{"", bytes_of("a member without a dot")}}});
    const std::string path = dir_.file("shard-" + std::to_string(static_cast<int>(flavor)) + ".tar");
    write_wds_shard(path, samples, flavor);
    const auto d = open({path});
    EXPECT_EQ(d->format(), DatasetFormat::webdataset);
    EXPECT_FALSE(d->sample_shape());
    expect_wds(*d, {{base_name_of(path), samples}});
  }
}

TEST_F(IngestDataset, WebDatasetShardsConcatenateAndFoldersAreSkipped) {
  if (!have_python_tarfile()) GTEST_SKIP() << "no /usr/bin/python3 tarfile";
  const auto s1 = some_samples("a/", 4, 7);
  const auto s2 = some_samples("b/", 3, 8);
  std::vector<TarEntry> e1 = wds_entries(s1);
  e1.insert(e1.begin(), TarEntry{"a/", {}});
  write_tar(dir_.file("one.tar"), e1);
  write_wds_shard(dir_.file("two.tar"), s2);
  write_tar(dir_.file("zero.tar"), {});
  const auto d = open({dir_.file("one.tar"), dir_.file("zero.tar"), dir_.file("two.tar")});
  EXPECT_EQ(d->file_count(), 3U);
  expect_wds(*d, {{"one.tar", s1}, {"two.tar", s2}});
  EXPECT_NE(d->describe().find("wds: 3 shards, 7 samples"), std::string::npos) << d->describe();
  const auto again = open({dir_.file("one.tar"), dir_.file("zero.tar"), dir_.file("two.tar")});
  EXPECT_EQ(again->fingerprint(), d->fingerprint());
  EXPECT_NE(open({dir_.file("two.tar"), dir_.file("one.tar")})->fingerprint(), d->fingerprint());
}

TEST_F(IngestDataset, WebDatasetLargeMembersAndManySmallOnes) {
  if (!have_python_tarfile()) GTEST_SKIP() << "no /usr/bin/python3 tarfile";
  // Headers past the scan's first window, after jumps over large contents and after runs of
  // small members (the scan reads a window at a time).
  std::vector<WdsSample> samples;
  samples.push_back({"big", {{"bin", random_bytes(300 * 1024 + 7, 31)}, {"cls", bytes_of("1")}}});
  for (int i = 0; i < 400; ++i) samples.push_back({"small" + std::to_string(i), {{"txt", random_bytes(700, 40 + i)}}});
  samples.push_back({"huge", {{"bin", random_bytes(1024 * 1024 + 1, 32)}}});
  samples.push_back({"last", {{"txt", bytes_of("end")}}});
  write_wds_shard(dir_.file("large.tar"), samples);
  expect_wds(*open({dir_.file("large.tar")}), {{"large.tar", samples}});
}

TEST_F(IngestDataset, WebDatasetFromGnuTar) {
  if (!have_program("tar")) GTEST_SKIP() << "no tar";
  const std::string src = dir_.file("src");
  const std::string long_key = std::string(120, 'q');
  std::filesystem::create_directories(src + "/sub");
  write_file(src + "/sub/" + long_key + ".txt", bytes_of("long name"));
  write_file(src + "/sub/" + long_key + ".json", bytes_of("{}"));
  const std::string path = dir_.file("gnu.tar");
  ASSERT_EQ(shell("cd " + shell_quote(src) + " && tar --format=gnu -cf " + shell_quote(path) +
                  " sub/" + long_key + ".txt sub/" + long_key + ".json"), 0);
  const auto d = open({path});
  ASSERT_EQ(d->size(), 1U);
  EXPECT_EQ(d->sample_id(0), "gnu.tar/sub/" + long_key);
  EXPECT_TRUE(same_bytes(sample_bytes_of(*d, 0), bytes_of("long name{}")));
}

TEST_F(IngestDataset, FormatComesFromTheOptionsOverTheName) {
  if (!have_python_tarfile()) GTEST_SKIP() << "no /usr/bin/python3 tarfile";
  const auto samples = some_samples("k", 2, 3);
  write_wds_shard(dir_.file("shard.dat"), samples);
  const auto d = open({dir_.file("shard.dat")}, {.format = DatasetFormat::webdataset});
  expect_wds(*d, {{"shard.dat", samples}});
}

// --- .npy ---

TEST_F(IngestDataset, NpyShardsRowsConcatenate) {
  // f32 rows of [3, 2]: shard a 4 rows, an empty shard, shard b 3 rows.
  const auto a = random_bytes(4 * 6 * 4, 21);
  const auto b = random_bytes(3 * 6 * 4, 22);
  write_npy_shard(dir_.file("a.npy"), "<f4", {4, 3, 2}, a);
  write_npy_shard(dir_.file("e.npy"), "<f4", {0, 3, 2}, {});
  write_npy_shard(dir_.file("b.npy"), "<f4", {3, 3, 2}, b);
  const auto d = open({dir_.file("a.npy"), dir_.file("e.npy"), dir_.file("b.npy")});
  EXPECT_EQ(d->format(), DatasetFormat::npy);
  ASSERT_EQ(d->size(), 7U);
  ASSERT_TRUE(d->sample_shape());
  EXPECT_EQ(d->sample_shape()->dtype, DType::f32);
  EXPECT_EQ(d->sample_shape()->shape, (std::vector<std::uint64_t>{3, 2}));
  std::vector<std::byte> all = a;
  all.insert(all.end(), b.begin(), b.end());
  for (std::uint64_t k = 0; k < 7; ++k) {
    EXPECT_EQ(d->sample_bytes(k), 24U);
    EXPECT_EQ(d->sample_id(k), std::to_string(k));
    EXPECT_TRUE(same_bytes(sample_bytes_of(*d, k), slice(all, k * 24, 24))) << k;
  }
  std::vector<SampleExtent> ext;
  d->extents(4, ext);
  ASSERT_EQ(ext.size(), 1U);
  EXPECT_EQ(ext[0].file, 2U);
  EXPECT_NE(d->describe().find("npy: 3 shards, 7 rows of f32 [3, 2]"), std::string::npos) << d->describe();
}

TEST_F(IngestDataset, NpyOneDimensionalShardsHaveScalarRows) {
  const auto a = random_bytes(10 * 2, 23);
  write_npy_shard(dir_.file("v.npy"), "<u2", {10}, a);
  const auto d = open({dir_.file("v.npy")});
  ASSERT_EQ(d->size(), 10U);
  EXPECT_EQ(d->sample_shape()->dtype, DType::u16);
  EXPECT_TRUE(d->sample_shape()->shape.empty());
  EXPECT_TRUE(same_bytes(sample_bytes_of(*d, 9), slice(a, 18, 2)));
  const auto f = open({dir_.file("v.npy")});
  EXPECT_EQ(f->fingerprint(), d->fingerprint());
  write_npy_shard(dir_.file("v.npy"), "<i2", {10}, a);
  EXPECT_NE(open({dir_.file("v.npy")})->fingerprint(), d->fingerprint());
}

TEST_F(IngestDataset, FormatNamesRoundTrip) {
  for (const auto f : {DatasetFormat::megatron, DatasetFormat::webdataset, DatasetFormat::npy}) {
    EXPECT_EQ(parse_dataset_format(to_string(f)), f);
  }
  EXPECT_EQ(to_string(DatasetFormat::webdataset), "wds");
  EXPECT_EQ(parse_dataset_format("webdataset"), DatasetFormat::webdataset);
  EXPECT_FALSE(parse_dataset_format("tar"));
}

}  // namespace
}  // namespace sluice::test
