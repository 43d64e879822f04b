// Storage that fails, on every path: EIO, a short transfer and ENOSPC, for reads and writes,
// injected through FaultyEngine into the host, bounce and posix paths (each reaches the kernel
// only through an I/O engine) and through the fake libcufile into the direct path. An error is a
// sluice::Error with the injected errno naming the file and a range, counted as an error of that
// path, and never retried on another path; a short transfer is continued, and the bytes are
// checked, so no fault can pass as a false success (docs/faults.md, docs/paths.md).
//   EngineFaults  the engine paths on the simulated device and on the CUDA device over the fake
//                 libcuda (CTest entry gpu.faults.engine, no libcufile)
//   DirectFaults  the direct path over the fake libcufile (gpu.faults.direct)
#include <atomic>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "gpu/cufile_api.hpp"
#include "gpu_test_util.hpp"
#include "sluice/stats.hpp"
#include "sluice/testing/faulty_engine.hpp"
#include "sluice/units.hpp"

namespace sluice {
namespace {

using gpu_test::contains;
using gpu_test::DeviceMemory;
using test::Folder;

enum class Fault : std::uint8_t { eio, short_transfer, enospc };

std::string_view to_string(Fault f) {
  return f == Fault::eio ? "eio" : f == Fault::enospc ? "enospc" : "short";
}

// Faults injected so far, by every engine the factory made (each thread has its own).
struct Seen {
  std::atomic<std::uint64_t> injected{0};
};

// A FaultyEngine that also counts its injections in a shared tally, so the test knows the fault
// reached the path whichever thread's engine took it.
class CountedFaults final : public test::ForwardingEngine {
 public:
  CountedFaults(std::unique_ptr<FaultyEngine> faulty, std::shared_ptr<Seen> seen)
      : ForwardingEngine(nullptr), seen_(std::move(seen)) {
    faulty_ = faulty.get();
    inner_ = std::move(faulty);
  }
  [[nodiscard]] std::string_view name() const noexcept override { return "counted-faults"; }
  void prepare(const IoRequest& req) override {
    const std::uint64_t before = faulty_->injected();
    inner_->prepare(req);
    seen_->injected.fetch_add(faulty_->injected() - before);
  }

 private:
  FaultyEngine* faulty_ = nullptr;  // owned by inner_
  std::shared_ptr<Seen> seen_;
};

FaultPlan plan_for(Fault f, IoOp op) {
  switch (f) {
    case Fault::eio:
      return {.every = 3, .error = EIO, .only = op};
    case Fault::enospc:
      return {.every = 3, .error = ENOSPC, .only = op};
    case Fault::short_transfer:
      break;
  }
  return {.every = 2, .short_transfer = true, .only = op};
}

struct Case {
  std::string device;  // "sim" or "cuda:0"
  Path path;           // host, bounce or posix
  IoOp op;
  Fault fault;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.device << " " << sluice::to_string(c.path) << " " << (c.op == IoOp::read ? "read" : "write")
      << " " << to_string(c.fault);
}

class EngineFaults : public ::testing::TestWithParam<Case> {
 protected:
  static constexpr std::uint64_t size_ = MiB + 3000;  // an unaligned tail, 17 pieces of 64 KiB

  void SetUp() override {
    std::string why;
    if (!gpu_test::need_mode("no_cufile", !detail::CuFile::instance().available(), &why)) GTEST_SKIP() << why;
    dev_ = gpu_test::try_open(GetParam().device, &why);
    if (!dev_) {
      if (GetParam().device == "cuda:0" && !gpu_test::mode().empty()) FAIL() << "the fake libcuda should load: " << why;
      GTEST_SKIP() << why;
    }
    const auto root = test::folder_root(Folder::disk, &why);
    if (!root) GTEST_SKIP() << why;
    dir_ = std::make_unique<test::TempDir>(*root, "sluice-gpu-faults-");
    path_ = dir_->file("data.bin");
    data_ = test::random_bytes(size_, test::test_seed(15));
    test::write_file(path_, data_);
    cfg_ = gpu_test::make_config({"psync_t2_q4", "psync", 2, 4, true, 64 << 10});
  }

