// The loader: opening checkpoints (files, sharded indexes, folders), planning (selection, rank
// split, grouping and alignment), and loads into sim device, pinned and pageable memory that
// put every byte where the plan says, handing each tensor out once.
#include <gtest/gtest.h>

#include <xxhash.h>

#include <cstring>
#include <filesystem>

#include <fmt/format.h>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "sluice/load.hpp"
#include "support/test_util.hpp"
#include "tensor_files.hpp"

namespace sluice {
namespace {

using test::pattern;
using test::StTensor;
using test::TempDir;

class Loader : public ::testing::Test {
 protected:
  std::string put(const std::string& name, const std::vector<std::byte>& bytes) {
    const std::string p = dir_.file(name);
    std::filesystem::create_directories(std::filesystem::path(p).parent_path());
    test::write_file(p, bytes);
    return p;
  }
  // A model of many tensors of mixed sizes, some not multiples of 256 bytes.
  std::vector<StTensor> model(unsigned seed, std::size_t n = 12) {
    std::vector<StTensor> ts;
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t elems = i % 3 == 0 ? 4096 : i % 3 == 1 ? 77 : 1;
      ts.push_back({fmt::format("s{}.t{}", seed, i), "F16", {elems}, pattern(elems * 2, seed * 100 + static_cast<unsigned>(i))});
    }
    return ts;
  }
  void put_text(const std::string& path, const std::string& text) {
    test::write_file(path, std::as_bytes(std::span(text.data(), text.size())));
  }
  // Every loaded tensor holds the file's bytes.
  void expect_bytes(const Checkpoint& cp, const LoadedTensors& got) {
    for (const LoadedTensor& t : got.tensors()) {
      const auto want = test::pread_file(cp.layouts()[t.info->file_index].path, t.info->offset, t.info->bytes);
      EXPECT_EQ(got.xxh3(t), XXH3_64bits(want.data(), want.size())) << t.info->name;
    }
  }

