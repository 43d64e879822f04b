// save_safetensors and the sharded checkpoint writer: the layout byte for byte against the
// reference writer's own test vectors and a writer written out here, every dtype and shape
// (zero-size too) saved and loaded back bitwise from host and sim-device memory, atomic
// replacement and the removal of stale temporaries, and sharded checkpoints the loader reads.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sluice/atomic_file.hpp"
#include "sluice/load.hpp"
#include "sluice/save.hpp"
#include "sluice/testing/faulty_engine.hpp"
#include "support/test_util.hpp"

namespace sluice {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

std::vector<std::byte> bytes_of(std::initializer_list<int> v) {
  std::vector<std::byte> out;
  for (int b : v) out.push_back(static_cast<std::byte>(b));
  return out;
}

std::vector<std::string> temporaries_in(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (n.find(atomic_temporary_marker) != std::string::npos) out.push_back(n);
  }
  return out;
}

std::string disk_root() {
  std::string why;
  auto root = test::folder_root(test::Folder::disk, &why);
  return root ? *root : "/tmp";
}

// The reference writer's own unit tests (huggingface/safetensors, tensor.rs
// test_serialization and test_empty) give these bytes.
TEST(SaveLayout, MatchesTheReferenceWritersTestVectors) {
  std::vector<float> v{0, 1, 2, 3, 4, 5};
  const SaveTensor t{"attn.0", DType::f32, {1, 2, 3}, v.data(), 24};
  const SafetensorsLayout l = plan_safetensors({&t, 1});
  std::vector<std::byte> file = l.prefix;
  const auto* raw = reinterpret_cast<const std::byte*>(v.data());
  file.insert(file.end(), raw, raw + 24);
  const std::string header = R"({"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}})";
  std::vector<std::byte> want = bytes_of({64, 0, 0, 0, 0, 0, 0, 0});
  for (char c : header) want.push_back(static_cast<std::byte>(c));
  want.insert(want.end(), raw, raw + 24);
  EXPECT_TRUE(test::same_bytes(file, want));
  EXPECT_EQ(l.file_bytes, want.size());

  const SafetensorsLayout empty = plan_safetensors({});
  EXPECT_TRUE(test::same_bytes(empty.prefix, bytes_of({8, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ', ' ', ' ', ' ', ' '})));
  const SafetensorsLayout meta = plan_safetensors({}, SaveMetadata{{"framework", "pt"}});
  std::vector<std::byte> want_meta = bytes_of({40, 0, 0, 0, 0, 0, 0, 0});
  for (char c : std::string(R"({"__metadata__":{"framework":"pt"}}     )")) want_meta.push_back(static_cast<std::byte>(c));
  EXPECT_TRUE(test::same_bytes(meta.prefix, want_meta));
}

TEST(SaveLayout, SortsByDescendingDtypeThenNameAndPadsToEight) {
  std::vector<std::byte> d(64);
  const std::vector<SaveTensor> ts{
      {"b", DType::u8, {3}, d.data(), 3},   {"a", DType::u8, {1}, d.data(), 1},
      {"z", DType::f64, {1}, d.data(), 8},  {"c", DType::bf16, {2}, d.data(), 4},
      {"y", DType::i64, {}, d.data(), 8},   {"e", DType::bool_, {0}, nullptr, 0},
  };
  const SafetensorsLayout l = plan_safetensors(ts, SaveMetadata{{"b", "2"}, {"a", "\"q\"\n\x01"}});
  std::vector<std::string> names;
  for (std::size_t i : l.order) names.push_back(ts[i].name);
  // The specification's order ends ... F64, I64, U64: I64 before F64 when descending.
  EXPECT_EQ(names, (std::vector<std::string>{"y", "z", "c", "a", "b", "e"}));
  const std::uint64_t n = l.prefix.size() - 8;
  EXPECT_EQ(n % 8, 0U);
  const std::string header(reinterpret_cast<const char*>(l.prefix.data()) + 8, n);
  EXPECT_TRUE(header.starts_with(R"({"__metadata__":{"a":"\"q\"\n\u0001","b":"2"},"y":{"dtype":"I64","shape":[],)"))
      << header;
  EXPECT_EQ(header.find_last_not_of(' ') + 1 + (8 - (header.find_last_not_of(' ') + 1) % 8) % 8, header.size());
  const auto doc = nlohmann::json::parse(header);
  EXPECT_EQ(doc["e"]["data_offsets"], nlohmann::json::array({24, 24}));
  EXPECT_EQ(l.offsets.front(), 8 + n);
  EXPECT_EQ(l.file_bytes, 8 + n + 24);
}

TEST(SaveLayout, RefusesWhatSafetensorsCannotHold) {
  std::vector<std::byte> d(16);
  auto refuses = [&](SaveTensor t, std::string_view why) {
    const auto e = test::error_of([&] { (void)plan_safetensors({&t, 1}); });
    ASSERT_TRUE(e);
    EXPECT_EQ(e->domain(), ErrorDomain::usage);
    EXPECT_NE(std::string(e->what()).find(why), std::string::npos) << e->what();
  };
  refuses({"t", DType::f32, {2}, d.data(), 4}, "4 bytes given, but its shape and dtype make 8");
  refuses({"t", DType::c128, {1}, d.data(), 16}, "safetensors has no type for c128");
  refuses({"t", DType::f4_e2m1fn, {3}, d.data(), 1}, "not a whole number of bytes");
  refuses({"__metadata__", DType::u8, {1}, d.data(), 1}, "reserved");
  refuses({"", DType::u8, {1}, d.data(), 1}, "empty name");
  refuses({"t", DType::u8, {1}, nullptr, 1}, "null data");
  const std::vector<SaveTensor> twice{{"t", DType::u8, {1}, d.data(), 1}, {"t", DType::u8, {1}, d.data(), 1}};
  const auto e = test::error_of([&] { (void)plan_safetensors(twice); });
  ASSERT_TRUE(e);
  EXPECT_NE(std::string(e->what()).find("given twice"), std::string::npos);
}

// Shapes for a dtype: every one whose bytes are whole (F4 packs two a byte, F6 four in three).
std::vector<std::vector<std::uint64_t>> shapes_for(std::uint32_t bits) {
  std::vector<std::vector<std::uint64_t>> all{{}, {0}, {3, 0, 2}, {4}, {2, 3, 4}, {1, 1000}};
  std::vector<std::vector<std::uint64_t>> out;
  for (auto& s : all) {
    std::uint64_t n = 1;
    for (auto d : s) n *= d;
    if (n * bits % 8 == 0) out.push_back(s);
  }
  return out;
}

struct Source {
  std::vector<SaveTensor> tensors;
  std::vector<std::vector<std::byte>> data;
};

Source every_dtype() {
  Source s;
  std::uint64_t seed = 1;
  for (std::string_view st : formats::safetensors_dtypes()) {
    const DType t = *parse_safetensors_dtype(st);
    for (const auto& shape : shapes_for(element_bits(t))) {
      std::uint64_t n = 1;
      for (auto d : shape) n *= d;
      s.data.push_back(test::random_bytes(n * element_bits(t) / 8, seed++));
      s.tensors.push_back({fmt::format("{}.{}", st, s.tensors.size()), t, shape, nullptr, s.data.back().size()});
    }
  }
  for (std::size_t i = 0; i < s.tensors.size(); ++i) s.tensors[i].data = s.data[i].empty() ? nullptr : s.data[i].data();
  return s;
}

void expect_loads_back(const std::string& path, const Source& s) {
  const std::string p = path;
  const Checkpoint cp = Checkpoint::open({&p, 1});
  ASSERT_EQ(cp.tensors().size(), s.tensors.size());
  const LoadedTensors got = load(cp, {.target = LoadTarget::pageable_host});
  for (std::size_t i = 0; i < s.tensors.size(); ++i) {
    const SaveTensor& t = s.tensors[i];
    SCOPED_TRACE(t.name);
    const LoadedTensor* lt = got.find(t.name);
    ASSERT_NE(lt, nullptr);
    EXPECT_EQ(lt->info->dtype, t.dtype);
    EXPECT_EQ(lt->info->shape, t.shape);
    ASSERT_EQ(lt->info->bytes, t.bytes);
    EXPECT_TRUE(test::same_bytes({static_cast<const std::byte*>(lt->data), t.bytes}, s.data[i]));
  }
}

TEST(SaveSafetensors, EveryDtypeAndShapeRoundTripsFromHostMemory) {
  TempDir dir(disk_root());
  const Source s = every_dtype();
  const std::string path = dir.file("all.safetensors");
  const SaveResult r = save_safetensors(path, s.tensors, {.metadata = SaveMetadata{{"format", "pt"}}});
  EXPECT_EQ(r.file_bytes, test::file_size(path));
  EXPECT_EQ(r.transfer.bytes, r.file_bytes);
  EXPECT_EQ(r.transfer.path, Path::host);
  EXPECT_FALSE(r.transfer.reason.empty());
  expect_loads_back(path, s);
  // The file is the layout's prefix and then the tensors in its order, nothing else.
  const SafetensorsLayout l = plan_safetensors(s.tensors, SaveMetadata{{"format", "pt"}});
  std::vector<std::byte> want = l.prefix;
  for (std::size_t i : l.order) want.insert(want.end(), s.data[i].begin(), s.data[i].end());
  EXPECT_TRUE(test::same_bytes(test::read_whole(path), want));
  EXPECT_TRUE(temporaries_in(dir.path()).empty());
}

TEST(SaveSafetensors, FromSimDeviceMemoryTakesTheBouncePath) {
  TempDir dir(disk_root());
  const auto dev = open_device("sim");
  Source s = every_dtype();
  std::vector<DeviceBuffer> on_device;
  for (std::size_t i = 0; i < s.tensors.size(); ++i) {
    if (s.data[i].empty()) continue;
    on_device.emplace_back(dev, s.data[i].size());
    dev->copy_to_device(on_device.back().data(), s.data[i].data(), s.data[i].size());
    s.tensors[i].data = on_device.back().data();
  }
  // One big tensor cut into several writes (max_write), a small in-flight budget.
  std::vector<std::byte> big = test::random_bytes(5 * MiB + 123, 99);
  DeviceBuffer big_dev(dev, big.size());
  dev->copy_to_device(big_dev.data(), big.data(), big.size());
  s.data.push_back(big);
  s.tensors.push_back({"big", DType::u8, {big.size()}, big_dev.data(), big.size()});
  const std::string path = dir.file("dev.safetensors");
  const SaveResult r = save_safetensors(path, s.tensors, {.device = dev, .max_write = 1 * MiB, .inflight_bytes = 2 * MiB});
  EXPECT_NE(r.transfer.reason.find("bounce"), std::string::npos) << r.transfer.reason;
  expect_loads_back(path, s);
}

TEST(AtomicFile, ReplacesTheOldFileOnlyOnCommitAndKeepsItsMode) {
  TempDir dir(disk_root());
  const std::string path = dir.file("f.bin");
  test::write_file(path, bytes_of({1, 2, 3}));
  ASSERT_EQ(::chmod(path.c_str(), 0600), 0);
  {
    AtomicFile a = AtomicFile::create(path);
    (void)write(a.file(), "abcd", 4, 0);
    EXPECT_TRUE(test::same_bytes(test::read_whole(path), bytes_of({1, 2, 3})));
    EXPECT_EQ(temporaries_in(dir.path()).size(), 1U);
  }  // dropped without commit
  EXPECT_TRUE(test::same_bytes(test::read_whole(path), bytes_of({1, 2, 3})));
  EXPECT_TRUE(temporaries_in(dir.path()).empty());
  AtomicFile a = AtomicFile::create(path);
  (void)write(a.file(), "abcd", 4, 0);
  a.commit();
  EXPECT_EQ(test::read_text(path), "abcd");
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600U);
  EXPECT_TRUE(temporaries_in(dir.path()).empty());
}

TEST(AtomicFile, TheNextSaveRemovesStaleTemporariesOnly) {
  TempDir dir(disk_root());
  const std::string path = dir.file("m.safetensors");
  const std::string marker = std::string(".m.safetensors") + atomic_temporary_marker;
  // A dead writer's (no such process), a live one's (our parent's pid), other files.
  const std::string dead = dir.file(marker + "2147483646-00000000deadbeef");
  const std::string live = dir.file(fmt::format("{}{}-00000000cafef00d", marker, ::getppid()));
  const std::string other_name = dir.file(std::string(".n.safetensors") + atomic_temporary_marker + "2147483646-00000000deadbeef");
  const std::string not_ours = dir.file(marker + "junk");
  for (const auto& p : {dead, live, other_name, not_ours}) test::write_file(p, bytes_of({7}));
  std::vector<std::byte> d(4);
  const SaveTensor t{"x", DType::f32, {1}, d.data(), 4};
  (void)save_safetensors(path, {&t, 1});
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_TRUE(fs::exists(live));
  EXPECT_TRUE(fs::exists(other_name));
  EXPECT_TRUE(fs::exists(not_ours));
  // A temporary a live AtomicFile holds is never taken, even when its pid looks dead.
  AtomicFile held = AtomicFile::create(path);
  const std::string held_dead = dir.file(marker + "2147483645-0000000000000001");
  fs::rename(held.temporary_path(), held_dead);
  EXPECT_EQ(remove_stale_temporaries(path), 0U);
  EXPECT_TRUE(fs::exists(held_dead));
  fs::rename(held_dead, held.temporary_path());
}

TEST(SaveSafetensors, AFailedWriteLeavesThePreviousFileAndNoTemporary) {
  TempDir dir(disk_root());
  const std::string path = dir.file("m.safetensors");
  std::vector<std::byte> old_data = test::random_bytes(4096, 5);
  const SaveTensor old_t{"w", DType::u8, {old_data.size()}, old_data.data(), old_data.size()};
  (void)save_safetensors(path, {&old_t, 1});
  const std::vector<std::byte> old_file = test::read_whole(path);

  std::vector<std::byte> new_data = test::random_bytes(3 * MiB, 6);
  const SaveTensor new_t{"w", DType::u8, {new_data.size()}, new_data.data(), new_data.size()};
  for (int error : {ENOSPC, EIO}) {
    SCOPED_TRACE(error);
    test::ScopedEngineFactory factory([error](EngineKind kind, unsigned depth) {
      return std::make_unique<FaultyEngine>(test::make_inner_engine(kind, depth),
                                            FaultPlan{.every = 3, .error = error, .only = IoOp::write});
    });
    const auto e = test::error_of([&] { (void)save_safetensors(path, {&new_t, 1}, {.max_write = 256 * KiB}); });
    ASSERT_TRUE(e);
    EXPECT_EQ(e->errno_value(), error) << e->what();
    EXPECT_TRUE(test::same_bytes(test::read_whole(path), old_file));
    EXPECT_TRUE(temporaries_in(dir.path()).empty());
  }
}

// A tmpfs of 8 MiB holding a 3 MiB checkpoint: a 6 MiB save cannot fit beside it.
TEST(SaveSafetensors, EnospcOnASmallFilesystemLeavesThePreviousCheckpoint) {
  if (::geteuid() != 0) GTEST_SKIP() << "mounting a small tmpfs needs root";
  TempDir dir(disk_root());
  if (test::shell("mount -t tmpfs -o size=8m tmpfs " + test::shell_quote(dir.path()) + " 2>/dev/null") != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs here";
  }
  struct Unmount {
    std::string p;
    ~Unmount() { (void)test::shell("umount " + test::shell_quote(p)); }
  } unmount{dir.path()};
  const std::string path = dir.path() + "/model.safetensors";
  std::vector<std::byte> old_data = test::random_bytes(3 * MiB, 1);
  const SaveTensor old_t{"w", DType::u8, {old_data.size()}, old_data.data(), old_data.size()};
  (void)save_safetensors(path, {&old_t, 1});
  const std::vector<std::byte> old_file = test::read_whole(path);
  std::vector<std::byte> new_data = test::random_bytes(6 * MiB, 2);
  const SaveTensor new_t{"w", DType::u8, {new_data.size()}, new_data.data(), new_data.size()};
  const auto e = test::error_of([&] { (void)save_safetensors(path, {&new_t, 1}); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->errno_value(), ENOSPC) << e->what();
  EXPECT_TRUE(test::same_bytes(test::read_whole(path), old_file));
  EXPECT_TRUE(temporaries_in(dir.path()).empty());
}

TEST(SaveCheckpoint, PlansShardsAsHuggingFaceDoes) {
  const std::vector<ShardEntry> e{{"a", 40}, {"b", 50}, {"c", 30}, {"huge", 500}, {"d", 10}};
  const ShardPlan p = plan_shards(e, 100);
  ASSERT_EQ(p.shards.size(), 4U);
  EXPECT_EQ(p.shards[0].tensors, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(p.shards[1].tensors, (std::vector<std::string>{"c"}));
  EXPECT_EQ(p.shards[2].tensors, (std::vector<std::string>{"huge"}));
  EXPECT_EQ(p.shards[3].tensors, (std::vector<std::string>{"d"}));
  EXPECT_EQ(p.shards[1].file, "model-00002-of-00004.safetensors");
  EXPECT_EQ(p.index_file, "model.safetensors.index.json");
  EXPECT_EQ(p.total_bytes, 630U);
  // Ranks never share a shard.
  const std::vector<ShardEntry> ranked{{"a", 1, 0}, {"b", 1, 1}, {"c", 1, 1}};
  const ShardPlan r = plan_shards(ranked, 100);
  ASSERT_EQ(r.shards.size(), 2U);
  EXPECT_EQ(r.shards[1].rank, 1U);
  EXPECT_EQ(r.shards[1].tensors.size(), 2U);
  EXPECT_EQ(plan_shards({}, 100).shards.at(0).file, "model.safetensors");
}

TEST(SaveCheckpoint, ShardsAndIndexLoadBackAndAResaveReplacesThem) {
  TempDir dir(disk_root());
  const Source s = every_dtype();
  const std::string folder = dir.path() + "/ckpt";
  const auto results = save_checkpoint(folder, s.tensors, 2000);
  ASSERT_GT(results.size(), 2U);
  const auto index = nlohmann::json::parse(test::read_text(folder + "/model.safetensors.index.json"));
  EXPECT_EQ(index["weight_map"].size(), s.tensors.size());
  std::uint64_t total = 0;
  for (const auto& t : s.tensors) total += t.bytes;
  EXPECT_EQ(index["metadata"]["total_size"], total);
  expect_loads_back(folder, s);
  // Fewer, bigger shards: the old ones the new index does not name go.
  (void)save_checkpoint(folder, s.tensors, 1 * MiB);
  EXPECT_FALSE(fs::exists(folder + "/model.safetensors.index.json"));
  EXPECT_TRUE(fs::exists(folder + "/model.safetensors"));
  std::size_t files = 0;
  for (const auto& e : fs::directory_iterator(folder)) files += e.path().filename() != "." ? 1 : 0;
  EXPECT_EQ(files, 1U);
  expect_loads_back(folder, s);
}

}  // namespace
}  // namespace sluice
