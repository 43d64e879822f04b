// On a real CUDA GPU (label `gpu`; bench/gpu-check.sh runs it): read and write round trips
// between files and device memory through bounce, posix and auto, and through direct where the
// real libcufile loads and opens its driver. Every test skips cleanly without a GPU.
#include <chrono>
#include <cstring>
#include <iostream>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "gpu/cuda_device.hpp"
#include "gpu/cufile_api.hpp"
#include "gpu/cuda_api.hpp"
#include "gpu_test_util.hpp"
#include "sluice/units.hpp"
#include "transfer/gpu_paths.hpp"

namespace sluice {
namespace {

using gpu_test::contains;
using gpu_test::DeviceMemory;
using test::Folder;


// Without a GPU every test skips; the marker lets CTest report the entry as skipped, not passed.
class NoGpuMarker : public ::testing::Environment {
 public:
  void SetUp() override {
    std::string why;
    if (!detail::cuda_available(&why)) std::cout << "SLUICE_TEST_SKIPPED: no CUDA GPU (" << why << ")\n";
  }
};
[[maybe_unused]] auto* const marker = ::testing::AddGlobalTestEnvironment(new NoGpuMarker);

class RealGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!detail::cuda_available(&why)) GTEST_SKIP() << "no CUDA GPU: " << why;
    dev_ = open_device("cuda:0");
    const auto root = test::folder_root(Folder::disk, &why);
    if (!root) GTEST_SKIP() << why;
    dir_ = std::make_unique<test::TempDir>(*root, "sluice-real-gpu-");
  }
  TransferOptions options(std::optional<Path> p) const {
    return {.config = gpu_test::make_config({"auto_t4_q8", "auto", 4, 8, true, 1 * MiB}), .device = dev_, .path = p};
  }
  static std::string path_name(std::optional<Path> p) { return p ? std::string(to_string(*p)) : "auto"; }

  std::shared_ptr<Device> dev_;
  std::unique_ptr<test::TempDir> dir_;
};

TEST_F(RealGpu, DeviceBasics) {
  const DeviceInfo& i = dev_->info();
  EXPECT_EQ(i.kind, DeviceKind::cuda);
  EXPECT_FALSE(i.name.empty());
  EXPECT_GT(i.total_memory, 0U);
  std::cout << "GPU: " << i.name << ", " << i.pci_bus_id << ", " << i.driver << "\n";
  DeviceMemory d(dev_, MiB);
  EXPECT_EQ(dev_->pointer_kind(d.data()), MemoryKind::device);
  void* pinned = dev_->alloc_pinned(MiB);
  EXPECT_EQ(dev_->pointer_kind(pinned), MemoryKind::pinned_host);
  dev_->free_pinned(pinned);
  std::vector<std::byte> pageable(4096);
  EXPECT_EQ(dev_->pointer_kind(pageable.data()), MemoryKind::pageable_host);
  const auto src = test::random_bytes(MiB, 1);
  d.upload(src);
  EXPECT_TRUE(test::same_bytes(d.download(), src));
}

TEST_F(RealGpu, ReadsAndWritesRoundTripOnEveryPath) {
  const std::uint64_t size = 64 * MiB + 1237;
  const std::string path = dir_->file("data.bin");
  test::write_file(path, test::random_bytes(size, test::test_seed(11)));
  const std::optional<Path> paths[] = {Path::bounce, Path::posix, std::nullopt};
  struct Range {
    std::uint64_t off, size;
    std::size_t dev_off;
  };
  std::vector<Range> ranges = {{0, 4096, 0},           {0, 32 * MiB, 0},   {1, 4097, 3},
                               {4096, 8 * MiB + 1, 512}, {size - 100, 1000, 0}, {size + 1, 10, 0}};
  std::mt19937_64 rng(test::test_seed(12));
  for (int i = 0; i < 4; ++i) ranges.push_back({rng() % size, rng() % (16 * MiB), static_cast<std::size_t>(rng() % 8192)});

  const File f = File::open(path, OpenMode::read);
  for (const auto p : paths) {
    for (const Range& rg : ranges) {
      SCOPED_TRACE(fmt::format("{}: read offset {} size {} device offset {}", path_name(p), rg.off, rg.size, rg.dev_off));
      const auto want = test::pread_file(path, rg.off, rg.size);
      DeviceMemory mem(dev_, rg.dev_off + rg.size + 1);
      const TransferResult r = read(f, mem.data() + rg.dev_off, rg.size, rg.off, options(p));
      ASSERT_EQ(r.bytes, want.size());
      EXPECT_TRUE(test::same_bytes(mem.download(rg.dev_off, want.size()), want));
      if (r.bytes > 0) {
        std::cout << fmt::format("  {} -> {} ({})\n", path_name(p), to_string(r.path), r.reason);
        if (p) {
          EXPECT_EQ(r.path, *p);
        }
      }
    }
  }

  const std::string out = dir_->file("out.bin");
  const File w = File::open(out, OpenMode::read_write);
  for (const auto p : paths) {
    SCOPED_TRACE(path_name(p));
    const auto data = test::random_bytes(9 * MiB + 5, 13);
    DeviceMemory src(dev_, data.size() + 7);
    src.upload(data, 7);
    const TransferResult r = write(w, src.data() + 7, data.size(), 4095, options(p));
    EXPECT_EQ(r.bytes, data.size());
    EXPECT_TRUE(test::same_bytes(test::pread_file(out, 4095, data.size()), data));
    DeviceMemory back(dev_, data.size());
    EXPECT_EQ(read(w, back.data(), data.size(), 4095, options(p)).bytes, data.size());
    EXPECT_TRUE(test::same_bytes(back.download(), data));
  }
}

