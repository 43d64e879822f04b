// Transfers between files and device memory, checked byte for byte: the bounce, posix and auto
// paths (auto is bounce here: the CTest entries run without libcufile) on the simulated device and
// the CUDA device over the fake libcuda, for reads and writes at edge and random offsets and sizes,
// at offsets into a device allocation, on a disk filesystem and on tmpfs, through few small pinned
// buffers and several engine/thread/queue-depth shapes, so the pipeline runs many chunks.
// The device bytes are read back with the device's own copies and compared with pread of the
// file; the bytes around the target range must be untouched. Reads past the end of the file
// behave as on the host path.
//
// Then bounded memory (DESIGN.md principle 4): however large the file, the pinned memory is the
// pool's count x size, allocated once.
#include <algorithm>
#include <map>
#include <atomic>
#include <cstring>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "gpu/cufile_api.hpp"
#include "gpu/sim_device.hpp"
#include "gpu_test_util.hpp"
#include "sluice/units.hpp"
#include "sluice/staging_pool.hpp"
#include "sluice/stats.hpp"
#include "transfer/gpu_paths.hpp"

namespace sluice {
namespace {

using gpu_test::contains;
using gpu_test::DeviceMemory;
using test::Folder;

constexpr std::byte sentinel{0xA5};
constexpr std::size_t guard = 4096;  // untouched device bytes checked after the target range

struct Case {
  std::string device;  // "sim" or "cuda:0"
  Path path;           // bounce, posix, or direct for "auto"
  Folder folder;
  gpu_test::Shape shape;
  [[nodiscard]] bool is_auto() const { return path == Path::direct; }
  [[nodiscard]] std::optional<Path> requested() const {
    return is_auto() ? std::nullopt : std::optional<Path>(path);
  }
  [[nodiscard]] std::string name() const {
    return fmt::format("{}_{}_{}_{}", device == "sim" ? "sim" : "cuda0",
                       is_auto() ? "auto" : to_string(path), to_string(folder), shape.name);
  }
};

struct Range {
  std::uint64_t offset;
  std::uint64_t size;
  std::size_t dev_offset;  // where in the device allocation the transfer starts
};

std::vector<Case> all_cases() {
  const gpu_test::Shape serial{"psync_t1_q1", "psync", 1, 1, true, 64 * KiB};
  const gpu_test::Shape wide{"auto_t4_q8", "auto", 4, 8, true, 64 * KiB};
  const gpu_test::Shape deep{"auto_t2_q32_buffered", "auto", 2, 32, false, 128 * KiB};
  std::vector<Case> out;
  for (const std::string dev : {"sim", "cuda:0"}) {
    out.push_back({dev, Path::bounce, Folder::disk, serial});
    out.push_back({dev, Path::bounce, Folder::disk, wide});
    out.push_back({dev, Path::bounce, Folder::disk, deep});
    out.push_back({dev, Path::bounce, Folder::tmpfs, wide});
    out.push_back({dev, Path::direct, Folder::disk, serial});  // auto
    out.push_back({dev, Path::direct, Folder::disk, wide});
    out.push_back({dev, Path::direct, Folder::tmpfs, wide});
    out.push_back({dev, Path::posix, Folder::disk, serial});
    out.push_back({dev, Path::posix, Folder::tmpfs, wide});
  }
  return out;
}

// Edge cases around blocks, pieces and the end of the file, then seeded random ones.
std::vector<Range> ranges_for(std::uint64_t file_size, std::uint64_t seed) {
  std::vector<Range> r = {
      {0, 0, 0},
      {0, 1, 0},
      {0, 4095, 1},
      {0, 4096, 0},
      {0, 4097, 513},
      {1, 4096, 4096},
      {4095, 2, 0},
      {4096, 64 * KiB, 0},
      {3, 3 * MiB + 5, 4095},
      {8192, 2 * MiB, 4096},
      {12345, 64 * KiB + 1, 1},
      {file_size - 100, 1000, 0},     // crosses the end: clamped
      {file_size - 4097, 4097, 7},    // exactly to the end
      {file_size, 10, 0},             // at the end: 0 bytes
      {file_size + 4096, 4096, 0},    // past the end: 0 bytes
      {0, file_size + 5000, 4096},    // the whole file and more
  };
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 6; ++i) {
    const std::uint64_t off = rng() % file_size;
    const std::uint64_t size = rng() % (3 * MiB);
    r.push_back({off, size, static_cast<std::size_t>(rng() % 8192)});
  }
  return r;
}

class Transfer : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    std::string why;
    if (!gpu_test::need_mode("no_cufile", !detail::CuFile::instance().available(), &why)) GTEST_SKIP() << why;
    const Case& c = GetParam();
    dev_ = gpu_test::try_open(c.device, &why);
    if (!dev_) {
      if (c.device == "cuda:0" && !gpu_test::mode().empty()) FAIL() << "the fake libcuda should load: " << why;
      GTEST_SKIP() << why;
    }
    const auto root = test::folder_root(c.folder, &why);
    if (!root) GTEST_SKIP() << why;
    dir_ = std::make_unique<test::TempDir>(*root, "sluice-gpu-");
    cfg_ = gpu_test::make_config(c.shape);
  }

  TransferOptions options() const {
    return {.config = cfg_, .device = dev_, .path = GetParam().requested()};
  }
  TransferOptions host_options() const { return {.config = cfg_}; }

  // The path and reason a non-empty transfer of this case must report.
  void expect_path_and_reason(const TransferResult& r, const File& f) const {
    const Case& c = GetParam();
    if (c.path == Path::posix) {
      EXPECT_EQ(r.path, Path::posix);
      EXPECT_TRUE(contains(r.reason, "pageable"));
      return;
    }
    EXPECT_EQ(r.path, Path::bounce);
    if (c.is_auto()) {
      EXPECT_TRUE(contains(r.reason, "auto: direct unavailable"));
      EXPECT_TRUE(contains(r.reason, "libcufile"));
    }
    if (c.folder == Folder::tmpfs) {
      EXPECT_FALSE(f.has_direct());
      EXPECT_TRUE(contains(r.reason, "buffered: filesystem tmpfs has no O_DIRECT"));
    } else if (!c.shape.direct_io) {
      EXPECT_TRUE(contains(r.reason, "buffered: direct I/O disabled by configuration"));
    } else if (f.has_direct()) {
      EXPECT_TRUE(contains(r.reason, "O_DIRECT via"));
      EXPECT_TRUE(contains(r.reason, "pinned buffers"));
    } else {
      EXPECT_TRUE(contains(r.reason, "buffered"));
    }
  }

  std::shared_ptr<Device> dev_;
  std::unique_ptr<test::TempDir> dir_;
  std::shared_ptr<const Config> cfg_;
};

