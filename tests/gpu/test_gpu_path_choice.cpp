// Which path a transfer takes and why (docs/paths.md), asked of choose_path and seen on real
// transfers, in three libcufile situations, each its own CTest entry (the loader opens the driver
// once per process):
//   NoCuFile         SLUICE_LIBCUFILE names a missing file: auto is bounce, strict direct fails
//   FakeCuFile       the fake libcufile: auto is direct (the fake's counters see the I/O), and
//                    every refusal the fake can inject leads to bounce (auto) or an error (direct)
//   DriverOpenFails  the fake with cuFileDriverOpen failing
// AnyCuFile holds what does not depend on libcufile: host memory, usage errors.
// Every suite runs on the simulated device and on the CUDA device over the fake libcuda.
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "gpu/cufile_api.hpp"
#include "gpu_test_util.hpp"
#include "sluice/units.hpp"
#include "sluice/stats.hpp"

namespace sluice {
namespace {

using gpu_test::contains;
using gpu_test::DeviceMemory;
using gpu_test::throws_error;
using test::Folder;


// The devices of this process: sim, and cuda:0 when the fake libcuda is loaded.
std::vector<std::shared_ptr<Device>> devices() {
  std::vector<std::shared_ptr<Device>> out{open_device("sim")};
  std::string why;
  if (auto d = gpu_test::try_open("cuda:0", &why)) out.push_back(std::move(d));
  return out;
}

std::shared_ptr<const Config> quick_config() {
  return gpu_test::make_config({"auto_t2_q4", "auto", 2, 4, true, 64 << 10});
}

TransferOptions on(const std::shared_ptr<Device>& dev, std::optional<Path> path = std::nullopt) {
  return {.config = quick_config(), .device = dev, .path = path};
}

// A folder with one data file in it.
class Dir {
 public:
  Dir(Folder f, std::uint64_t size) {
    std::string why;
    const auto root = test::folder_root(f, &why);
    if (!root) {
      why_ = why;
      return;
    }
    dir_ = std::make_unique<test::TempDir>(*root, "sluice-gpu-path-");
    data_ = test::random_bytes(static_cast<std::size_t>(size), test::test_seed(size));
    test::write_file(file(), data_);
  }
  [[nodiscard]] bool ok() const { return dir_ != nullptr; }
  [[nodiscard]] const std::string& why() const { return why_; }
  [[nodiscard]] std::string file() const { return dir_->file("data.bin"); }
  [[nodiscard]] std::string other(std::string_view name) const { return dir_->file(name); }
  [[nodiscard]] std::span<const std::byte> bytes(std::uint64_t off, std::uint64_t n) const {
    return std::span(data_).subspan(static_cast<std::size_t>(off), static_cast<std::size_t>(n));
  }

 private:
  std::unique_ptr<test::TempDir> dir_;
  std::vector<std::byte> data_;
  std::string why_;
};

// Reads [off, off+n) into device memory at `dev_off` and checks the bytes.
TransferResult read_checked(const Dir& d, const std::shared_ptr<Device>& dev, std::uint64_t off,
                            std::uint64_t n, std::size_t dev_off, const TransferOptions& o) {
  const File f = File::open(d.file(), OpenMode::read);
  DeviceMemory mem(dev, dev_off + n);
  const TransferResult r = read(f, mem.data() + dev_off, n, off, o);
  EXPECT_EQ(r.bytes, n);
  EXPECT_TRUE(test::same_bytes(mem.download(dev_off, n), d.bytes(off, n)));
  return r;
}

std::uint64_t fallbacks(Fallback f) { return stats().snapshot().fallbacks_for(f); }

PathCounters delta(const StatsSnapshot& before, Path p, Direction dir) {
  const PathCounters a = before.at(p, dir);
  const PathCounters b = stats().snapshot().at(p, dir);
  return {b.bytes - a.bytes, b.ops - a.ops, b.ios - a.ios, b.errors - a.errors, b.nanoseconds - a.nanoseconds};
}

// ---------------------------------------------------------------------------------------------

class NoCuFile : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    const auto& cf = detail::CuFile::instance();
    if (!gpu_test::need_mode("no_cufile", !cf.available() && contains(cf.reason(), "not found"), &why))
      GTEST_SKIP() << why;
  }
};