TEST_F(RealGpu, DirectWhereTheRealLibcufileLoads) {
  auto& cf = detail::CuFile::instance();
  if (!cf.available()) GTEST_SKIP() << "direct path unavailable here: " << cf.reason();
  const std::uint64_t size = 32 * MiB;
  const std::string path = dir_->file("direct.bin");
  const auto data = test::random_bytes(size, 21);
  test::write_file(path, data);
  DeviceMemory mem(dev_, size);
  {
    const File f = File::open(path, OpenMode::read);
    const PathChoice c = choose_path(f, mem.data(), size, 0, options(std::nullopt));
    std::cout << "auto chooses " << to_string(c.path) << " (" << c.reason << ")\n";
    try {
      const TransferResult r = read(f, mem.data(), size, 0, options(Path::direct));
      EXPECT_EQ(r.path, Path::direct);
      EXPECT_EQ(r.bytes, size);
      EXPECT_TRUE(test::same_bytes(mem.download(), data));
    } catch (const Error& e) {
      // Strict direct may be refused by this machine's GDS set-up; then it must say why.
      std::cout << "strict direct refused: " << e.what() << "\n";
      EXPECT_EQ(e.domain(), ErrorDomain::cufile);
      EXPECT_TRUE(contains(e.what(), "direct"));
    }
    const TransferResult a = read(f, mem.data(), size, 0, options(std::nullopt));
    EXPECT_EQ(a.bytes, size);
    EXPECT_TRUE(test::same_bytes(mem.download(), data));
    std::cout << "auto read went " << to_string(a.path) << " (" << a.reason << ")\n";
  }
  const std::string out = dir_->file("direct-out.bin");
  const File w = File::open(out, OpenMode::read_write);
  const TransferResult r = write(w, mem.data(), size, 0, options(std::nullopt));
  EXPECT_EQ(r.bytes, size);
  EXPECT_TRUE(test::same_bytes(test::read_whole(out), data));
}

TEST_F(RealGpu, StreamOrderedReadSeesEarlierWorkAndPrecedesLaterWork) {
  const std::uint64_t n = 8 * MiB + 3;
  const std::string path = dir_->file("s.bin");
  test::write_file(path, test::random_bytes(n, 31));
  const auto fresh = test::random_bytes(n, 32);
  struct Rewrite {
    std::string path;
    const std::vector<std::byte>* bytes;
    static void run(void* arg) {
      auto* r = static_cast<Rewrite*>(arg);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      test::pwrite_file(r->path, *r->bytes, 0);
    }
  } rewrite{path, &fresh};
  const File f = File::open(path, OpenMode::read);
  DeviceMemory mem(dev_, n);
  std::vector<std::byte> host(n);
  void* pinned = dev_->alloc_pinned(n);
  const StreamHandle s = dev_->create_stream();
  dev_->launch_host_func(s, &Rewrite::run, &rewrite);
  auto fut = read_on_stream(f, mem.data(), n, 0, s, options(Path::bounce));
  dev_->copy_to_host_async(pinned, mem.data(), n, s);
  ASSERT_EQ(fut.wait_for(std::chrono::seconds(120)), std::future_status::ready) << "the stream transfer hung";
  const TransferResult r = fut.get();
  EXPECT_EQ(r.bytes, n);
  EXPECT_TRUE(gpu_test::contains(r.reason, "stream held by a device-side wait")) << r.reason;
  dev_->synchronize(s);
  std::memcpy(host.data(), pinned, n);
  EXPECT_TRUE(test::same_bytes(host, fresh));
  dev_->destroy_stream(s);
  dev_->free_pinned(pinned);
}