// One data file per folder for the whole program: writing (and flushing, for O_DIRECT) a fresh
// one per case would cost more than the reads under test.
const std::string& shared_data_file(Folder folder, const std::string& root, std::uint64_t size) {
  static std::map<Folder, std::pair<std::unique_ptr<test::TempDir>, std::string>> files;
  auto& [dir, path] = files[folder];
  if (!dir) {
    dir = std::make_unique<test::TempDir>(root, "sluice-gpu-data-");
    path = dir->file("data.bin");
    test::write_file(path, test::random_bytes(size, test::test_seed(42)));
  }
  return path;
}

TEST_P(Transfer, ReadsMatchPreadAndTheHostPath) {
  const std::uint64_t file_size = 5 * MiB + 1237;
  const std::string& path = shared_data_file(GetParam().folder, *test::folder_root(GetParam().folder), file_size);
  const File f = File::open(path, OpenMode::read);

  for (const Range& rg : ranges_for(file_size, test::test_seed(7))) {
    SCOPED_TRACE(fmt::format("read offset {} size {} at device offset {}", rg.offset, rg.size, rg.dev_offset));
    const std::vector<std::byte> want = test::pread_file(path, rg.offset, rg.size);
    DeviceMemory mem(dev_, rg.dev_offset + rg.size + guard);
    mem.fill(sentinel);
    const TransferResult r = read(f, mem.data() + rg.dev_offset, rg.size, rg.offset, options());
    ASSERT_EQ(r.bytes, want.size());
    if (r.bytes > 0) {
      expect_path_and_reason(r, f);
      EXPECT_GE(r.ios, 1U);
    } else {
      EXPECT_TRUE(contains(r.reason, "end of file"));
    }

    const std::vector<std::byte> got = mem.download();
    const std::span<const std::byte> all(got);
    EXPECT_TRUE(gpu_test::all_equal(all.first(rg.dev_offset), sentinel)) << "bytes before the target changed";
    EXPECT_TRUE(test::same_bytes(all.subspan(rg.dev_offset, want.size()), want));
    EXPECT_TRUE(gpu_test::all_equal(all.subspan(rg.dev_offset + want.size()), sentinel))
        << "bytes after the data read changed";

    // The host path reads the same bytes and reports the same count (EOF behaviour included).
    test::GuardedBuffer host(static_cast<std::size_t>(rg.size) + 1, rg.dev_offset % 64);
    const TransferResult h = read(f, host.data(), rg.size, rg.offset, host_options());
    EXPECT_EQ(h.path, Path::host);
    EXPECT_EQ(h.bytes, r.bytes);
    EXPECT_TRUE(test::same_bytes(host.first(static_cast<std::size_t>(h.bytes)), want));
  }
}