TEST_F(NoCuFile, StrictDirectFailsNamingLibcufile) {
  Dir d(Folder::disk, 2 * MiB);
  if (!d.ok()) GTEST_SKIP() << d.why();
  for (const auto& dev : devices()) {
    SCOPED_TRACE(to_string(dev->info().kind));
    DeviceMemory mem(dev, MiB);
    const File f = File::open(d.file(), OpenMode::read_write);
    for (auto* what : {"choose_path", "read", "write"}) {
      SCOPED_TRACE(what);
      EXPECT_TRUE(throws_error(
          [&] {
            const std::string_view w = what;
            if (w == "choose_path") (void)choose_path(f, mem.data(), MiB, 0, on(dev, Path::direct));
            if (w == "read") (void)read(f, mem.data(), MiB, 0, on(dev, Path::direct));
            if (w == "write") (void)write(f, mem.data(), MiB, 0, on(dev, Path::direct));
          },
          ErrorDomain::cufile, {"path direct unavailable", "libcufile"}));
    }
    // The configuration's path is strict too.
    Config cfg = *quick_config();
    cfg.set("path", "direct");
    const TransferOptions from_config{.config = std::make_shared<const Config>(cfg), .device = dev};
    EXPECT_TRUE(throws_error([&] { (void)read(f, mem.data(), MiB, 0, from_config); }, ErrorDomain::cufile,
                             {"libcufile"}));
  }
}

TEST_F(NoCuFile, AutoTakesBounceAndSaysWhy) {
  Dir d(Folder::disk, 2 * MiB + 100);
  if (!d.ok()) GTEST_SKIP() << d.why();
  for (const auto& dev : devices()) {
    SCOPED_TRACE(to_string(dev->info().kind));
    DeviceMemory mem(dev, MiB);
    const File f = File::open(d.file(), OpenMode::read);
    const PathChoice c = choose_path(f, mem.data(), MiB, 0, on(dev));
    EXPECT_EQ(c.path, Path::bounce);
    EXPECT_TRUE(contains(c.reason, "auto: direct unavailable"));
    EXPECT_TRUE(contains(c.reason, "libcufile"));
    const TransferResult r = read_checked(d, dev, 4096, MiB, 0, on(dev));
    EXPECT_EQ(r.path, Path::bounce);
    EXPECT_TRUE(contains(r.reason, "libcufile"));
    EXPECT_TRUE(contains(r.reason, "pinned buffers")) << "and how bounce ran";
  }
}