// Many stream-ordered transfers on several streams at once: the driver's host-function thread is
// shared by every stream, so a transfer that held it would serialise (or stall) the rest.
TEST_F(RealGpu, ManyStreamTransfersOnSeveralStreams) {
  constexpr int streams = 4;
  constexpr int per_stream = 8;
  constexpr std::uint64_t each = 4 * MiB + 123;
  const std::string path = dir_->file("streams.bin");
  const auto data = test::random_bytes(streams * per_stream * each, 33);
  test::write_file(path, data);
  const File f = File::open(path, OpenMode::read);
  DeviceMemory mem(dev_, data.size());
  std::vector<StreamHandle> s;
  std::vector<TransferFuture> futs;
  for (int i = 0; i < streams; ++i) {
    s.push_back(dev_->create_stream());
    for (int k = 0; k < per_stream; ++k) {
      const std::uint64_t off = static_cast<std::uint64_t>(i * per_stream + k) * each;
      futs.push_back(read_on_stream(f, mem.data() + off, each, off, s.back(), options(Path::bounce)));
    }
  }
  for (auto& fu : futs) {
    ASSERT_EQ(fu.wait_for(std::chrono::seconds(120)), std::future_status::ready) << "a stream transfer hung";
    EXPECT_EQ(fu.get().bytes, each);
  }
  for (StreamHandle h : s) {
    dev_->synchronize(h);
    dev_->destroy_stream(h);
  }
  EXPECT_TRUE(test::same_bytes(mem.download(), data));
}

TEST_F(RealGpu, PinnedMemoryIsBounded) {
  const std::uint64_t size = 256 * MiB;
  const std::string path = dir_->file("big.bin");
  test::write_file(path, test::random_bytes(size, 41));
  const File f = File::open(path, OpenMode::read);
  DeviceMemory mem(dev_, size);
  EXPECT_EQ(read(f, mem.data(), size, 0, options(Path::bounce)).bytes, size);
  StagingPool& pool = detail::pinned_pool(*dev_);
  EXPECT_LE(pool.high_water(), pool.count());
  EXPECT_EQ(pool.in_use(), 0U);
  EXPECT_EQ(pool.count(), config()->bounce_buffers);
}

// Last in the file: where a path copied on the legacy default stream, a stream-ordered transfer on
// the default stream (or on any blocking stream) would wait for itself and hang the process.
TEST_F(RealGpu, StreamTransfersOnTheDefaultStreamForEveryPath) {
  const std::uint64_t n = 8 * MiB + 4097;
  const std::string path = dir_->file("legacy.bin");
  const auto data = test::random_bytes(n, 34);
  test::write_file(path, data);
  const File f = File::open(path, OpenMode::read);
  // Device::create_stream makes non-blocking streams; applications' streams often block.
  dev_->make_current();
  const detail::cu::Api* cuda = detail::cu::driver();
  ASSERT_NE(cuda, nullptr);
  detail::cu::CUstream created = nullptr;
  ASSERT_EQ(cuda->cuStreamCreate(&created, 0), detail::cu::success);
  const StreamHandle blocking = created;
  for (const Path p : {Path::bounce, Path::posix}) {
    for (const StreamHandle s : {StreamHandle{nullptr}, blocking}) {
      DeviceMemory mem(dev_, n);
      auto fut = read_on_stream(f, mem.data(), n, 0, s, options(p));
      ASSERT_EQ(fut.wait_for(std::chrono::seconds(60)), std::future_status::ready)
          << to_string(p) << " on the " << (s == nullptr ? "default" : "created") << " stream hung";
      EXPECT_EQ(fut.get().bytes, n);
      dev_->synchronize(s);
      EXPECT_TRUE(test::same_bytes(mem.download(), data)) << to_string(p);
    }
  }
  dev_->destroy_stream(blocking);
}

}  // namespace
}  // namespace sluice
