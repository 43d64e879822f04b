// Bad input to the Datasets (issue 17, item 7): each refused at open with an Error naming the
// file and the field, whatever the format.
#include <gtest/gtest.h>

#include <filesystem>

#include "ingest/dataset_files.hpp"
#include "sluice/ingest.hpp"
#include "support/test_util.hpp"

namespace sluice::test {
namespace {

// Opening `paths` fails with an Error of `domain` for `file` whose message has every one of `words`.
void expect_refused(const std::vector<std::string>& paths, DatasetOptions options, const std::string& file,
                    std::initializer_list<std::string_view> words, ErrorDomain domain = ErrorDomain::data) {
  const auto e = error_of([&] { (void)Dataset::open(paths, options); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->domain(), domain) << e->what();
  if (!file.empty()) {
    EXPECT_EQ(e->path(), file) << e->what();
    EXPECT_NE(std::string(e->what()).find(file), std::string::npos) << e->what();
  }
  for (const auto w : words) EXPECT_NE(std::string(e->what()).find(w), std::string::npos) << "'" << w << "' in: " << e->what();
}

DatasetOptions seq(std::uint64_t L) { return {.seq_len = L}; }

class IngestDatasetFaults : public ::testing::Test {
 protected:
  TempDir dir_{"/tmp"};
  std::string prefix_ = dir_.file("m");
  std::vector<std::int32_t> lengths_{3, 0, 5, 2};
  std::vector<std::int64_t> pointers_{0, 6, 6, 16};  // u16 tokens, back to back
  std::vector<std::int64_t> documents_{0, 2, 4};

  // A good .bin of 20 bytes (10 u16 tokens) and the .idx the members describe.
  void write(std::uint64_t version = 1, std::uint8_t code = 8, std::size_t bin_bytes = 20) {
    write_file(prefix_ + ".bin", random_bytes(bin_bytes, 1));
    write_file(prefix_ + ".idx", megatron_idx_bytes(version, code, lengths_, pointers_, documents_));
  }
  void expect_idx_refused(std::initializer_list<std::string_view> words) {
    expect_refused({prefix_}, seq(2), prefix_ + ".idx", words);
  }
};

TEST_F(IngestDatasetFaults, MegatronGoodBaseline) {
  write();
  EXPECT_EQ(Dataset::open(std::vector<std::string>{prefix_}, seq(2))->size(), 4U);
}

TEST_F(IngestDatasetFaults, MegatronTruncatedBin) {
  write(1, 8, 19);
  expect_refused({prefix_}, seq(2), prefix_ + ".bin", {"sequence_pointers[3]", "sequence_lengths[3]", "truncated"});
}

TEST_F(IngestDatasetFaults, MegatronPointerPastTheEnd) {
  pointers_[2] = 1000;
  write();
  expect_refused({prefix_}, seq(2), prefix_ + ".bin", {"'sequence_pointers[2]' 1000", "past the end"});
}

TEST_F(IngestDatasetFaults, MegatronUnknownDtypeCodeAndVersion) {
  write(1, 9);
  expect_idx_refused({"'dtype'", "unknown code 9"});
  write(1, 0);
  expect_idx_refused({"'dtype'", "unknown code 0"});
  write(2, 8);
  expect_idx_refused({"'version' is 2"});
}

TEST_F(IngestDatasetFaults, MegatronBadMagicAndSizes) {
  write();
  auto idx = read_whole(prefix_ + ".idx");
  idx[0] = std::byte{'X'};
  write_file(prefix_ + ".idx", idx);
  expect_idx_refused({"'magic'"});
  write_file(prefix_ + ".idx", random_bytes(20, 2));
  expect_idx_refused({"shorter than its 34-byte header"});
  write();
  idx = read_whole(prefix_ + ".idx");
  idx.pop_back();
  write_file(prefix_ + ".idx", idx);
  expect_idx_refused({"'sequence_count' (4)", "'document_count' (3)", "truncated"});
  idx.resize(idx.size() + 9);
  write_file(prefix_ + ".idx", idx);
  expect_idx_refused({"'sequence_count' (4)", "'document_count' (3)"});
  // Counts whose byte sizes wrap 64 bits.
  idx = read_whole(prefix_ + ".idx");
  for (int i = 18; i < 26; ++i) idx[static_cast<std::size_t>(i)] = std::byte{0xFF};
  write_file(prefix_ + ".idx", idx);
  expect_idx_refused({"'sequence_count'", "more than 2^64 bytes"});
}

TEST_F(IngestDatasetFaults, MegatronInconsistentPointersLengthsDocuments) {
  lengths_[2] = -1;
  write();
  expect_idx_refused({"'sequence_lengths[2]' is -1"});
  lengths_[2] = 5;
  pointers_[1] = -8;
  write();
  expect_idx_refused({"'sequence_pointers[1]' is -8"});
  pointers_ = {0, 6, 4, 16};  // sequence 2 starts inside sequence 0
  write();
  expect_idx_refused({"'sequence_pointers[2]' is 4", "inside sequence 1"});
  pointers_ = {0, 6, 6, 16};
  documents_ = {0, 3, 2};
  write();
  expect_idx_refused({"'document_indices[2]' is 2", "less than 'document_indices[1]'"});
  documents_ = {0, 5};
  write();
  expect_idx_refused({"'document_indices[1]' is 5", "outside 0..4"});
}

TEST_F(IngestDatasetFaults, MegatronMissingFilesAndMixedDtypes) {
  write();
  expect_refused({dir_.file("nothing")}, seq(2), dir_.file("nothing.bin"), {}, ErrorDomain::os);
  write_megatron(dir_.file("other"), 4, {{1, 2, 3}});
  expect_refused({prefix_, dir_.file("other")}, seq(2), dir_.file("other.idx"), {"'dtype' is i32", "u16"});
}

TEST_F(IngestDatasetFaults, OptionsAreChecked) {
  write();
  expect_refused({prefix_}, {}, "", {"seq_len"}, ErrorDomain::usage);
  write_npy_shard(dir_.file("a.npy"), "<f4", {2}, random_bytes(8, 3));
  expect_refused({dir_.file("a.npy")}, seq(4), "", {"seq_len applies to megatron"}, ErrorDomain::usage);
  expect_refused({dir_.file("a.npy"), prefix_}, {}, "", {"looks like npy", "like megatron"}, ErrorDomain::usage);
  expect_refused({}, {}, "", {"no paths"}, ErrorDomain::usage);
  // A URL is refused by name, not reported as a missing local file.
  expect_refused({dir_.file("a.npy"), "https://example.com/b/s-000.tar"}, {},
                 "https://example.com/b/s-000.tar", {"not supported yet"}, ErrorDomain::usage);
  const auto d = Dataset::open(std::vector<std::string>{dir_.file("a.npy")});
  std::vector<SampleExtent> ext;
  EXPECT_TRUE(error_of([&] { d->extents(2, ext); }));
  EXPECT_TRUE(error_of([&] { (void)d->sample_id(2); }));
  EXPECT_TRUE(error_of([&] { (void)d->file(1); }));
}

// --- tar ---

class IngestTarFaults : public IngestDatasetFaults {
 protected:
  std::string tar_ = dir_.file("s.tar");
  std::vector<std::byte> archive_;
  std::vector<std::byte> original_;  // as written, before a test corrupts it

  void SetUp() override {
    if (!have_python_tarfile()) GTEST_SKIP() << "no /usr/bin/python3 tarfile";
    // Members at 0 (a.txt, 700 bytes: two blocks), 1536 (a.cls), 2560 (b.txt).
    write_tar(tar_, {{"a.txt", random_bytes(700, 4)}, {"a.cls", random_bytes(3, 5)}, {"b.txt", random_bytes(9, 6)}},
              TarFlavor::gnu);
    archive_ = read_whole(tar_);
    original_ = archive_;
  }
  void put(std::size_t at, std::string_view text) {
    for (std::size_t i = 0; i < text.size(); ++i) archive_.at(at + i) = static_cast<std::byte>(text[i]);
  }
  void expect_tar_refused(std::initializer_list<std::string_view> words) {
    write_file(tar_, archive_);
    expect_refused({tar_}, {}, tar_, words);
  }
};

TEST_F(IngestTarFaults, Baseline) {
  const auto d = Dataset::open(std::vector<std::string>{tar_});
  ASSERT_EQ(d->size(), 2U);
  EXPECT_EQ(d->sample_id(1), "s.tar/b");
}

TEST_F(IngestTarFaults, BadChecksum) {
  archive_[1536 + 1] = std::byte{'x'};  // a.cls -> axcls, checksum not fixed
  expect_tar_refused({"header at byte 1536", "'chksum'", "corrupt header"});
  put(1536 + 148, "zz");
  expect_tar_refused({"header at byte 1536", "'chksum' is not an octal number"});
}

TEST_F(IngestTarFaults, SizePastTheEnd) {
  archive_.resize(1536 + 512 + 2);  // a.cls's 3 bytes cut to 2
  expect_tar_refused({"header at byte 1536", "'size' 3", "past the end", "truncated"});
  put(1536 + 124, "77777777777");  // a size far past the end, checksum fixed: still refused
  fix_tar_checksum(archive_, 1536);
  expect_tar_refused({"'size' 8589934591", "past the end"});
}

TEST_F(IngestTarFaults, CorruptFieldsWithGoodChecksums) {
  put(1536 + 124, "12x");
  fix_tar_checksum(archive_, 1536);
  expect_tar_refused({"header at byte 1536", "'size' is not a number"});
  archive_ = original_;
  put(1536 + 156, "S");  // a GNU sparse member
  fix_tar_checksum(archive_, 1536);
  expect_tar_refused({"header at byte 1536", "'typeflag' 'S'", "not supported"});
}

TEST_F(IngestTarFaults, TruncatedHeaderAndEmptyFile) {
  archive_.resize(1536 + 100);
  expect_tar_refused({"header at byte 1536", "truncated"});
  archive_.clear();
  expect_tar_refused({"empty"});
}

TEST_F(IngestTarFaults, BadPaxRecords) {
  write_tar(tar_, {{std::string(150, 'p') + ".txt", random_bytes(5, 7)}}, TarFlavor::pax);
  archive_ = read_whole(tar_);
  // The pax block's first record is "NNN path=ppp...\n": make its length too large.
  put(512, "999");
  expect_tar_refused({"pax header at byte 0", "length 999"});
}

TEST_F(IngestTarFaults, KeysMustBeConsecutiveAndFieldsUnique) {
  write_tar(tar_, {{"a.txt", {}}, {"b.txt", {}}, {"a.cls", {}}});
  archive_ = read_whole(tar_);
  expect_tar_refused({"member 'a.cls'", "key 'a' comes back"});
  write_tar(tar_, {{"a.txt", {}}, {"a.txt", {}}});
  archive_ = read_whole(tar_);
  expect_tar_refused({"member 'a.txt'", "already has the field 'txt'"});
  write_tar(tar_, {{"a.txt", {}}});
  std::filesystem::create_directories(dir_.file("sub"));
  write_tar(dir_.file("sub/s.tar"), {{"b.txt", {}}});
  expect_refused({tar_, dir_.file("sub/s.tar")}, {}, dir_.file("sub/s.tar"), {"'s.tar'", "not be unique"},
                 ErrorDomain::usage);
}

// --- .npy ---

TEST_F(IngestDatasetFaults, NpyShardsMustAgree) {
  const std::string a = dir_.file("a.npy");
  const std::string b = dir_.file("b.npy");
  write_npy_shard(a, "<f4", {2, 3}, random_bytes(24, 8));
  write_npy_shard(b, "<i4", {2, 3}, random_bytes(24, 9));
  expect_refused({a, b}, {}, b, {"'descr' is '<i4'", "'<f4'", a});
  write_npy_shard(b, "<f4", {2, 4}, random_bytes(32, 9));
  expect_refused({a, b}, {}, b, {"'shape' [2, 4]", "rows of [4]", "rows of [3]"});
  write_npy_shard(b, "<f4", {4, 3}, random_bytes(48, 9));
  EXPECT_EQ(Dataset::open(std::vector<std::string>{a, b})->size(), 6U);
}

TEST_F(IngestDatasetFaults, NpyShardsRefuseFortranScalarsRawAndNonNpy) {
  const std::string a = dir_.file("a.npy");
  write_npy_shard(a, "<f4", {2, 3}, random_bytes(24, 8), true);
  expect_refused({a}, {}, a, {"'fortran_order' is True"});
  write_npy_shard(a, "<f4", {}, random_bytes(4, 8));
  expect_refused({a}, {}, a, {"'shape' is ()"});
  write_npy_shard(a, "|S4", {2}, random_bytes(8, 8));
  expect_refused({a}, {}, a, {"'descr' '|S4'"});
  write_npy_shard(a, "<f4", {2, 3}, random_bytes(20, 8));  // data short of the shape
  expect_refused({a}, {}, a, {"'shape'", "truncated"});
  write_file(a, random_bytes(100, 10));
  expect_refused({a}, {}, a, {"'magic'"});
  write_npy_shard(a, "<f4", {3, 0}, {});
  expect_refused({a}, {}, a, {"rows of 0 bytes"});
}

}  // namespace
}  // namespace sluice::test