TEST_F(NoCuFile, StatsCountBytesPerPath) {
  Dir d(Folder::disk, 3 * MiB);
  if (!d.ok()) GTEST_SKIP() << d.why();
  const auto dev = open_device("sim");
  const StatsSnapshot before = stats().snapshot();
  (void)read_checked(d, dev, 0, MiB, 0, on(dev, Path::bounce));
  (void)read_checked(d, dev, 1, MiB + 1, 3, on(dev));  // auto: bounce
  (void)read_checked(d, dev, 100, 300000, 0, on(dev, Path::posix));
  {
    const File f = File::open(d.file(), OpenMode::read);
    std::vector<std::byte> host(50000);
    EXPECT_EQ(read(f, host.data(), host.size(), 7, on(dev)).path, Path::host);
  }
  {
    const File f = File::open(d.other("w.bin"), OpenMode::write);
    DeviceMemory mem(dev, 200000);
    mem.fill(std::byte{1});
    EXPECT_EQ(write(f, mem.data(), 200000, 0, on(dev, Path::bounce)).bytes, 200000U);
    EXPECT_EQ(write(f, mem.data(), 70000, 0, on(dev, Path::posix)).bytes, 70000U);
  }
  EXPECT_EQ(delta(before, Path::bounce, Direction::read).bytes, MiB + MiB + 1);
  EXPECT_EQ(delta(before, Path::bounce, Direction::read).ops, 2U);
  EXPECT_GE(delta(before, Path::bounce, Direction::read).ios, 2U);
  EXPECT_EQ(delta(before, Path::posix, Direction::read).bytes, 300000U);
  EXPECT_EQ(delta(before, Path::host, Direction::read).bytes, 50000U);
  EXPECT_EQ(delta(before, Path::bounce, Direction::write).bytes, 200000U);
  EXPECT_EQ(delta(before, Path::posix, Direction::write).bytes, 70000U);
  EXPECT_EQ(delta(before, Path::direct, Direction::read).bytes, 0U);
  EXPECT_EQ(delta(before, Path::direct, Direction::read).ops, 0U);
  // Only the auto read fell back from direct, because cuFile is missing.
  const StatsSnapshot after = stats().snapshot();
  EXPECT_EQ(after.fallbacks_for(Fallback::no_cufile) - before.fallbacks_for(Fallback::no_cufile), 1U);
  EXPECT_EQ(after.fallbacks_for(Fallback::offset_unaligned), before.fallbacks_for(Fallback::offset_unaligned));
  auto sim_bytes = [](const StatsSnapshot& s, Direction dir) {
    for (const auto& k : s.devices) {
      if (k.key == "sim") return k.dirs[static_cast<std::size_t>(dir)].bytes;
    }
    return std::uint64_t{0};
  };
  EXPECT_EQ(sim_bytes(after, Direction::read) - sim_bytes(before, Direction::read), MiB + MiB + 1 + 300000);
  EXPECT_EQ(sim_bytes(after, Direction::write) - sim_bytes(before, Direction::write), 270000U);
}

// ---------------------------------------------------------------------------------------------

class AnyCuFile : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string m = gpu_test::mode();
    if (!m.empty() && m != "no_cufile" && m != "fake_cufile") GTEST_SKIP() << "not for mode " << m;
  }
};

TEST_F(AnyCuFile, HostMemoryWithADeviceTakesTheHostPath) {
  Dir d(Folder::disk, MiB);
  if (!d.ok()) GTEST_SKIP() << d.why();
  for (const auto& dev : devices()) {
    SCOPED_TRACE(to_string(dev->info().kind));
    const File f = File::open(d.file(), OpenMode::read);
    std::vector<std::byte> pageable(MiB);
    auto* pinned = static_cast<std::byte*>(dev->alloc_pinned(MiB));
    std::vector<std::byte> registered(MiB);
    dev->register_host(registered.data(), registered.size());
    for (std::byte* buf : {pageable.data(), pinned, registered.data()}) {
      SCOPED_TRACE(to_string(dev->pointer_kind(buf)));
      const PathChoice c = choose_path(f, buf, 65536, 4096, on(dev));
      EXPECT_EQ(c.path, Path::host);
      EXPECT_TRUE(contains(c.reason, "host memory"));
      const TransferResult r = read(f, buf, 65536, 4096, on(dev));
      EXPECT_EQ(r.path, Path::host);
      EXPECT_EQ(r.bytes, 65536U);
      EXPECT_TRUE(test::same_bytes({buf, 65536}, d.bytes(4096, 65536)));
      // An explicit host path is fine with host memory.
      EXPECT_EQ(read(f, buf, 100, 1, on(dev, Path::host)).path, Path::host);
    }
    dev->unregister_host(registered.data());
    dev->free_pinned(pinned);
  }
}

TEST_F(AnyCuFile, HostReasonSaysBufferedOnTmpfs) {
  Dir d(Folder::tmpfs, 100000);
  if (!d.ok()) GTEST_SKIP() << d.why();
  const File f = File::open(d.file(), OpenMode::read);
  std::vector<std::byte> buf(100000);
  const PathChoice c = choose_path(f, buf.data(), buf.size(), 0, on(open_device("sim")));
  EXPECT_EQ(c.path, Path::host);
  EXPECT_TRUE(contains(c.reason, "host memory: buffered: filesystem tmpfs has no O_DIRECT"));
}