  TempDir dir_{"/var/tmp", "sluice-load-"};
};

TEST_F(Loader, OpensFilesAndFindsTensors) {
  const auto a = put("a.safetensors", test::safetensors_file(model(1)));
  const auto b = put("x.npy", test::npy_file(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (5,), }", pattern(20)));
  const std::vector<std::string> paths{a, b};
  const Checkpoint cp = Checkpoint::open(paths);
  ASSERT_EQ(cp.layouts().size(), 2u);
  EXPECT_EQ(cp.tensors().size(), 13u);
  ASSERT_NE(cp.find("x"), nullptr);
  EXPECT_EQ(cp.find("x")->file_index, 1u);
  EXPECT_EQ(cp.find("nope"), nullptr);
  EXPECT_EQ(cp.total_bytes(), test::file_size(a) - cp.layouts()[0].data_offset + 20);
}

TEST_F(Loader, ShardedIndexAndFolders) {
  put("m/model-00001-of-00002.safetensors", test::safetensors_file(model(1)));
  put("m/model-00002-of-00002.safetensors", test::safetensors_file(model(2)));
  nlohmann::json wm;
  for (unsigned s : {1u, 2u}) {
    for (const auto& t : model(s)) wm[t.name] = fmt::format("model-0000{}-of-00002.safetensors", s);
  }
  const auto index = put("m/model.safetensors.index.json", std::vector<std::byte>());
  put_text(index, nlohmann::json{{"metadata", {{"total_size", 1}}}, {"weight_map", wm}}.dump());
  for (const std::string& p : {index, dir_.file("m")}) {
    const Checkpoint cp = Checkpoint::open(std::vector<std::string>{p});
    EXPECT_EQ(cp.layouts().size(), 2u) << p;
    EXPECT_EQ(cp.tensors().size(), 24u) << p;
  }
  // An index naming a tensor its shard does not hold, and one that escapes its folder.
  wm["ghost"] = "model-00001-of-00002.safetensors";
  put_text(index, nlohmann::json{{"weight_map", wm}}.dump());
  auto e = test::error_of([&] { (void)Checkpoint::open(std::vector<std::string>{index}); });
  ASSERT_TRUE(e);
  EXPECT_NE(std::string(e->what()).find("'ghost'"), std::string::npos) << e->what();
  put_text(index, R"({"weight_map":{"a":"../etc/passwd"}})");
  e = test::error_of([&] { (void)Checkpoint::open(std::vector<std::string>{index}); });
  ASSERT_TRUE(e);
  EXPECT_NE(std::string(e->what()).find("not a file beside the index"), std::string::npos) << e->what();
}

TEST_F(Loader, DuplicateNamesAcrossFilesAreRefused) {
  const auto a = put("a.safetensors", test::safetensors_file(model(1)));
  const auto b = put("b.safetensors", test::safetensors_file(model(1)));
  auto e = test::error_of([&] { (void)Checkpoint::open(std::vector<std::string>{a, b}); });
  ASSERT_TRUE(e);
  EXPECT_NE(std::string(e->what()).find("unique"), std::string::npos) << e->what();
}

TEST_F(Loader, PlanGroupsAlignsAndSplitsByRank) {
  const auto a = put("a.safetensors", test::safetensors_file(model(1, 30)));
  const Checkpoint cp = Checkpoint::open(std::vector<std::string>{a});
  LoadOptions o;
  o.max_read = 20000;
  const LoadPlan plan = plan_load(cp, o);
  ASSERT_EQ(plan.tensors.size(), 30u);
  EXPECT_EQ(plan.bytes, cp.total_bytes());
  std::set<std::size_t> completed;
  std::uint64_t read_bytes = 0;
  for (const LoadRead& r : plan.reads) {
    EXPECT_LE(r.size, o.max_read);
    read_bytes += r.size;
    for (auto k : r.completes) EXPECT_TRUE(completed.insert(k).second);
  }
  EXPECT_EQ(completed.size(), 30u);
  EXPECT_EQ(read_bytes, plan.bytes);
  EXPECT_LT(plan.reads.size(), plan.tensors.size());  // some tensors were read together
  for (std::size_t i = 0; i < plan.tensors.size(); ++i) {
    EXPECT_EQ(plan.placement[i] % o.alignment, 0u) << plan.tensors[i]->name;
    if (i > 0) {
      EXPECT_GE(plan.placement[i], plan.placement[i - 1] + plan.tensors[i - 1]->bytes);
    }
  }
  EXPECT_LE(plan.placement.back() + plan.tensors.back()->bytes, plan.allocation_bytes);

  // Ranks: disjoint contiguous runs covering everything, of about equal bytes.
  std::vector<const TensorInfo*> all;
  for (unsigned r = 0; r < 4; ++r) {
    o.rank = r;
    o.world = 4;
    const LoadPlan p = plan_load(cp, o);
    EXPECT_LT(p.bytes, cp.total_bytes() / 4 + 8192 + 1) << r;
    all.insert(all.end(), p.tensors.begin(), p.tensors.end());
  }
  ASSERT_EQ(all.size(), 30u);
  for (std::size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i], &cp.tensors()[i]);

  o.rank = 4;
  EXPECT_EQ(test::error_of([&] { (void)plan_load(cp, o); })->domain(), ErrorDomain::usage);
  o = {};
  o.alignment = 3;
  EXPECT_EQ(test::error_of([&] { (void)plan_load(cp, o); })->domain(), ErrorDomain::usage);
  o = {};
  o.tensors = {"s1.t3", "missing"};
  auto e = test::error_of([&] { (void)plan_load(cp, o); });
  EXPECT_NE(std::string(e->what()).find("'missing'"), std::string::npos);
}

TEST_F(Loader, LoadsEveryTargetWithEveryByteRight) {
  const auto a = put("a.safetensors", test::safetensors_file(model(1, 40), {{"format", "pt"}}));
  const auto b = put("b.safetensors", test::safetensors_file(model(2, 7)));
  const auto c = put("c.npy", test::npy_file(2, "{'descr': '<f8', 'fortran_order': True, 'shape': (3, 7), }", pattern(168)));
  const Checkpoint cp = Checkpoint::open(std::vector<std::string>{a, b, c});
  auto dev = open_device("sim");
  for (LoadTarget target : {LoadTarget::device, LoadTarget::pinned_host, LoadTarget::pageable_host}) {
    for (std::uint64_t max_read : {std::uint64_t{4096}, 64 * MiB}) {
      LoadOptions o;
      o.target = target;
      o.host_load = HostLoad::read;  // the files are cached: auto would map (MappedLoads below)
      o.device = dev;
      o.max_read = max_read;
      o.inflight_bytes = 3 * max_read;
      std::map<std::string, int> seen;
      o.on_tensor = [&](const LoadedTensor& t) { ++seen[t.info->name]; };
      const LoadedTensors got = load(cp, o);
      EXPECT_EQ(got.tensors().size(), cp.tensors().size());
      EXPECT_EQ(seen.size(), cp.tensors().size());
      for (const auto& [name, n] : seen) EXPECT_EQ(n, 1) << name;
      EXPECT_EQ(got.result().bytes, cp.total_bytes());
      EXPECT_EQ(got.result().path, target == LoadTarget::device ? Path::bounce : Path::host) << got.result().reason;
      EXPECT_FALSE(got.result().reason.empty());
      for (const LoadedTensor& t : got.tensors()) {
        EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.data) % 256, 0u) << t.info->name;
      }
      expect_bytes(cp, got);
    }
  }
}