  // Installs the case's fault under a watcher for the rest of the test.
  void install() {
    const FaultPlan plan = plan_for(GetParam().fault, GetParam().op);
    factory_ = std::make_unique<test::ScopedEngineFactory>([plan, seen = seen_](EngineKind kind, unsigned depth) {
      auto faulty = std::make_unique<FaultyEngine>(test::make_inner_engine(kind, depth), plan);
      return std::make_unique<CountedFaults>(std::move(faulty), seen);
    });
  }

  // The case's transfer of `n` bytes at `off`: between the file and device memory (bounce,
  // posix: strict) or host memory (host). Writes send `fresh`; reads return what arrived.
  std::vector<std::byte> run(std::uint64_t off, std::uint64_t n, std::span<const std::byte> fresh,
                             TransferResult* result) {
    const Case& c = GetParam();
    const File f = File::open(path_, c.op == IoOp::read ? OpenMode::read : OpenMode::read_write);
    if (c.path == Path::host) {
      test::GuardedBuffer buf(n, 1);
      if (c.op == IoOp::write) std::copy(fresh.begin(), fresh.end(), buf.data());
      const TransferOptions o{.config = cfg_};
      *result = c.op == IoOp::read ? read(f, buf.data(), n, off, o) : write(f, buf.data(), n, off, o);
      EXPECT_TRUE(buf.guards_intact());
      return {buf.data(), buf.data() + n};
    }
    DeviceMemory mem(dev_, n);
    if (c.op == IoOp::write) mem.upload(fresh);
    const TransferOptions o{.config = cfg_, .device = dev_, .path = c.path};
    *result = c.op == IoOp::read ? read(f, mem.data(), n, off, o) : write(f, mem.data(), n, off, o);
    return mem.download();
  }