TEST_F(AnyCuFile, PathHostWithDeviceMemoryIsAUsageError) {
  Dir d(Folder::disk, MiB);
  if (!d.ok()) GTEST_SKIP() << d.why();
  for (const auto& dev : devices()) {
    SCOPED_TRACE(to_string(dev->info().kind));
    const File f = File::open(d.file(), OpenMode::read_write);
    DeviceMemory mem(dev, 8192);
    EXPECT_TRUE(throws_error([&] { (void)choose_path(f, mem.data(), 4096, 0, on(dev, Path::host)); },
                             ErrorDomain::usage, {"path host needs host memory"}));
    EXPECT_TRUE(throws_error([&] { (void)read(f, mem.data(), 4096, 0, on(dev, Path::host)); },
                             ErrorDomain::usage, {"path host needs host memory"}));
    EXPECT_TRUE(throws_error([&] { (void)write(f, mem.data(), 4096, 0, on(dev, Path::host)); },
                             ErrorDomain::usage, {"path host needs host memory"}));
  }
}

TEST_F(AnyCuFile, GpuPathsWithHostMemoryAreUsageErrors) {
  Dir d(Folder::disk, MiB);
  if (!d.ok()) GTEST_SKIP() << d.why();
  for (const auto& dev : devices()) {
    SCOPED_TRACE(to_string(dev->info().kind));
    const File f = File::open(d.file(), OpenMode::read_write);
    std::vector<std::byte> pageable(8192);
    auto* pinned = static_cast<std::byte*>(dev->alloc_pinned(8192));
    for (Path p : {Path::bounce, Path::posix, Path::direct}) {
      SCOPED_TRACE(to_string(p));
      EXPECT_TRUE(throws_error([&] { (void)read(f, pageable.data(), 4096, 0, on(dev, p)); }, ErrorDomain::usage,
                               {fmt::format("path {}", to_string(p)), "pageable host memory"}));
      EXPECT_TRUE(throws_error([&] { (void)write(f, pinned, 4096, 0, on(dev, p)); }, ErrorDomain::usage,
                               {"pinned host memory"}));
      EXPECT_TRUE(throws_error([&] { (void)choose_path(f, pinned, 4096, 0, on(dev, p)); }, ErrorDomain::usage,
                               {"GPU memory"}));
    }
    dev->free_pinned(pinned);
  }
}

TEST_F(AnyCuFile, StreamTransfersNeedADevice) {
  Dir d(Folder::disk, 8192);
  if (!d.ok()) GTEST_SKIP() << d.why();
  const File f = File::open(d.file(), OpenMode::read);
  std::vector<std::byte> buf(4096);
  EXPECT_TRUE(throws_error([&] { (void)read_on_stream(f, buf.data(), 4096, 0, nullptr, TransferOptions{}); },
                           ErrorDomain::usage, {"options.device"}));
}

// ---------------------------------------------------------------------------------------------

class FakeCuFile : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    gpu_test::FakeCuFileCounters c;
    const bool present = detail::CuFile::instance().available() && gpu_test::fake_cufile_counters(&c);
    if (!gpu_test::need_mode("fake_cufile", present, &why)) GTEST_SKIP() << why;
    d_ = std::make_unique<Dir>(Folder::disk, 4 * MiB);
    if (!d_->ok()) GTEST_SKIP() << d_->why();
    fail_ = std::make_unique<test::ScopedEnv>("FAKE_CUFILE_FAIL", std::nullopt);
  }
  static gpu_test::FakeCuFileCounters counters() {
    gpu_test::FakeCuFileCounters c;
    EXPECT_TRUE(gpu_test::fake_cufile_counters(&c));
    return c;
  }

  std::unique_ptr<Dir> d_;
  std::unique_ptr<test::ScopedEnv> fail_;
};