// Part of a tensor: only its bytes are read, from the right place, as a 1-d tensor of its type;
// the checkpoint it came from and a Fortran-order .npy make no difference (storage order).
TEST_F(Loader, PartOfATensorReadsOnlyItsElements) {
  std::vector<StTensor> ts = model(3, 6);
  ts.push_back({"w", "BF16", {64, 33}, pattern(64 * 33 * 2, 7)});
  ts.push_back({"nib", "F4", {10}, pattern(5, 8)});
  const auto a = put("a.safetensors", test::safetensors_file(ts));
  const auto c =
      put("c.npy", test::npy_file(1, "{'descr': '<f8', 'fortran_order': True, 'shape': (3, 7), }",
                                  pattern(168)));
  const Checkpoint cp = Checkpoint::open(std::vector<std::string>{a, c});
  auto dev = open_device("sim");
  struct Case {
    const char* name;
    std::uint64_t first, count;
  };
  for (const Case& k : {Case{"w", 33 * 10, 33 * 5}, Case{"w", 0, 64 * 33}, Case{"w", 5, 0},
                        Case{"w", 64 * 33, 0}, Case{"c", 4, 9}, Case{"nib", 2, 6}}) {
    const Checkpoint part = cp.part(k.name, k.first, k.count);
    ASSERT_EQ(part.tensors().size(), 1u);
    const TensorInfo& whole = *cp.find(k.name);
    const TensorInfo& t = part.tensors()[0];
    EXPECT_EQ(t.name, k.name);
    EXPECT_EQ(t.dtype, whole.dtype);
    EXPECT_EQ(t.shape, std::vector<std::uint64_t>{k.count});
    EXPECT_FALSE(t.fortran_order);
    EXPECT_EQ(t.offset, whole.offset + k.first * whole.element_bits / 8);
    EXPECT_EQ(t.bytes, k.count * whole.element_bits / 8);
    for (LoadTarget target : {LoadTarget::device, LoadTarget::pageable_host}) {
      LoadOptions o;
      o.target = target;
      o.device = dev;
      const LoadedTensors got = load(part, o);
      ASSERT_EQ(got.tensors().size(), 1u);
      EXPECT_EQ(got.result().bytes, t.bytes) << k.name;
      expect_bytes(part, got);
    }
  }
  const Checkpoint sharded = cp.part("w", 33, 33);
  EXPECT_EQ(sharded.layouts()[0].path, a);
  EXPECT_EQ(sharded.layouts()[0].file_size, cp.layouts()[0].file_size);
  // What cannot be a part: an unknown name, elements past the end, a range that splits a byte.
  for (auto [name, first, count, says] :
       {std::tuple{"nope", 0, 1, "no tensor named 'nope'"},
        std::tuple{"w", 64 * 33 - 1, 2, "it has 2112"},
        std::tuple{"w", 64 * 33 + 1, 0, "it has 2112"},
        std::tuple{"nib", 1, 2, "do not start and end on a byte"},
        std::tuple{"nib", 0, 3, "do not start and end on a byte"}}) {
    auto e = test::error_of([&] { (void)cp.part(name, first, count); });
    ASSERT_TRUE(e) << name << " " << first << " " << count;
    EXPECT_EQ(e->domain(), ErrorDomain::usage);
    EXPECT_NE(std::string(e->what()).find(says), std::string::npos) << e->what();
  }
}

TEST_F(Loader, TensorsOutliveTheCheckpoint) {
  const std::vector<StTensor> ts = model(3, 9);
  const auto a = put("a.safetensors", test::safetensors_file(ts));
  LoadedTensors got;
  {
    const Checkpoint cp = Checkpoint::open(std::vector<std::string>{a});
    LoadOptions o;
    o.target = LoadTarget::pageable_host;
    got = load(cp, o);
  }  // the Checkpoint, its TensorInfo and its files are gone (ASan reports any use of them)
  LoadedTensors moved = std::move(got);
  ASSERT_EQ(moved.tensors().size(), ts.size());
  for (std::size_t i = 0; i < ts.size(); ++i) {
    const LoadedTensor& t = moved.tensors()[i];
    EXPECT_EQ(t.info->name, ts[i].name);
    EXPECT_EQ(t.info->dtype, DType::f16);
    EXPECT_EQ(t.info->shape, ts[i].shape);
    EXPECT_EQ(t.info->bytes, ts[i].data.size());
    EXPECT_EQ(std::memcmp(t.data, ts[i].data.data(), ts[i].data.size()), 0) << ts[i].name;
    EXPECT_EQ(moved.find(ts[i].name), &t) << "the name index survives the move";
  }
}