  std::shared_ptr<Device> dev_;
  std::unique_ptr<test::TempDir> dir_;
  std::string path_;
  std::vector<std::byte> data_;
  std::shared_ptr<const Config> cfg_;
  std::shared_ptr<Seen> seen_ = std::make_shared<Seen>();
  std::unique_ptr<test::ScopedEngineFactory> factory_;
};

TEST_P(EngineFaults, GivesTheDocumentedErrorOrExactBytes) {
  const Case& c = GetParam();
  const Direction dir = c.op == IoOp::read ? Direction::read : Direction::write;
  const std::uint64_t off = 4096 + 5;  // unaligned: staged head and tail chunks as well
  const std::uint64_t n = size_ - off - 7;
  const auto fresh = test::random_bytes(n, 99);
  install();
  const StatsSnapshot before = stats().snapshot();
  TransferResult r;
  if (c.fault == Fault::short_transfer) {
    const std::vector<std::byte> got = run(off, n, fresh, &r);
    EXPECT_EQ(r.bytes, n);
    EXPECT_EQ(r.path, c.path) << r.reason;
    EXPECT_GT(seen_->injected.load(), 0U) << "no short transfer reached the " << sluice::to_string(c.path) << " path";
    if (c.op == IoOp::read) {
      EXPECT_TRUE(test::same_bytes(got, std::span(data_).subspan(off, n)));
    } else {
      std::copy(fresh.begin(), fresh.end(), data_.begin() + static_cast<std::ptrdiff_t>(off));
      EXPECT_TRUE(test::same_bytes(test::read_whole(path_), data_));
    }
    EXPECT_EQ(stats().snapshot().at(c.path, dir).errors, before.at(c.path, dir).errors);
    return;
  }
  const int want = c.fault == Fault::eio ? EIO : ENOSPC;
  const auto e = test::error_of([&] { (void)run(off, n, fresh, &r); });
  ASSERT_TRUE(e) << "a false success: " << r.bytes << " bytes by " << sluice::to_string(r.path);
  EXPECT_EQ(e->domain(), ErrorDomain::os) << e->what();
  EXPECT_EQ(e->code(), want) << e->what();
  EXPECT_EQ(e->op(), c.op == IoOp::read ? "read" : "write");
  EXPECT_EQ(e->path(), path_);
  EXPECT_TRUE(contains(e->what(), std::strerror(want)));
  EXPECT_TRUE(contains(e->what(), fmt::format("[offset {}, {} bytes]", e->offset(), e->size())));
  EXPECT_GT(e->size(), 0U);
  EXPECT_GE(e->offset(), off / 4096 * 4096);
  EXPECT_LE(e->offset() + e->size(), (off + n + 4095) / 4096 * 4096);
  EXPECT_GT(seen_->injected.load(), 0U);
  const StatsSnapshot after = stats().snapshot();
  EXPECT_EQ(after.at(c.path, dir).errors, before.at(c.path, dir).errors + 1);
  for (const Path other : {Path::host, Path::bounce, Path::posix, Path::direct}) {
    if (other != c.path) {
      EXPECT_EQ(after.at(other, dir).ops, before.at(other, dir).ops) << "retried on another path";
    }
  }
}

std::vector<Case> engine_cases() {
  std::vector<Case> out;
  for (const char* dev : {"sim", "cuda:0"}) {
    for (const Path p : {Path::host, Path::bounce, Path::posix}) {
      if (p == Path::host && std::string_view(dev) != "sim") continue;  // host memory: no device
      for (const IoOp op : {IoOp::read, IoOp::write}) {
        for (const Fault f : {Fault::eio, Fault::short_transfer, Fault::enospc}) out.push_back({dev, p, op, f});
      }
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Paths, EngineFaults, ::testing::ValuesIn(engine_cases()), [](const auto& p) {
  const Case& c = p.param;
  return fmt::format("{}_{}_{}_{}", c.device == "sim" ? "sim" : "cuda0", sluice::to_string(c.path),
                     c.op == IoOp::read ? "read" : "write", to_string(c.fault));
});

// ---------------------------------------------------------------------------------------------

class DirectFaults : public ::testing::Test {
 protected:
  static constexpr std::uint64_t size_ = 2 * MiB;

  void SetUp() override {
    std::string why;
    gpu_test::FakeCuFileCounters c;
    const bool present = detail::CuFile::instance().available() && gpu_test::fake_cufile_counters(&c);
    if (!gpu_test::need_mode("fake_cufile", present, &why)) GTEST_SKIP() << why;
    const auto root = test::folder_root(Folder::disk, &why);
    if (!root) GTEST_SKIP() << why;
    dir_ = std::make_unique<test::TempDir>(*root, "sluice-gpu-direct-faults-");
    path_ = dir_->file("data.bin");
    data_ = test::random_bytes(size_, test::test_seed(16));
    test::write_file(path_, data_);
    cfg_ = gpu_test::make_config({"auto_t2_q4", "auto", 2, 4, true, 64 << 10});
    fail_ = std::make_unique<test::ScopedEnv>("FAKE_CUFILE_FAIL", std::nullopt);
  }

  // Moves the whole file between it and device memory on `dev` (reads) or writes fresh bytes.
  TransferResult run(const std::shared_ptr<Device>& dev, IoOp op, std::optional<Path> path,
                     std::span<const std::byte> fresh, std::vector<std::byte>* got) {
    const File f = File::open(path_, op == IoOp::read ? OpenMode::read : OpenMode::read_write);
    DeviceMemory mem(dev, size_);
    if (op == IoOp::write) mem.upload(fresh);
    const TransferOptions o{.config = cfg_, .device = dev, .path = path};
    const TransferResult r = op == IoOp::read ? read(f, mem.data(), size_, 0, o) : write(f, mem.data(), size_, 0, o);
    *got = mem.download();
    return r;
  }

  std::vector<std::shared_ptr<Device>> devices() const {
    std::vector<std::shared_ptr<Device>> out{open_device("sim")};
    std::string why;
    if (auto d = gpu_test::try_open("cuda:0", &why)) out.push_back(std::move(d));
    return out;
  }

  std::unique_ptr<test::TempDir> dir_;
  std::string path_;
  std::vector<std::byte> data_;
  std::shared_ptr<const Config> cfg_;
  std::unique_ptr<test::ScopedEnv> fail_;
};

// EIO and ENOSPC (cuFile's -1 with errno) fail under auto and strict direct alike: the storage
// failed, and another path would not do better, so nothing is retried on bounce.
TEST_F(DirectFaults, ErrnoFailuresAreErrorsWithoutFallback) {
  for (const auto& dev : devices()) {
    for (const IoOp op : {IoOp::read, IoOp::write}) {
      for (const int err : {EIO, ENOSPC}) {
        for (const std::optional<Path> path : {std::optional<Path>{}, std::optional<Path>{Path::direct}}) {
          const char* fn = op == IoOp::read ? "cuFileRead" : "cuFileWrite";
          SCOPED_TRACE(fmt::format("{} {} errno {} {}", to_string(dev->info().kind), fn, err, path ? "direct" : "auto"));
          gpu_test::fake_cufile_reset();  // the second call fails: bytes have moved by then
          const test::ScopedEnv fail("FAKE_CUFILE_FAIL", fmt::format("{}:short:0:1,{}:errno{}:1:1", fn, fn, err));
          const Direction dir = op == IoOp::read ? Direction::read : Direction::write;
          const StatsSnapshot before = stats().snapshot();
          std::vector<std::byte> got;
          const auto fresh = test::random_bytes(size_, 5);
          const auto e = test::error_of([&] { (void)run(dev, op, path, fresh, &got); });
          ASSERT_TRUE(e) << "a false success";
          EXPECT_EQ(e->domain(), ErrorDomain::os) << e->what();
          EXPECT_EQ(e->code(), err) << e->what();
          EXPECT_EQ(e->path(), path_);
          EXPECT_TRUE(contains(e->what(), fmt::format("{} failed", fn)));
          EXPECT_GT(e->offset(), 0U) << "the error names where the failed call started";
          EXPECT_EQ(gpu_test::fake_cufile_calls(fn), 2U);
          const StatsSnapshot after = stats().snapshot();
          EXPECT_EQ(after.at(Path::direct, dir).errors, before.at(Path::direct, dir).errors + 1);
          EXPECT_EQ(after.at(Path::bounce, dir).ops, before.at(Path::bounce, dir).ops) << "retried on bounce";
        }
      }
    }
  }
}

// A short cuFileRead/cuFileWrite is continued from where it stopped, and the bytes are exact.
TEST_F(DirectFaults, ShortTransfersAreContinued) {
  for (const auto& dev : devices()) {
    for (const IoOp op : {IoOp::read, IoOp::write}) {
      const char* fn = op == IoOp::read ? "cuFileRead" : "cuFileWrite";
      SCOPED_TRACE(fmt::format("{} {}", to_string(dev->info().kind), fn));
      gpu_test::fake_cufile_reset();
      const test::ScopedEnv fail("FAKE_CUFILE_FAIL", fmt::format("{}:short:0:3", fn));
      const auto fresh = test::random_bytes(size_, 6);
      std::vector<std::byte> got;
      const TransferResult r = run(dev, op, Path::direct, fresh, &got);
      EXPECT_EQ(r.bytes, size_);
      EXPECT_EQ(r.path, Path::direct);
      EXPECT_EQ(gpu_test::fake_cufile_calls(fn), 4U) << "three short calls, then the rest in one";
      EXPECT_EQ(r.ios, 4U);
      if (op == IoOp::read) {
        EXPECT_TRUE(test::same_bytes(got, data_));
      } else {
        EXPECT_TRUE(test::same_bytes(test::read_whole(path_), fresh));
        data_ = fresh;
      }
    }
  }
}

}  // namespace
}  // namespace sluice
