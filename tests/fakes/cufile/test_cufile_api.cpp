// The cuFile loader (src/gpu/cufile_api.cpp) over the fake libcufile (fake_cufile.cpp).
//
// Two kinds of suites. CuFileFake/CuFileErrors switch libraries and injected failures inside the
// process with CuFile::reset_for_tests(); they need SLUICE_LIBCUFILE to name the fake. The
// CuFileFirstLoad suite checks the first, unreset load, so each outcome is its own CTest entry and
// SLUICE_CUFILE_TEST_EXPECT says what that entry's environment should produce.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "cufile.h"
#include "fake_cufile.h"
#include "gpu/cufile_api.hpp"

namespace sluice::detail {
namespace {

constexpr long kTmpfsMagic = 0x01021994;

::testing::AssertionResult contains(std::string_view text, std::string_view part) {
  if (text.find(part) != std::string_view::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' does not contain '" << part << "'";
}

// A hook of the fake, found in the copy the loader already has open.
template <class Fn>
Fn fake_hook(const char* name) {
  void* lib = dlopen(CuFile::instance().library().c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (lib == nullptr) return nullptr;
  auto* fn = reinterpret_cast<Fn>(dlsym(lib, name));
  dlclose(lib);  // drops only the reference RTLD_NOLOAD took; the loader keeps its own
  return fn;
}
std::uint64_t fake_count(const char* name) {
  auto fn = fake_hook<fake_cufile_counter_fn>(name);
  return fn != nullptr ? fn() : ~0ULL;
}
std::uint64_t fake_calls(const char* function) {
  auto fn = fake_hook<fake_cufile_calls_fn>("fake_cufile_calls");
  return fn != nullptr ? fn(function) : ~0ULL;
}

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) {
      had_ = true;
      old_ = old;
    }
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_) {
      setenv(name_, old_.c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

// A mkstemp file under `dir`, unlinked and closed at the end of the scope.
class TempFile {
 public:
  explicit TempFile(const std::string& dir, int extra_flags = 0) {
    path_ = dir + "/sluice-cufile-XXXXXX";
    fd_ = mkostemp(path_.data(), O_CLOEXEC | extra_flags);
  }
  ~TempFile() {
    if (fd_ >= 0) {
      ::close(fd_);
      ::unlink(path_.c_str());
    }
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  [[nodiscard]] int fd() const { return fd_; }
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

std::string dir_from_env(const char* var, const char* fallback) {
  const char* v = std::getenv(var);
  return v != nullptr && *v != '\0' ? v : fallback;
}
bool is_tmpfs(const std::string& dir) {
  struct statfs fs {};
  return ::statfs(dir.c_str(), &fs) == 0 && static_cast<long>(fs.f_type) == kTmpfsMagic;
}
// The same folders the conformance suite uses (tests/support/test_util.hpp).
std::string disk_dir() { return dir_from_env("SLUICE_TEST_DISK_DIR", "/var/tmp"); }
std::string tmpfs_dir() { return dir_from_env("SLUICE_TEST_TMPFS_DIR", "/dev/shm"); }

// Every test starts from a fresh load of the fake with no failure injected, and leaves one.
class CuFileFake : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* lib = std::getenv("SLUICE_LIBCUFILE");
    if (lib == nullptr || std::strstr(lib, "libcufile") == nullptr)
      GTEST_SKIP() << "SLUICE_LIBCUFILE does not name the fake (run through ctest)";
    if (is_tmpfs(disk_dir()))
      GTEST_SKIP() << disk_dir() << " is tmpfs here; set SLUICE_TEST_DISK_DIR";
    unsetenv("FAKE_CUFILE_FAIL");
    CuFile::reset_for_tests();
    ASSERT_TRUE(CuFile::instance().available()) << CuFile::instance().reason();
  }
  void TearDown() override {
    unsetenv("FAKE_CUFILE_FAIL");
    CuFile::reset_for_tests();
  }
  static CuFile& cf() { return CuFile::instance(); }

  // A registered handle on a disk-backed temp file holding `content`.
  std::shared_ptr<CuFile::Handle> disk_file(TempFile& f, std::string_view content = {}) {
    if (!content.empty() && ::pwrite(f.fd(), content.data(), content.size(), 0) < 0) return {};
    std::string why;
    int code = -1;
    auto h = cf().register_handle(f.fd(), &why, &code);
    EXPECT_NE(h, nullptr) << why;
    EXPECT_EQ(code, 0);
    return h;
  }
};

TEST_F(CuFileFake, LoadsTheFakeAndOpensTheDriver) {
  EXPECT_TRUE(cf().reason().empty()) << cf().reason();
  EXPECT_EQ(cf().version(), 1140);
  EXPECT_EQ(cf().library(), std::getenv("SLUICE_LIBCUFILE"));
  auto use_count = fake_hook<long (*)()>("cuFileUseCount");
  ASSERT_NE(use_count, nullptr);
  EXPECT_EQ(use_count(), 1) << "the driver is opened exactly once";
}

TEST_F(CuFileFake, MissingLibraryNamesLibcufile) {
  const ScopedEnv env("SLUICE_LIBCUFILE", "/nonexistent-dir/libcufile.so.0");
  CuFile::reset_for_tests();
  EXPECT_FALSE(cf().available());
  EXPECT_TRUE(contains(cf().reason(), "libcufile"));
  EXPECT_TRUE(contains(cf().reason(), "not found"));
  EXPECT_EQ(cf().version(), 0);
  std::string why;
  int code = 0;
  EXPECT_EQ(cf().register_handle(0, &why, &code), nullptr);
  EXPECT_EQ(why, cf().reason());
  EXPECT_EQ(code, CU_FILE_DRIVER_NOT_INITIALIZED);
}

TEST_F(CuFileFake, DriverOpenFailureNamesTheCode) {
  const ScopedEnv env("FAKE_CUFILE_FAIL", "cuFileDriverOpen:5001");
  CuFile::reset_for_tests();
  EXPECT_FALSE(cf().available());
  EXPECT_TRUE(contains(
      cf().reason(), "cuFileDriverOpen: CU_FILE_DRIVER_NOT_INITIALIZED (5001): nvidia-fs driver"));
  EXPECT_EQ(cf().version(), 1140) << "the version is known even when the driver is not";
  TempFile f(disk_dir());
  ASSERT_GE(f.fd(), 0);
  std::string why;
  int code = 0;
  EXPECT_EQ(cf().register_handle(f.fd(), &why, &code), nullptr);
  EXPECT_EQ(code, CU_FILE_DRIVER_NOT_INITIALIZED);
  EXPECT_TRUE(contains(why, "CU_FILE_DRIVER_NOT_INITIALIZED"));
  EXPECT_EQ(cf().buf_register(&code, sizeof code), CU_FILE_DRIVER_NOT_INITIALIZED);
}

TEST_F(CuFileFake, RegistersADiskFileAndDeregistersOnRelease) {
  TempFile f(disk_dir());
  ASSERT_GE(f.fd(), 0) << f.path();
  auto h = disk_file(f);
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(fake_count("fake_cufile_live_handles"), 1U);
  auto copy = h;
  h.reset();
  EXPECT_EQ(fake_count("fake_cufile_live_handles"), 1U) << "a copy still holds it";
  copy.reset();
  EXPECT_EQ(fake_count("fake_cufile_live_handles"), 0U);
  EXPECT_EQ(fake_calls("cuFileHandleDeregister"), 1U);
}

TEST_F(CuFileFake, RefusesATmpfsFile) {
  if (!is_tmpfs(tmpfs_dir())) GTEST_SKIP() << tmpfs_dir() << " is not tmpfs here";
  TempFile f(tmpfs_dir());
  ASSERT_GE(f.fd(), 0) << f.path();
  std::string why;
  int code = 0;
  EXPECT_EQ(cf().register_handle(f.fd(), &why, &code), nullptr);
  EXPECT_EQ(code, CU_FILE_IO_NOT_SUPPORTED);
  EXPECT_TRUE(contains(why, "cuFileHandleRegister: CU_FILE_IO_NOT_SUPPORTED (5008)"));
}

TEST_F(CuFileFake, HandleRegisterChecksLikeCuFile) {
  std::string why;
  int code = 0;
  TempFile f(disk_dir());
  ASSERT_GE(f.fd(), 0);
  auto h = disk_file(f);
  EXPECT_EQ(cf().register_handle(f.fd(), &why, &code), nullptr);
  EXPECT_EQ(code, CU_FILE_HANDLE_ALREADY_REGISTERED) << why;

  const int appending = ::open(f.path().c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  ASSERT_GE(appending, 0);
  EXPECT_EQ(cf().register_handle(appending, &why, &code), nullptr);
  EXPECT_EQ(code, CU_FILE_INVALID_FILE_OPEN_FLAG) << why;
  ::close(appending);

  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  EXPECT_EQ(cf().register_handle(pipe_fds[0], &why, &code), nullptr);
  EXPECT_EQ(code, CU_FILE_INVALID_FILE_TYPE) << why;
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);

  EXPECT_EQ(cf().register_handle(-1, &why, &code), nullptr);
  EXPECT_EQ(code, CU_FILE_INVALID_VALUE) << why;

  const ScopedEnv env("FAKE_CUFILE_FAIL", "cuFileHandleRegister:5008");
  TempFile g(disk_dir());
  EXPECT_EQ(cf().register_handle(g.fd(), &why, &code), nullptr);
  EXPECT_EQ(code, CU_FILE_IO_NOT_SUPPORTED);
  EXPECT_TRUE(contains(why, "CU_FILE_IO_NOT_SUPPORTED"));
}

TEST_F(CuFileFake, WriteThenReadRoundTripsThroughTheFake) {
  TempFile f(disk_dir());
  ASSERT_GE(f.fd(), 0);
  auto h = disk_file(f);
  ASSERT_NE(h, nullptr);
  std::string src(10000, '\0');
  for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<char>('a' + i % 26);
  // bufPtr_offset selects where in the buffer the bytes start, as with a registered base.
  EXPECT_EQ(cf().write(*h, src.data(), 6000, 100, 4000), 6000);
  std::string back(8000, '#');
  EXPECT_EQ(cf().read(*h, back.data(), 6000, 100, 2000), 6000);
  EXPECT_EQ(back.substr(2000, 6000), src.substr(4000, 6000));
  EXPECT_EQ(back.substr(0, 2000), std::string(2000, '#')) << "nothing before the offset";

  // At the end of the file a read is short, not padded.
  EXPECT_EQ(cf().read(*h, back.data(), 1000, 5600, 0), 500);
  EXPECT_EQ(cf().read(*h, back.data(), 1000, 7000, 0), 0);

  EXPECT_EQ(fake_count("fake_cufile_writes"), 1U);
  EXPECT_EQ(fake_count("fake_cufile_bytes_written"), 6000U);
  EXPECT_EQ(fake_count("fake_cufile_reads"), 3U);
  EXPECT_EQ(fake_count("fake_cufile_bytes_read"), 6500U);
}

TEST_F(CuFileFake, UnalignedIoOnAnODirectDescriptorWorks) {
  TempFile f(disk_dir(), O_DIRECT);
  if (f.fd() < 0 && errno == EINVAL) GTEST_SKIP() << "no O_DIRECT on " << disk_dir();
  ASSERT_GE(f.fd(), 0);
  auto h = disk_file(f);
  ASSERT_NE(h, nullptr);
  // An aligned write goes through O_DIRECT; the unaligned read must work all the same.
  void* raw = std::aligned_alloc(4096, 8192);
  ASSERT_NE(raw, nullptr);
  std::unique_ptr<char, decltype(&std::free)> data(static_cast<char*>(raw), &std::free);
  for (std::size_t i = 0; i < 8192; ++i) data.get()[i] = static_cast<char>(i * 7);
  EXPECT_EQ(cf().write(*h, data.get(), 8192, 0, 0), 8192);
  std::vector<char> back(1000);
  EXPECT_EQ(cf().read(*h, back.data(), 1000, 4097, 0), 1000);
  EXPECT_EQ(std::memcmp(back.data(), data.get() + 4097, 1000), 0);
}

TEST_F(CuFileFake, InjectedReadErrorsComeBackAsDocumented) {
  TempFile f(disk_dir());
  ASSERT_GE(f.fd(), 0);
  auto h = disk_file(f, "0123456789");
  ASSERT_NE(h, nullptr);
  char buf[16] = {};
  {
    const ScopedEnv env("FAKE_CUFILE_FAIL", "cuFileRead:5036");
    const ssize_t r = cf().read(*h, buf, 10, 0, 0);
    EXPECT_EQ(r, -CU_FILE_GPU_MEMORY_PINNING_FAILED);
    EXPECT_TRUE(IS_CUFILE_ERR(static_cast<int>(r)));
    EXPECT_EQ(CuFile::error_name(static_cast<int>(r)), "CU_FILE_GPU_MEMORY_PINNING_FAILED");
  }
  {
    const ScopedEnv env("FAKE_CUFILE_FAIL", "cuFileRead:errno5");
    errno = 0;
    EXPECT_EQ(cf().read(*h, buf, 10, 0, 0), -1);
    EXPECT_EQ(errno, EIO);
    EXPECT_FALSE(IS_CUFILE_ERR(-1));
  }
  {
    const ScopedEnv env("FAKE_CUFILE_FAIL", "cuFileRead:short");
    EXPECT_EQ(cf().read(*h, buf, 10, 0, 0), 5);
    EXPECT_EQ(std::string_view(buf, 5), "01234");
  }
  {
    // The second call fails once; the first and third succeed. Write errors are their own.
    const ScopedEnv env("FAKE_CUFILE_FAIL", "cuFileWrite:5044,cuFileRead:errno28:1:1");
    auto reset_counters = fake_hook<void (*)()>("fake_cufile_reset_counters");
    ASSERT_NE(reset_counters, nullptr);
    reset_counters();
    EXPECT_EQ(cf().read(*h, buf, 10, 0, 0), 10);
    EXPECT_EQ(cf().read(*h, buf, 10, 0, 0), -1);
    EXPECT_EQ(errno, ENOSPC);
    EXPECT_EQ(cf().read(*h, buf, 10, 0, 0), 10);
    EXPECT_EQ(cf().write(*h, buf, 10, 0, 0), -CU_FILE_IO_ERROR);
    EXPECT_EQ(fake_calls("cuFileRead"), 3U);
    EXPECT_EQ(fake_count("fake_cufile_reads"), 2U) << "failed calls are not counted as reads";
  }
}

TEST_F(CuFileFake, BufferRegistrationFollowsCuFile) {
  std::vector<char> buf(4096);
  EXPECT_EQ(cf().buf_register(buf.data(), buf.size()), CU_FILE_SUCCESS);
  EXPECT_EQ(cf().buf_register(buf.data(), buf.size()), CU_FILE_MEMORY_ALREADY_REGISTERED);
  EXPECT_EQ(fake_count("fake_cufile_live_buffers"), 1U);

  TempFile f(disk_dir());
  ASSERT_GE(f.fd(), 0);
  auto h = disk_file(f, std::string(8192, 'x'));
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(cf().read(*h, buf.data(), 4096, 0, 0), 4096);
  EXPECT_EQ(cf().read(*h, buf.data(), 4096, 0, 1), -CU_FILE_INVALID_MAPPING_RANGE)
      << "a registered buffer bounds the range";

  EXPECT_EQ(cf().buf_deregister(buf.data()), CU_FILE_SUCCESS);
  EXPECT_EQ(cf().buf_deregister(buf.data()), CU_FILE_MEMORY_NOT_REGISTERED);
  const ScopedEnv env("FAKE_CUFILE_FAIL", "cuFileBufRegister:5036");
  EXPECT_EQ(cf().buf_register(buf.data(), buf.size()), CU_FILE_GPU_MEMORY_PINNING_FAILED);
}

// Names and texts cover the whole table, and a name is the enumerator's own spelling.
TEST(CuFileErrors, NamesEveryCode) {
  EXPECT_EQ(CuFile::error_name(5008), "CU_FILE_IO_NOT_SUPPORTED");
  EXPECT_EQ(CuFile::error_name(-5008), "CU_FILE_IO_NOT_SUPPORTED");
  EXPECT_TRUE(contains(CuFile::error_text(5008), "not supported on this file"));
  EXPECT_EQ(CuFile::error_name(0), "CU_FILE_SUCCESS");
  EXPECT_EQ(CuFile::error_name(5021), "cuFile error 5021");
  EXPECT_EQ(CuFile::error_name(4), "cuFile error 4");
  EXPECT_TRUE(contains(CuFile::error_text(5001), "nvidia-fs driver not loaded"));
#define SLUICE_CODE(x) {x, #x}
  const std::pair<int, const char*> all[] = {
      SLUICE_CODE(CU_FILE_SUCCESS), SLUICE_CODE(CU_FILE_DRIVER_NOT_INITIALIZED),
      SLUICE_CODE(CU_FILE_DRIVER_INVALID_PROPS), SLUICE_CODE(CU_FILE_DRIVER_UNSUPPORTED_LIMIT),
      SLUICE_CODE(CU_FILE_DRIVER_VERSION_MISMATCH), SLUICE_CODE(CU_FILE_DRIVER_VERSION_READ_ERROR),
      SLUICE_CODE(CU_FILE_DRIVER_CLOSING), SLUICE_CODE(CU_FILE_PLATFORM_NOT_SUPPORTED),
      SLUICE_CODE(CU_FILE_IO_NOT_SUPPORTED), SLUICE_CODE(CU_FILE_DEVICE_NOT_SUPPORTED),
      SLUICE_CODE(CU_FILE_NVFS_DRIVER_ERROR), SLUICE_CODE(CU_FILE_CUDA_DRIVER_ERROR),
      SLUICE_CODE(CU_FILE_CUDA_POINTER_INVALID), SLUICE_CODE(CU_FILE_CUDA_MEMORY_TYPE_INVALID),
      SLUICE_CODE(CU_FILE_CUDA_POINTER_RANGE_ERROR), SLUICE_CODE(CU_FILE_CUDA_CONTEXT_MISMATCH),
      SLUICE_CODE(CU_FILE_INVALID_MAPPING_SIZE), SLUICE_CODE(CU_FILE_INVALID_MAPPING_RANGE),
      SLUICE_CODE(CU_FILE_INVALID_FILE_TYPE), SLUICE_CODE(CU_FILE_INVALID_FILE_OPEN_FLAG),
      SLUICE_CODE(CU_FILE_DIO_NOT_SET), SLUICE_CODE(CU_FILE_INVALID_VALUE),
      SLUICE_CODE(CU_FILE_MEMORY_ALREADY_REGISTERED), SLUICE_CODE(CU_FILE_MEMORY_NOT_REGISTERED),
      SLUICE_CODE(CU_FILE_PERMISSION_DENIED), SLUICE_CODE(CU_FILE_DRIVER_ALREADY_OPEN),
      SLUICE_CODE(CU_FILE_HANDLE_NOT_REGISTERED), SLUICE_CODE(CU_FILE_HANDLE_ALREADY_REGISTERED),
      SLUICE_CODE(CU_FILE_DEVICE_NOT_FOUND), SLUICE_CODE(CU_FILE_INTERNAL_ERROR),
      SLUICE_CODE(CU_FILE_GETNEWFD_FAILED), SLUICE_CODE(CU_FILE_NVFS_SETUP_ERROR),
      SLUICE_CODE(CU_FILE_IO_DISABLED), SLUICE_CODE(CU_FILE_BATCH_SUBMIT_FAILED),
      SLUICE_CODE(CU_FILE_GPU_MEMORY_PINNING_FAILED), SLUICE_CODE(CU_FILE_BATCH_FULL),
      SLUICE_CODE(CU_FILE_ASYNC_NOT_SUPPORTED), SLUICE_CODE(CU_FILE_INTERNAL_BATCH_SETUP_ERROR),
      SLUICE_CODE(CU_FILE_INTERNAL_BATCH_SUBMIT_ERROR),
      SLUICE_CODE(CU_FILE_INTERNAL_BATCH_GETSTATUS_ERROR),
      SLUICE_CODE(CU_FILE_INTERNAL_BATCH_CANCEL_ERROR), SLUICE_CODE(CU_FILE_NOMEM_ERROR),
      SLUICE_CODE(CU_FILE_IO_ERROR), SLUICE_CODE(CU_FILE_INTERNAL_BUF_REGISTER_ERROR),
      SLUICE_CODE(CU_FILE_HASH_OPR_ERROR), SLUICE_CODE(CU_FILE_INVALID_CONTEXT_ERROR),
      SLUICE_CODE(CU_FILE_NVFS_INTERNAL_DRIVER_ERROR), SLUICE_CODE(CU_FILE_BATCH_NOCOMPAT_ERROR),
      SLUICE_CODE(CU_FILE_IO_MAX_ERROR),
  };
#undef SLUICE_CODE
  EXPECT_EQ(std::size(all), 49U) << "0 and 5001..5050 less the unused 5021 and 5032";
  for (const auto& [code, name] : all) {
    EXPECT_EQ(CuFile::error_name(code), name);
    EXPECT_FALSE(contains(CuFile::error_text(code), "unknown")) << name;
    // cufile.h's static inline table (what a cuFile program prints) has NVIDIA's text for every
    // code; libsluice's loader keeps its own, more specific ones.
    EXPECT_STRNE(cufileop_status_error(static_cast<CUfileOpError>(code)), "unknown cufile error")
        << name;
  }
  EXPECT_STREQ(cufileop_status_error(static_cast<CUfileOpError>(5021)), "unknown cufile error");
}

// The first load of the process, as the CTest entry's environment set it up.
TEST(CuFileFirstLoad, MatchesTheEnvironment) {
  const char* expect = std::getenv("SLUICE_CUFILE_TEST_EXPECT");
  if (expect == nullptr) GTEST_SKIP() << "SLUICE_CUFILE_TEST_EXPECT is not set (run through ctest)";
  CuFile& cf = CuFile::instance();
  if (std::string_view(expect) != "available") {
    EXPECT_FALSE(cf.available());
    EXPECT_TRUE(contains(cf.reason(), expect));
    return;
  }
  ASSERT_TRUE(cf.available()) << cf.reason();
  TempFile f(disk_dir());
  ASSERT_EQ(::pwrite(f.fd(), "abcd", 4, 0), 4);
  std::string why;
  auto h = cf.register_handle(f.fd(), &why, nullptr);
  ASSERT_NE(h, nullptr) << why;
  const char* want = std::getenv("SLUICE_CUFILE_TEST_EXPECT_READ");
  char buf[4];
  EXPECT_EQ(cf.read(*h, buf, 4, 0, 0), want != nullptr ? std::atoi(want) : 4);
}

}  // namespace
}  // namespace sluice::detail