TEST_F(FakeCuFile, AutoTakesDirectAndTheReadsGoThroughCuFile) {
  for (const auto& dev : devices()) {
    SCOPED_TRACE(to_string(dev->info().kind));
    DeviceMemory mem(dev, 2 * MiB);
    {
      const File f = File::open(d_->file(), OpenMode::read);
      const PathChoice c = choose_path(f, mem.data(), 2 * MiB, 4096, on(dev));
      EXPECT_EQ(c.path, Path::direct);
      EXPECT_EQ(c.reason, "auto");
    }
    const StatsSnapshot before = stats().snapshot();
    const auto c0 = counters();
    const TransferResult r = read_checked(*d_, dev, 4096, 2 * MiB, 0, on(dev));
    const auto c1 = counters();
    EXPECT_EQ(r.path, Path::direct);
    EXPECT_TRUE(contains(r.reason, "auto: GPUDirect Storage via"));
    EXPECT_TRUE(contains(r.reason, detail::CuFile::instance().library()));
    EXPECT_GE(c1.reads - c0.reads, 1U);
    EXPECT_EQ(c1.bytes_read - c0.bytes_read, 2 * MiB) << "the bytes went through the fake cuFileRead";
    EXPECT_EQ(delta(before, Path::direct, Direction::read).bytes, 2 * MiB);
    EXPECT_EQ(delta(before, Path::bounce, Direction::read).bytes, 0U);
    EXPECT_EQ(c1.live_handles, 0U) << "the handle is deregistered with its file";

    // Strict direct, and writes.
    const TransferResult s = read_checked(*d_, dev, 0, MiB, 0, on(dev, Path::direct));
    EXPECT_EQ(s.path, Path::direct);
    EXPECT_TRUE(contains(s.reason, "GPUDirect Storage"));
    EXPECT_FALSE(contains(s.reason, "auto"));
    const File w = File::open(d_->other("w.bin"), OpenMode::read_write);
    const auto data = test::random_bytes(MiB, 77);
    mem.upload(data);
    const auto w0 = counters();
    const TransferResult wr = write(w, mem.data(), MiB, 8192, on(dev));
    EXPECT_EQ(wr.path, Path::direct);
    EXPECT_EQ(counters().bytes_written - w0.bytes_written, MiB);
    EXPECT_TRUE(test::same_bytes(test::pread_file(d_->other("w.bin"), 8192, MiB), data));
  }
}

TEST_F(FakeCuFile, UnalignedRequestsTakeBounceOrFailWhenStrict) {
  struct Unaligned {
    std::uint64_t off, size;
    std::size_t dev_off;
    const char* why;
    Fallback counted_as;
  };
  const Unaligned cases[] = {
      {1, 65536, 0, "file offset not 4 KiB aligned", Fallback::offset_unaligned},
      {4096, 65537, 0, "size not a multiple of 4 KiB", Fallback::size_unaligned},
      {4096, 65536, 512, "buffer not 4 KiB aligned", Fallback::buffer_unaligned},
  };
  for (const auto& dev : devices()) {
    for (const Unaligned& u : cases) {
      SCOPED_TRACE(fmt::format("{}: {}", to_string(dev->info().kind), u.why));
      DeviceMemory mem(dev, u.dev_off + u.size);
      const File f = File::open(d_->file(), OpenMode::read);
      const PathChoice c = choose_path(f, mem.data() + u.dev_off, u.size, u.off, on(dev));
      EXPECT_EQ(c.path, Path::bounce);
      EXPECT_TRUE(contains(c.reason, "4 KiB"));
      EXPECT_TRUE(contains(c.reason, u.why));
      const auto c0 = counters();
      const std::uint64_t fell = fallbacks(u.counted_as);
      const TransferResult r = read_checked(*d_, dev, u.off, u.size, u.dev_off, on(dev));
      EXPECT_EQ(r.path, Path::bounce);
      EXPECT_TRUE(contains(r.reason, u.why));
      EXPECT_EQ(fallbacks(u.counted_as) - fell, 1U) << "counted by its reason";
      EXPECT_EQ(counters().reads, c0.reads) << "cuFile was not asked";
      EXPECT_TRUE(throws_error([&] { (void)read(f, mem.data() + u.dev_off, u.size, u.off, on(dev, Path::direct)); },
                               ErrorDomain::cufile, {"path direct unavailable", u.why}));
    }
  }
}