TEST_P(Transfer, WritesLandOnTheFileAndReadBack) {
  const std::uint64_t file_size = MiB + 777;
  const std::string path = dir_->file("out.bin");
  std::vector<std::byte> model = test::random_bytes(file_size, test::test_seed(3));
  test::write_file(path, model);
  const File f = File::open(path, OpenMode::read_write);

  std::vector<Range> writes = {
      {0, 0, 0},
      {0, 1, 0},
      {4095, 4097, 1},
      {4096, 4096, 0},
      {1, 300 * KiB + 3, 4095},
      {8192, MiB, 4096},                   // extends the file
      {file_size - 100, 5000, 0},          // across the original end
      {file_size + 20000, 4097, 513},      // leaves a hole, then extends
  };
  std::mt19937_64 rng(test::test_seed(5));
  for (int i = 0; i < 4; ++i) {
    writes.push_back({rng() % file_size, rng() % MiB, static_cast<std::size_t>(rng() % 8192)});
  }

  unsigned seed = 100;
  for (const Range& w : writes) {
    SCOPED_TRACE(fmt::format("write offset {} size {} from device offset {}", w.offset, w.size, w.dev_offset));
    ++seed;
    const std::vector<std::byte> data =
        w.size == 0 ? std::vector<std::byte>{} : test::random_bytes(static_cast<std::size_t>(w.size), seed);
    DeviceMemory src(dev_, w.dev_offset + w.size + 1);
    src.upload(data, w.dev_offset);
    const TransferResult r = write(f, src.data() + w.dev_offset, w.size, w.offset, options());
    ASSERT_EQ(r.bytes, w.size);
    if (w.size > 0) {
      expect_path_and_reason(r, f);
    } else {
      EXPECT_TRUE(contains(r.reason, "nothing to write"));
    }
    if (w.offset + w.size > model.size()) model.resize(static_cast<std::size_t>(w.offset + w.size), std::byte{0});
    std::copy(data.begin(), data.end(), model.begin() + static_cast<std::ptrdiff_t>(w.offset));
    ASSERT_TRUE(test::same_bytes(test::read_whole(path), model)) << "the file after the write";

    // And back through the same path into other device memory.
    DeviceMemory back(dev_, w.size + 1);
    const TransferResult rb = read(f, back.data(), w.size, w.offset, options());
    ASSERT_EQ(rb.bytes, w.size);
    EXPECT_TRUE(test::same_bytes(back.download(0, data.size()), data)) << "the round trip";
  }
}

TEST_P(Transfer, WrongOpenModesAreUsageErrors) {
  const std::string path = dir_->file("w.bin");
  test::write_file(path, test::random_bytes(10000, 1));
  const File wo = File::open(path, OpenMode::write);
  DeviceMemory mem(dev_, 8192);
  EXPECT_TRUE(gpu_test::throws_error([&] { (void)read(wo, mem.data(), 4096, 0, options()); },
                                     ErrorDomain::usage, {"writing only"}));
  const File ro = File::open(path, OpenMode::read);
  EXPECT_TRUE(gpu_test::throws_error([&] { (void)write(ro, mem.data(), 4096, 0, options()); },
                                     ErrorDomain::usage, {"read-only"}));
}

INSTANTIATE_TEST_SUITE_P(Transfer, Transfer, ::testing::ValuesIn(all_cases()),
                         [](const auto& p) { return p.param.name(); });

// ---------------------------------------------------------------------------------------------
// Bounded memory: the pinned pool of the device is count x size, made once, whatever the file.

class BoundedMemory : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const auto root = test::folder_root(Folder::disk);
    if (!root) return;
    dir_ = new test::TempDir(*root, "sluice-gpu-bounded-");
    big_ = dir_->file("big.bin");
    test::write_file(big_, test::random_bytes(big_size, test::test_seed(64)));
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override {
    std::string why;
    if (!gpu_test::need_mode("no_cufile", !detail::CuFile::instance().available(), &why)) GTEST_SKIP() << why;
    if (dir_ == nullptr) GTEST_SKIP() << "no disk folder";
    dev_ = open_device("sim");
    sim_ = dynamic_cast<detail::SimDevice*>(dev_.get());
    ASSERT_NE(sim_, nullptr) << "open_device(\"sim\") is a detail::SimDevice";
  }

  static constexpr std::size_t big_size = 64 * MiB;
  static inline test::TempDir* dir_ = nullptr;
  static inline std::string big_;
  std::shared_ptr<Device> dev_;
  detail::SimDevice* sim_ = nullptr;
};

