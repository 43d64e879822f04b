// Mapped loads (HostLoad, docs/paths.md "Loads into host memory"): tensors of a cached file that
// view a private mapping of it. Every dtype's bytes are right, misaligned tensors are copies,
// writes stay in the process, the mapping outlives the checkpoint and goes with the last owner,
// and the decision: cached -> mapped, cold / read asked / other targets / caller buffers /
// cache_policy bypass -> read, each with its reason.
#include <gtest/gtest.h>

#include <xxhash.h>

#include <cstring>
#include <filesystem>
#include <optional>

#include <fmt/format.h>

#include "sluice/config.hpp"
#include "sluice/load.hpp"
#include "support/residency_util.hpp"
#include "support/test_util.hpp"
#include "tensor_files.hpp"

namespace sluice {
namespace {

using test::pattern;
using test::StTensor;

class MappedLoad : public ::testing::Test {
 protected:
  // One tensor of every byte-sized dtype, each after a 1-byte U8 so that every other one lies
  // misaligned for its type (as in files not written by the reference writer).
  void SetUp() override {
    unsigned seed = 1;
    for (const test::StDtype& d : test::st_dtypes) {
      if (d.bits % 8 != 0) continue;
      const std::uint64_t n = 1000 + seed;
      tensors_.push_back({fmt::format("t{}", seed), d.name, {n}, pattern(n * d.bits / 8, seed)});
      if (seed % 2 == 0)
        tensors_.push_back({fmt::format("pad{}", seed), "U8", {1}, pattern(1, seed + 500)});
      ++seed;
    }
    path_ = dir_.file("m.safetensors");
    test::write_file(path_, test::safetensors_file(tensors_));
  }
  void expect_bytes(const LoadedTensors& got) {
    for (const LoadedTensor& t : got.tensors()) {
      const auto want = test::pread_file(path_, t.info->offset, t.info->bytes);
      EXPECT_EQ(std::memcmp(t.data, want.data(), want.size()), 0) << t.info->name;
    }
  }
  LoadOptions host(HostLoad h = HostLoad::automatic) {
    LoadOptions o;
    o.target = LoadTarget::pageable_host;
    o.host_load = h;
    return o;
  }