TEST_F(Loader, LoadedBytesInUseCountsEachAllocationUntilItsLastOwnerGoes) {
  const auto a = put("a.safetensors", test::safetensors_file(model(5, 10)));
  const Checkpoint cp = Checkpoint::open(std::vector<std::string>{a});
  const std::uint64_t before = loaded_bytes_in_use();
  LoadOptions o;
  o.target = LoadTarget::pageable_host;
  o.host_load = HostLoad::read;
  const LoadPlan plan = plan_load(cp, o);
  std::optional<LoadedTensors> host(load(cp, o));
  EXPECT_EQ(loaded_bytes_in_use(), before + plan.allocation_bytes);
  o.target = LoadTarget::device;
  o.device = open_device("sim");
  std::optional<LoadedTensors> dev(load(cp, o));
  EXPECT_EQ(loaded_bytes_in_use(), before + 2 * plan.allocation_bytes);
  LoadedTensors moved = std::move(*host);
  host.reset();  // the moved-from object owns nothing: the count stays
  EXPECT_EQ(loaded_bytes_in_use(), before + 2 * plan.allocation_bytes);
  moved = LoadedTensors();  // assignment over it frees the host allocation
  EXPECT_EQ(loaded_bytes_in_use(), before + plan.allocation_bytes);
  dev.reset();
  EXPECT_EQ(loaded_bytes_in_use(), before);
  std::vector<std::byte> mine(cp.total_bytes());
  std::uint64_t used = 0;
  o.target = LoadTarget::pageable_host;
  o.destination = [&](const TensorInfo& t) {
    used += t.bytes;
    return static_cast<void*>(mine.data() + used - t.bytes);
  };
  const LoadedTensors in_mine = load(cp, o);
  EXPECT_EQ(loaded_bytes_in_use(), before) << "caller buffers are not the loader's memory";
  EXPECT_EQ(in_mine.tensors().size(), cp.tensors().size());
}

TEST_F(Loader, SubsetRankAndCallerBuffers) {
  const auto a = put("a.safetensors", test::safetensors_file(model(1, 20)));
  const Checkpoint cp = Checkpoint::open(std::vector<std::string>{a});
  LoadOptions o;
  o.target = LoadTarget::pageable_host;
  o.tensors = {"s1.t7", "s1.t2", "s1.t3"};
  const LoadedTensors sub = load(cp, o);
  ASSERT_EQ(sub.tensors().size(), 3u);
  EXPECT_EQ(sub.tensors()[0].info->name, "s1.t2");  // checkpoint order
  ASSERT_NE(sub.find("s1.t7"), nullptr);
  expect_bytes(cp, sub);

  std::vector<std::vector<std::byte>> buffers;
  buffers.reserve(cp.tensors().size());
  LoadOptions mine;
  mine.target = LoadTarget::pageable_host;
  mine.rank = 1;
  mine.world = 2;
  mine.max_read = 1000;
  mine.destination = [&](const TensorInfo& t) {
    buffers.emplace_back(t.bytes + 1);
    return static_cast<void*>(buffers.back().data());
  };
  const LoadedTensors got = load(cp, mine);
  ASSERT_FALSE(got.tensors().empty());
  for (std::size_t i = 0; i < got.tensors().size(); ++i) EXPECT_EQ(got.tensors()[i].data, buffers[i].data());
  expect_bytes(cp, got);
  mine.destination = [](const TensorInfo&) { return nullptr; };
  EXPECT_EQ(test::error_of([&] { (void)load(cp, mine); })->domain(), ErrorDomain::usage);
}

TEST_F(Loader, FileShrunkAfterOpenFailsAfterAllReads) {
  const auto a = put("a.safetensors", test::safetensors_file(model(1, 20)));
  const Checkpoint cp = Checkpoint::open(std::vector<std::string>{a});
  std::filesystem::resize_file(a, test::file_size(a) - 100);
  LoadOptions o;
  o.target = LoadTarget::device;
  o.device = open_device("sim");
  o.max_read = 4096;
  auto e = test::error_of([&] { (void)load(cp, o); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->path(), a);
  EXPECT_NE(std::string(e->what()).find("shrank"), std::string::npos) << e->what();
}

TEST_F(Loader, CallbackErrorsStopTheLoad) {
  const auto a = put("a.safetensors", test::safetensors_file(model(1, 20)));
  const Checkpoint cp = Checkpoint::open(std::vector<std::string>{a});
  LoadOptions o;
  o.target = LoadTarget::pageable_host;
  o.max_read = 4096;
  int calls = 0;
  o.on_tensor = [&](const LoadedTensor&) {
    if (++calls == 3) throw std::runtime_error("consumer full");
  };
  EXPECT_THROW((void)load(cp, o), std::runtime_error);
  EXPECT_EQ(calls, 3);
}

}  // namespace
}  // namespace sluice