TEST_F(BoundedMemory, ALargeReadUsesOnlyThePool) {
  const auto cfg = config();
  const File f = File::open(big_, OpenMode::read);
  DeviceMemory mem(dev_, big_size);
  const TransferOptions o{.config = gpu_test::make_config({"auto_t4_q8", "auto", 4, 8, true, 64 * KiB}),
                          .device = dev_, .path = Path::bounce};
  const TransferResult r = read(f, mem.data(), big_size, 0, o);
  ASSERT_EQ(r.bytes, big_size);
  EXPECT_TRUE(test::same_bytes(mem.download(), test::read_whole(big_)));

  StagingPool& pool = detail::pinned_pool(*dev_);
  EXPECT_EQ(pool.count(), cfg->bounce_buffers);
  EXPECT_EQ(pool.buffer_size(), cfg->bounce_buffer_size);
  EXPECT_LT(static_cast<std::uint64_t>(pool.bytes()), big_size / 16) << "the test needs a file much larger than the pool";
  EXPECT_GE(pool.high_water(), 1U);
  EXPECT_LE(pool.high_water(), pool.count());
  EXPECT_EQ(pool.in_use(), 0U) << "every buffer is back after the transfer";
  EXPECT_EQ(sim_->pinned_bytes(), pool.count() * pool.buffer_size())
      << "pinned memory beyond the pool: something pinned per call";
  EXPECT_EQ(&pool, &detail::pinned_pool(*dev_)) << "one pool per device";
}

TEST_F(BoundedMemory, ConcurrentReadsAndWritesShareTheSamePool) {
  const File f = File::open(big_, OpenMode::read);
  test::TempDir out_dir(*test::folder_root(Folder::disk), "sluice-gpu-bounded-w-");
  const File out = File::open(out_dir.file("w.bin"), OpenMode::read_write);
  const auto cfg = gpu_test::make_config({"auto_t2_q8", "auto", 2, 8, true, 64 * KiB});
  const TransferOptions o{.config = cfg, .device = dev_, .path = Path::bounce};
  const std::size_t part = 4 * MiB;
  constexpr int each = 4;
  std::vector<std::unique_ptr<DeviceMemory>> in, out_src;
  std::vector<std::vector<std::byte>> data;
  for (int i = 0; i < each; ++i) {
    in.push_back(std::make_unique<DeviceMemory>(dev_, part));
    data.push_back(test::random_bytes(part, 200 + static_cast<unsigned>(i)));
    out_src.push_back(std::make_unique<DeviceMemory>(dev_, part));
    out_src.back()->upload(data.back());
  }
  std::vector<TransferFuture> reads, writes;
  for (int i = 0; i < each; ++i) {
    const auto k = static_cast<std::size_t>(i);
    reads.push_back(read_async(f, in[k]->data(), part, k * part + 4096, o));
    writes.push_back(write_async(out, out_src[k]->data(), part, k * part, o));
  }
  for (int i = 0; i < each; ++i) {
    const auto k = static_cast<std::size_t>(i);
    EXPECT_EQ(reads[k].get().bytes, part);
    EXPECT_EQ(writes[k].get().bytes, part);
    EXPECT_TRUE(test::same_bytes(in[k]->download(), test::pread_file(big_, k * part + 4096, part)));
    EXPECT_TRUE(test::same_bytes(test::pread_file(out_dir.file("w.bin"), k * part, part), data[k]));
  }

  StagingPool& pool = detail::pinned_pool(*dev_);
  EXPECT_LE(pool.high_water(), pool.count());
  EXPECT_EQ(pool.in_use(), 0U);
  EXPECT_EQ(sim_->pinned_bytes(), pool.count() * pool.buffer_size());
  EXPECT_EQ(pool.count(), config()->bounce_buffers);
}

TEST_F(BoundedMemory, ThePosixPathPinsNothing) {
  (void)detail::pinned_pool(*dev_);  // the pool may exist; it must not grow
  const std::size_t pinned = sim_->pinned_bytes();
  const File f = File::open(big_, OpenMode::read);
  DeviceMemory mem(dev_, 4 * MiB);
  const TransferOptions o{.config = gpu_test::make_config({}), .device = dev_, .path = Path::posix};
  EXPECT_EQ(read(f, mem.data(), 4 * MiB, 12345, o).bytes, 4 * MiB);
  EXPECT_EQ(sim_->pinned_bytes(), pinned);
  EXPECT_TRUE(test::same_bytes(mem.download(), test::pread_file(big_, 12345, 4 * MiB)));
}

}  // namespace
}  // namespace sluice

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // Few small pinned buffers unless the CTest entry chose others: many chunks per transfer.
  sluice::gpu_test::use_small_pinned_pool(3, 64 << 10);
  return RUN_ALL_TESTS();
}