  test::TempDir dir_{"/var/tmp", "sluice-mapped-"};
  std::vector<StTensor> tensors_;
  std::string path_;
};

TEST_F(MappedLoad, CachedFileIsMappedWithEveryByteRight) {
  const test::PinnedRange pin = test::pin_resident(path_, 0, test::file_size(path_));
  const Checkpoint cp = Checkpoint::open(std::vector<std::string>{path_});
  const LoadedTensors got = load(cp, host());
  EXPECT_EQ(got.result().path, Path::mapped) << got.result().reason;
  EXPECT_TRUE(got.result().reason.starts_with("auto: the page cache holds 100%"))
      << got.result().reason;
  EXPECT_NE(got.result().reason.find("misaligned for their type, copied"), std::string::npos)
      << got.result().reason;
  EXPECT_EQ(got.result().bytes, cp.total_bytes());
  EXPECT_EQ(got.result().ios, 0u);
  ASSERT_EQ(got.tensors().size(), tensors_.size());
  std::size_t copies = 0;
  for (const LoadedTensor& t : got.tensors()) {
    const std::uint64_t align =
        std::min<std::uint64_t>(std::max<std::uint32_t>(t.info->element_bits / 8, 1), 16);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(t.data) % align, 0u)
        << t.info->name << " at " << t.info->offset;
    // A view of the mapping keeps the file's page offset; a copy of a misaligned one cannot.
    const bool view = reinterpret_cast<std::uintptr_t>(t.data) % 4096 == t.info->offset % 4096;
    if (t.info->offset % align != 0) {
      EXPECT_FALSE(view) << t.info->name;
      ++copies;
    } else {
      EXPECT_TRUE(view) << t.info->name;
    }
  }
  EXPECT_GT(copies, 0u) << "the file has misaligned tensors";
  expect_bytes(got);
}

TEST_F(MappedLoad, WritesStayInTheProcessAndTheMappingOutlivesTheCheckpoint) {
  const std::uint64_t before = loaded_bytes_in_use();
  std::optional<LoadedTensors> got;
  {
    const Checkpoint cp = Checkpoint::open(std::vector<std::string>{path_});
    got.emplace(load(cp, host(HostLoad::mapped)));  // forced: whatever the cache holds
  }  // the checkpoint and its descriptors are gone; the mapping stays
  ASSERT_EQ(got->result().path, Path::mapped) << got->result().reason;
  EXPECT_TRUE(got->result().reason.starts_with("host_load mapped:")) << got->result().reason;
  EXPECT_GT(loaded_bytes_in_use(), before);
  expect_bytes(*got);
  const auto file_before = test::pread_file(path_, 0, test::file_size(path_));
  for (const LoadedTensor& t : got->tensors()) std::memset(t.data, 0x5A, t.info->bytes);
  EXPECT_EQ(test::pread_file(path_, 0, test::file_size(path_)), file_before)
      << "a write reached the file";
  const LoadedTensors again =
      load(Checkpoint::open(std::vector<std::string>{path_}), host(HostLoad::mapped));
  for (std::size_t i = 0; i < tensors_.size(); ++i) {
    EXPECT_EQ(
        std::memcmp(again.tensors()[i].data, tensors_[i].data.data(), tensors_[i].data.size()), 0)
        << tensors_[i].name << ": another load sees the file, not this process's writes";
  }
  const std::uint64_t with_again = loaded_bytes_in_use();
  got.reset();  // the last owner: unmapped
  EXPECT_LT(loaded_bytes_in_use(), with_again);
}

TEST_F(MappedLoad, ColdReadAskedOtherTargetsAndCallerBuffersRead) {
  const Checkpoint cp = Checkpoint::open(std::vector<std::string>{path_});
  {
    const LoadedTensors got = load(cp, host(HostLoad::read));
    EXPECT_EQ(got.result().path, Path::host) << got.result().reason;
    expect_bytes(got);
  }
  {
    LoadOptions o = host();
    o.target = LoadTarget::device;
    o.device = open_device("sim");
    EXPECT_EQ(load(cp, o).result().path, Path::bounce);
    o.target = LoadTarget::pinned_host;
    EXPECT_EQ(load(cp, o).result().path, Path::host);
  }
  {
    std::vector<std::byte> mine(cp.total_bytes() + 64 * cp.tensors().size());
    std::size_t used = 0;
    LoadOptions o = host();
    o.destination = [&](const TensorInfo& t) {
      void* p = mine.data() + used;
      used += (t.bytes + 63) / 64 * 64;
      return p;
    };
    const LoadedTensors got = load(cp, o);
    EXPECT_EQ(got.result().path, Path::host);
    EXPECT_NE(got.result().reason.find("not mapped: the caller gave the buffers"),
              std::string::npos)
        << got.result().reason;
  }
  {
    auto cfg = std::make_shared<Config>(*config());
    cfg->cache_policy = CachePolicy::bypass;
    LoadOptions o = host();
    o.config = cfg;
    const LoadedTensors got = load(cp, o);
    EXPECT_EQ(got.result().path, Path::host);
    EXPECT_NE(got.result().reason.find("not mapped: cache_policy bypass"), std::string::npos)
        << got.result().reason;
  }
  if (!test::drop_cache(path_))
    GTEST_SKIP() << "the page cache of " << path_ << " cannot be dropped per file";
  const LoadedTensors cold = load(cp, host());
  EXPECT_EQ(cold.result().path, Path::host) << cold.result().reason;
  EXPECT_NE(cold.result().reason.find("not mapped: the page cache holds"), std::string::npos)
      << cold.result().reason;
  expect_bytes(cold);
}

TEST_F(MappedLoad, FileShrunkAfterOpenIsAnErrorNotASignal) {
  const Checkpoint cp = Checkpoint::open(std::vector<std::string>{path_});
  std::filesystem::resize_file(path_, test::file_size(path_) - 100);
  auto e = test::error_of([&] { (void)load(cp, host(HostLoad::mapped)); });
  ASSERT_TRUE(e);
  EXPECT_EQ(e->path(), path_);
  EXPECT_NE(std::string(e->what()).find("shrank"), std::string::npos) << e->what();
}

TEST_F(MappedLoad, HostLoadNames) {
  for (HostLoad h : {HostLoad::automatic, HostLoad::read, HostLoad::mapped})
    EXPECT_EQ(parse_host_load(to_string(h)), h);
  EXPECT_EQ(parse_host_load("copy"), std::nullopt);
  EXPECT_EQ(to_string(Path::mapped), "mapped");
  EXPECT_EQ(parse_path("mapped"), std::nullopt) << "not a transfer path";
}

}  // namespace
}  // namespace sluice