TEST_F(FakeCuFile, TmpfsFilesAreRefusedForLackOfODirect) {
  Dir t(Folder::tmpfs, MiB);
  if (!t.ok()) GTEST_SKIP() << t.why();
  for (const auto& dev : devices()) {
    SCOPED_TRACE(to_string(dev->info().kind));
    DeviceMemory mem(dev, MiB);
    const File f = File::open(t.file(), OpenMode::read);
    const PathChoice c = choose_path(f, mem.data(), MiB, 0, on(dev));
    EXPECT_EQ(c.path, Path::bounce);
    EXPECT_TRUE(contains(c.reason, "no O_DIRECT"));
    const std::uint64_t fell = fallbacks(Fallback::no_o_direct);
    const TransferResult r = read_checked(t, dev, 0, MiB, 0, on(dev));
    EXPECT_EQ(r.path, Path::bounce);
    EXPECT_EQ(fallbacks(Fallback::no_o_direct) - fell, 1U);
    EXPECT_TRUE(contains(r.reason, "auto: direct unavailable: filesystem tmpfs has no O_DIRECT"));
    EXPECT_TRUE(contains(r.reason, "buffered"));
    EXPECT_TRUE(throws_error([&] { (void)read(f, mem.data(), MiB, 0, on(dev, Path::direct)); },
                             ErrorDomain::cufile, {"O_DIRECT"}));
  }
}

// Every capability refusal of docs/paths.md, injected into the first cuFileRead and cuFileWrite.
TEST_F(FakeCuFile, CapabilityRefusalsFallBackUnderAutoAndFailWhenStrict) {
  const int codes[] = {5001, 5007, 5008, 5009, 5010, 5012, 5013, 5014, 5016, 5017, 5020, 5034, 5036, 5043};
  for (const auto& dev : devices()) {
    DeviceMemory mem(dev, MiB);
    for (int code : codes) {
      SCOPED_TRACE(fmt::format("{}: {}", to_string(dev->info().kind), code));
      const std::string name = detail::CuFile::error_name(code);
      {
        test::ScopedEnv fail("FAKE_CUFILE_FAIL", fmt::format("cuFileRead:{}", code));
        const std::uint64_t fell = fallbacks(Fallback::io_refused);
        const TransferResult r = read_checked(*d_, dev, 8192, MiB, 0, on(dev));
        EXPECT_EQ(r.path, Path::bounce);
        EXPECT_EQ(fallbacks(Fallback::io_refused) - fell, 1U);
        EXPECT_TRUE(contains(r.reason, "auto: direct unavailable"));
        EXPECT_TRUE(contains(r.reason, fmt::format("cuFileRead: {} ({})", name, code)));
        const File f = File::open(d_->file(), OpenMode::read);
        Error e(ErrorDomain::os, 0, {.op = "none"});
        EXPECT_TRUE(throws_error([&] { (void)read(f, mem.data(), MiB, 0, on(dev, Path::direct)); },
                                 ErrorDomain::cufile, {"cuFileRead", name, std::to_string(code)}, &e));
        EXPECT_EQ(e.code(), code) << "the error carries cuFile's code";
      }
      {
        test::ScopedEnv fail("FAKE_CUFILE_FAIL", fmt::format("cuFileWrite:{}", code));
        const auto data = test::random_bytes(MiB, static_cast<std::uint64_t>(code));
        mem.upload(data);
        const File w = File::open(d_->other("w.bin"), OpenMode::read_write);
        const TransferResult r = write(w, mem.data(), MiB, 4096, on(dev));
        EXPECT_EQ(r.path, Path::bounce);
        EXPECT_TRUE(contains(r.reason, fmt::format("cuFileWrite: {} ({})", name, code)));
        EXPECT_TRUE(test::same_bytes(test::pread_file(d_->other("w.bin"), 4096, MiB), data));
        EXPECT_TRUE(throws_error([&] { (void)write(w, mem.data(), MiB, 0, on(dev, Path::direct)); },
                                 ErrorDomain::cufile, {"cuFileWrite", std::to_string(code)}));
      }
    }
  }
}

TEST_F(FakeCuFile, IoErrorsFailWithoutFallback) {
  for (const auto& dev : devices()) {
    SCOPED_TRACE(to_string(dev->info().kind));
    DeviceMemory mem(dev, MiB);
    const File f = File::open(d_->file(), OpenMode::read);
    {
      test::ScopedEnv fail("FAKE_CUFILE_FAIL", "cuFileRead:errno5");
      const StatsSnapshot before = stats().snapshot();
      for (auto p : {std::optional<Path>{}, std::optional<Path>{Path::direct}}) {
        Error e(ErrorDomain::usage, 0, {.op = "none"});
        EXPECT_TRUE(throws_error([&] { (void)read(f, mem.data(), MiB, 0, on(dev, p)); }, ErrorDomain::os,
                                 {"cuFileRead failed"}, &e));
        EXPECT_EQ(e.code(), EIO);
        EXPECT_EQ(e.path(), d_->file());
      }
      EXPECT_EQ(delta(before, Path::bounce, Direction::read).ops, 0U) << "an I/O error must not be retried on bounce";
      EXPECT_EQ(delta(before, Path::direct, Direction::read).errors, 2U);
    }
    // cuFile errors that are not capability refusals are errors too, with their code.
    for (int code : {5011, 5044}) {
      test::ScopedEnv fail("FAKE_CUFILE_FAIL", fmt::format("cuFileRead:{}", code));
      Error e(ErrorDomain::usage, 0, {.op = "none"});
      EXPECT_TRUE(throws_error([&] { (void)read(f, mem.data(), MiB, 0, on(dev)); }, ErrorDomain::cufile,
                               {"cuFileRead failed", detail::CuFile::error_name(code)}, &e));
      EXPECT_EQ(e.code(), code);
    }
    // A refusal after bytes moved is an error, not a fallback that would redo them.
    {
      gpu_test::fake_cufile_reset();  // <skip>:<times> count from here
      test::ScopedEnv fail("FAKE_CUFILE_FAIL", "cuFileRead:short:0:1,cuFileRead:5008:1:1");
      EXPECT_TRUE(throws_error([&] { (void)read(f, mem.data(), MiB, 0, on(dev)); }, ErrorDomain::cufile,
                               {"CU_FILE_IO_NOT_SUPPORTED"}));
    }
  }
}

TEST_F(FakeCuFile, ShortTransfersAreContinued) {
  for (const auto& dev : devices()) {
    SCOPED_TRACE(to_string(dev->info().kind));
    gpu_test::fake_cufile_reset();  // <skip>:<times> count from here
    test::ScopedEnv fail("FAKE_CUFILE_FAIL", "cuFileRead:short:0:3");
    const auto c0 = counters();
    const TransferResult r = read_checked(*d_, dev, 0, 2 * MiB, 0, on(dev));
    EXPECT_EQ(r.path, Path::direct);
    EXPECT_GE(counters().reads - c0.reads, 4U);
    EXPECT_GE(r.ios, 4U);
  }
}

TEST_F(FakeCuFile, HandleRegisterRefusalFallsBackNamingTheCall) {
  for (const auto& dev : devices()) {
    SCOPED_TRACE(to_string(dev->info().kind));
    test::ScopedEnv fail("FAKE_CUFILE_FAIL", "cuFileHandleRegister:5008");
    const std::uint64_t fell = fallbacks(Fallback::handle_refused);
    const TransferResult r = read_checked(*d_, dev, 0, MiB, 0, on(dev));
    EXPECT_EQ(r.path, Path::bounce);
    EXPECT_EQ(fallbacks(Fallback::handle_refused) - fell, 1U);
    EXPECT_TRUE(contains(r.reason, "cuFileHandleRegister: CU_FILE_IO_NOT_SUPPORTED (5008)"));
    DeviceMemory mem(dev, MiB);
    const File f = File::open(d_->file(), OpenMode::read);
    EXPECT_TRUE(throws_error([&] { (void)read(f, mem.data(), MiB, 0, on(dev, Path::direct)); },
                             ErrorDomain::cufile, {"cuFileHandleRegister", "5008"}));
  }
}

TEST_F(FakeCuFile, ABatchOnOneFileRegistersItOnce) {
  // Entries of one batch run at once on the same File: its cuFile handle must be registered once,
  // and every entry must still go direct.
  for (const auto& dev : devices()) {
    SCOPED_TRACE(to_string(dev->info().kind));
    constexpr int entries = 16;
    constexpr std::uint64_t each = 64 << 10;
    DeviceMemory mem(dev, entries * each);
    const File f = File::open(d_->file(), OpenMode::read);
    std::vector<BatchEntry> batch;
    for (int i = 0; i < entries; ++i) {
      const auto k = static_cast<std::uint64_t>(i);
      batch.push_back({IoOp::read, &f, mem.data() + k * each, each, (entries - 1 - k) * each});
    }
    const std::uint64_t reg0 = gpu_test::fake_cufile_calls("cuFileHandleRegister");
    auto futs = submit_batch(batch, on(dev));
    for (int i = 0; i < entries; ++i) {
      const TransferResult r = futs[static_cast<std::size_t>(i)].get();
      EXPECT_EQ(r.path, Path::direct) << "entry " << i << ": " << r.reason;
    }
    EXPECT_EQ(gpu_test::fake_cufile_calls("cuFileHandleRegister") - reg0, 1U);
    for (int i = 0; i < entries; ++i) {
      const auto k = static_cast<std::uint64_t>(i);
      EXPECT_TRUE(test::same_bytes(mem.download(k * each, each), d_->bytes((entries - 1 - k) * each, each)));
    }
  }
}

// ---------------------------------------------------------------------------------------------

class DriverOpenFails : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    const auto& cf = detail::CuFile::instance();
    if (!gpu_test::need_mode("driver_open_fails", !cf.available() && contains(cf.reason(), "cuFileDriverOpen"), &why))
      GTEST_SKIP() << why;
  }
};

TEST_F(DriverOpenFails, AutoSaysWhyAndStrictFails) {
  Dir d(Folder::disk, MiB);
  if (!d.ok()) GTEST_SKIP() << d.why();
  for (const auto& dev : devices()) {
    SCOPED_TRACE(to_string(dev->info().kind));
    DeviceMemory mem(dev, MiB);
    const File f = File::open(d.file(), OpenMode::read);
    const PathChoice c = choose_path(f, mem.data(), MiB, 0, on(dev));
    EXPECT_EQ(c.path, Path::bounce);
    EXPECT_TRUE(contains(c.reason, "cuFileDriverOpen: CU_FILE_DRIVER_NOT_INITIALIZED (5001)"));
    const TransferResult r = read_checked(d, dev, 0, MiB, 0, on(dev));
    EXPECT_EQ(r.path, Path::bounce);
    EXPECT_TRUE(contains(r.reason, "CU_FILE_DRIVER_NOT_INITIALIZED"));
    EXPECT_TRUE(throws_error([&] { (void)read(f, mem.data(), MiB, 0, on(dev, Path::direct)); }, ErrorDomain::cufile,
                             {"CU_FILE_DRIVER_NOT_INITIALIZED"}));
  }
}

}  // namespace
}  // namespace sluice
