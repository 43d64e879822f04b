// The cuFile conformance suite: every function of cufile.h, its documented results and error
// codes, exercised as a user program would (see cufile_test_util.hpp for the modes). The same
// binary runs in each mode; checks that depend on the mode say so.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cufile_test_util.hpp"
#include "raw_enums.h"

namespace cufile_test {
namespace {

bool ok(CUfileError_t st) {
  return st.err == CU_FILE_SUCCESS;
}

void close_driver_completely() {
  while (cuFileUseCount() > 0) ASSERT_TRUE(ok(cuFileDriverClose()));
}

// Per-test: a driver reference, a scratch folder, and a data file.
class CuFile : public ::testing::Test {
 protected:
  void SetUp() override {
    if (device_memory()) {
      ASSERT_TRUE(Cuda::get().ok()) << "mode " << mode() << " needs libcuda.so.1";
    }
    Cuda::get().bind();
    ASSERT_TRUE(ok(cuFileDriverOpen()));
    data_ = random_bytes(1 << 20, 7);
    path_ = dir_.file("data.bin");
    write_file(path_, data_);
  }
  void TearDown() override { EXPECT_TRUE(ok(cuFileDriverClose())); }

  TempDir dir_;
  std::string path_;
  std::vector<unsigned char> data_;
};

// ------------------------------------------------------------------ driver

TEST(Driver, OpenCloseAndUseCount) {
  close_driver_completely();
  EXPECT_EQ(cuFileDriverClose().err, CU_FILE_DRIVER_NOT_INITIALIZED);
  ASSERT_TRUE(ok(cuFileDriverOpen()));
  EXPECT_EQ(cuFileUseCount(), 1);
  ASSERT_TRUE(ok(cuFileDriverOpen()));  // already open: success, one more user
  EXPECT_EQ(cuFileUseCount(), 2);
  EXPECT_TRUE(ok(cuFileDriverClose()));
  EXPECT_EQ(cuFileUseCount(), 1);
  EXPECT_TRUE(ok(cuFileDriverClose()));
  EXPECT_EQ(cuFileUseCount(), 0);
  // The unversioned cuFileDriverClose of older headers is exported too.
  auto* unversioned =
      reinterpret_cast<CUfileError_t (*)()>(dlsym(RTLD_DEFAULT, "cuFileDriverClose"));
  ASSERT_NE(unversioned, nullptr);
  EXPECT_EQ(unversioned().err, CU_FILE_DRIVER_NOT_INITIALIZED);
}

TEST(Driver, ImplicitOpenAndCloseReleasesRegistrations) {
  close_driver_completely();
  TempDir dir;
  write_file(dir.file("f"), random_bytes(8192, 1));
  const int fd = open_file(dir.file("f"), O_RDONLY);
  CUfileHandle_t fh = nullptr;
  ASSERT_TRUE(ok(register_fd(&fh, fd)));  // opens the driver
  EXPECT_EQ(cuFileUseCount(), 1);
  std::vector<char> host(8192);
  ASSERT_TRUE(ok(cuFileBufRegister(host.data(), host.size(), 0)));
  ASSERT_TRUE(ok(cuFileDriverClose()));
  // The close released the handle and the buffer; the next call opens the driver again.
  EXPECT_EQ(cuFileRead(fh, host.data(), 4096, 0, 0), -CU_FILE_HANDLE_NOT_REGISTERED);
  EXPECT_EQ(cuFileUseCount(), 1);
  EXPECT_EQ(cuFileBufDeregister(host.data()).err, CU_FILE_MEMORY_NOT_REGISTERED);
  ASSERT_TRUE(ok(register_fd(&fh, fd)));  // the fd is free again
  EXPECT_EQ(cuFileRead(fh, host.data(), 4096, 0, 0), 4096);
  cuFileHandleDeregister(fh);
  ::close(fd);
  close_driver_completely();
}

TEST(Driver, Version) {
  EXPECT_EQ(cuFileGetVersion(nullptr).err, CU_FILE_INVALID_VALUE);
  int v = 0;
  ASSERT_TRUE(ok(cuFileGetVersion(&v)));
  EXPECT_GE(v, 1140);  // the parameter API is there
  EXPECT_EQ(v % 10, 0);
}

TEST(Driver, PropertiesAndSetters) {
  EXPECT_EQ(cuFileDriverGetProperties(nullptr).err, CU_FILE_INVALID_VALUE);
  CUfileDrvProps_t p;
  ASSERT_TRUE(ok(cuFileDriverGetProperties(&p)));  // opens the driver
  EXPECT_NE(p.fflags & (1U << CU_FILE_BATCH_IO_SUPPORTED), 0U);
  EXPECT_NE(p.fflags & (1U << CU_FILE_STREAMS_SUPPORTED), 0U);
  EXPECT_NE(p.nvfs.dcontrolflags & (1U << CU_FILE_ALLOW_COMPAT_MODE), 0U);
  EXPECT_EQ(p.max_batch_io_size, 128U);
  EXPECT_GT(p.per_buffer_cache_size, 0U);
  EXPECT_EQ(p.max_device_cache_size % p.per_buffer_cache_size, 0U);
  // No NVIDIA library serves Sluice's direct path here (the fake's is not nvidia-fs either):
  // no GDS to report, as NVIDIA's library reports it in compat mode.
  if (mode() != "fake_cufile") {
    EXPECT_EQ(p.nvfs.major_version, 0U);
  }

  // Open: the cuFileDriverSet* calls succeed and change nothing ("No-op if driver is already
  // open", NVIDIA's reference).
  ASSERT_TRUE(ok(cuFileDriverSetMaxDirectIOSize(512)));
  ASSERT_TRUE(ok(cuFileDriverSetMaxCacheSize(4 * p.per_buffer_cache_size)));
  CUfileDrvProps_t same;
  ASSERT_TRUE(ok(cuFileDriverGetProperties(&same)));
  EXPECT_EQ(same.nvfs.max_direct_io_size, p.nvfs.max_direct_io_size);
  EXPECT_EQ(same.max_device_cache_size, p.max_device_cache_size);

  close_driver_completely();
  ASSERT_TRUE(ok(cuFileDriverSetMaxDirectIOSize(512)));
  ASSERT_TRUE(ok(cuFileDriverSetPollMode(true, 8)));
  ASSERT_TRUE(ok(cuFileDriverSetMaxPinnedMemSize(1 << 20)));
  ASSERT_TRUE(ok(cuFileDriverSetMaxCacheSize(4 * p.per_buffer_cache_size)));
  CUfileDrvProps_t q;
  ASSERT_TRUE(ok(cuFileDriverGetProperties(&q)));
  EXPECT_EQ(q.nvfs.max_direct_io_size, 512U);
  EXPECT_EQ(q.nvfs.poll_thresh_size, 8U);
  EXPECT_NE(q.nvfs.dcontrolflags & (1U << CU_FILE_USE_POLL_MODE), 0U);
  EXPECT_EQ(q.max_device_pinned_mem_size, 1U << 20);
  EXPECT_EQ(q.max_device_cache_size, 4 * p.per_buffer_cache_size);

  // Values NVIDIA accepts that Sluice's staging cannot take exactly: honoured as the nearest
  // staging that works, reported as given. DeepSpeed passes its block size / 1024; NVIDIA's
  // sample 007 sets a 64 KiB cache; UINT64_MAX pinned memory is documented as "no limit".
  close_driver_completely();
  ASSERT_TRUE(ok(cuFileDriverSetMaxDirectIOSize(3)));
  ASSERT_TRUE(ok(cuFileDriverSetMaxCacheSize(64)));
  ASSERT_TRUE(ok(cuFileDriverSetMaxPinnedMemSize(UINT64_MAX)));
  CUfileDrvProps_t r;
  ASSERT_TRUE(ok(cuFileDriverGetProperties(&r)));
  EXPECT_EQ(r.nvfs.max_direct_io_size, 3U);
  EXPECT_EQ(r.max_device_cache_size, 64U);
  EXPECT_EQ(r.max_device_pinned_mem_size, UINT32_MAX);
  size_t v = 0;
  ASSERT_TRUE(ok(cuFileGetParameterSizeT(CUFILE_PARAM_PROPERTIES_MAX_DEVICE_CACHE_SIZE_KB, &v)));
  EXPECT_EQ(v, 64U);
  ASSERT_TRUE(
      ok(cuFileGetParameterSizeT(CUFILE_PARAM_PROPERTIES_MAX_DEVICE_PINNED_MEM_SIZE_KB, &v)));
  EXPECT_EQ(v, SIZE_MAX);

  // What stays refused: sizes whose bytes do not fit a size_t, and zero.
  close_driver_completely();
  EXPECT_EQ(cuFileDriverSetMaxDirectIOSize(SIZE_MAX).err, CU_FILE_DRIVER_UNSUPPORTED_LIMIT);
  EXPECT_EQ(cuFileDriverSetMaxPinnedMemSize(0).err, CU_FILE_DRIVER_UNSUPPORTED_LIMIT);
  EXPECT_EQ(cuFileDriverSetMaxCacheSize(0).err, CU_FILE_DRIVER_UNSUPPORTED_LIMIT);

  ASSERT_TRUE(ok(cuFileDriverSetMaxDirectIOSize(p.nvfs.max_direct_io_size)));
  ASSERT_TRUE(ok(cuFileDriverSetPollMode(false, p.nvfs.poll_thresh_size)));
  ASSERT_TRUE(ok(cuFileDriverSetMaxPinnedMemSize(p.max_device_pinned_mem_size)));
  ASSERT_TRUE(ok(cuFileDriverSetMaxCacheSize(p.max_device_cache_size)));
}

TEST(Driver, ParametersBeforeOpen) {
  close_driver_completely();
  size_t batch = 0, io_kb = 0, lo = 0, hi = 0;
  ASSERT_TRUE(ok(cuFileGetParameterSizeT(CUFILE_PARAM_PROPERTIES_IO_BATCHSIZE, &batch)));
  EXPECT_EQ(batch, 128U);
  ASSERT_TRUE(ok(cuFileGetParameterSizeT(CUFILE_PARAM_PROPERTIES_MAX_DIRECT_IO_SIZE_KB, &io_kb)));
  ASSERT_TRUE(ok(cuFileSetParameterSizeT(CUFILE_PARAM_PROPERTIES_IO_BATCHSIZE, 16)));
  ASSERT_TRUE(ok(cuFileSetParameterSizeT(CUFILE_PARAM_PROPERTIES_MAX_DIRECT_IO_SIZE_KB, 2048)));
  size_t v = 0;
  ASSERT_TRUE(ok(cuFileGetParameterSizeT(CUFILE_PARAM_PROPERTIES_IO_BATCHSIZE, &v)));
  EXPECT_EQ(v, 16U);
  ASSERT_TRUE(ok(cuFileGetParameterSizeT(CUFILE_PARAM_PROPERTIES_MAX_DIRECT_IO_SIZE_KB, &v)));
  EXPECT_EQ(v, 2048U);
  ASSERT_TRUE(
      ok(cuFileGetParameterMinMaxValue(CUFILE_PARAM_PROPERTIES_MAX_DIRECT_IO_SIZE_KB, &lo, &hi)));
  EXPECT_LE(lo, 2048U);
  EXPECT_GE(hi, 2048U);
  EXPECT_EQ(cuFileSetParameterSizeT(CUFILE_PARAM_PROPERTIES_MAX_DIRECT_IO_SIZE_KB, hi + 4).err,
            CU_FILE_DRIVER_UNSUPPORTED_LIMIT);
  EXPECT_EQ(cuFileSetParameterSizeT(CUFILE_PARAM_PROFILE_STATS, 7).err,
            CU_FILE_DRIVER_UNSUPPORTED_LIMIT);
  EXPECT_EQ(cufile_test_set_size_param(99, 1).err, CU_FILE_INVALID_VALUE);
  EXPECT_EQ(cufile_test_set_size_param(-1, 1).err, CU_FILE_INVALID_VALUE);
  EXPECT_EQ(cufile_test_get_size_param(99, &v).err, CU_FILE_INVALID_VALUE);
  EXPECT_EQ(cuFileGetParameterSizeT(CUFILE_PARAM_PROFILE_STATS, nullptr).err,
            CU_FILE_INVALID_VALUE);
  EXPECT_EQ(cuFileGetParameterMinMaxValue(CUFILE_PARAM_PROFILE_STATS, nullptr, &hi).err,
            CU_FILE_INVALID_VALUE);

  bool b = false;
  ASSERT_TRUE(ok(cuFileGetParameterBool(CUFILE_PARAM_PROPERTIES_ALLOW_COMPAT_MODE, &b)));
  EXPECT_TRUE(b);
  ASSERT_TRUE(ok(cuFileSetParameterBool(CUFILE_PARAM_FORCE_COMPAT_MODE, true)));
  ASSERT_TRUE(ok(cuFileGetParameterBool(CUFILE_PARAM_FORCE_COMPAT_MODE, &b)));
  EXPECT_TRUE(b);
  ASSERT_TRUE(ok(cuFileSetParameterBool(CUFILE_PARAM_FORCE_COMPAT_MODE, false)));
  ASSERT_TRUE(ok(cuFileGetParameterBool(CUFILE_PARAM_FORCE_COMPAT_MODE, &b)));
  EXPECT_FALSE(b);
  ASSERT_TRUE(
      ok(cuFileSetParameterBool(CUFILE_PARAM_SKIP_TOPOLOGY_DETECTION, true)));  // kept, reported
  ASSERT_TRUE(ok(cuFileGetParameterBool(CUFILE_PARAM_SKIP_TOPOLOGY_DETECTION, &b)));
  EXPECT_TRUE(b);
  EXPECT_EQ(cufile_test_set_bool_param(-1, true).err, CU_FILE_INVALID_VALUE);
  EXPECT_EQ(cufile_test_set_bool_param(14, true).err, CU_FILE_INVALID_VALUE);
  // CUDA 13.4's parameters are known: kept and reported.
  ASSERT_TRUE(ok(cuFileSetParameterBool(CUFILE_PARAM_PROPERTIES_POSIX_IO_MODE, true)));
  ASSERT_TRUE(ok(cuFileGetParameterBool(CUFILE_PARAM_PROPERTIES_POSIX_IO_MODE, &b)));
  EXPECT_TRUE(b);
  ASSERT_TRUE(ok(cuFileSetParameterBool(CUFILE_PARAM_PROPERTIES_POSIX_IO_MODE, false)));
  ASSERT_TRUE(ok(cuFileSetParameterBool(CUFILE_PARAM_GDS_FALLBACK_IO, true)));
  ASSERT_TRUE(ok(cuFileGetParameterBool(CUFILE_PARAM_GDS_FALLBACK_IO, &b)));
  EXPECT_TRUE(b);
  ASSERT_TRUE(ok(cuFileSetParameterBool(CUFILE_PARAM_GDS_FALLBACK_IO, false)));
  EXPECT_EQ(cuFileGetParameterBool(CUFILE_PARAM_FORCE_COMPAT_MODE, nullptr).err,
            CU_FILE_INVALID_VALUE);

  char level[32];
  ASSERT_TRUE(ok(cuFileGetParameterString(CUFILE_PARAM_LOGGING_LEVEL, level, sizeof level)));
  const std::string old_level = level;
  ASSERT_TRUE(ok(cuFileSetParameterString(CUFILE_PARAM_LOGGING_LEVEL, "ERROR")));
  ASSERT_TRUE(ok(cuFileGetParameterString(CUFILE_PARAM_LOGGING_LEVEL, level, sizeof level)));
  EXPECT_STREQ(level, "ERROR");
  EXPECT_EQ(cuFileSetParameterString(CUFILE_PARAM_LOGGING_LEVEL, "LOUD").err,
            CU_FILE_INVALID_VALUE);
  EXPECT_EQ(cuFileSetParameterString(CUFILE_PARAM_LOG_DIR, nullptr).err, CU_FILE_INVALID_VALUE);
  EXPECT_EQ(cuFileGetParameterString(CUFILE_PARAM_LOGGING_LEVEL, level, 2).err,
            CU_FILE_INVALID_VALUE);
  EXPECT_EQ(cufile_test_get_string_param(4, level, sizeof level).err, CU_FILE_INVALID_VALUE);
  ASSERT_TRUE(ok(cuFileSetParameterString(CUFILE_PARAM_RDMA_TRANSPORT, "rc")));
  ASSERT_TRUE(ok(cuFileGetParameterString(CUFILE_PARAM_RDMA_TRANSPORT, level, sizeof level)));
  EXPECT_STREQ(level, "rc");
  ASSERT_TRUE(ok(cuFileSetParameterString(CUFILE_PARAM_LOGGING_LEVEL, old_level.c_str())));

  size_t sizes[4] = {}, counts[4] = {};
  ASSERT_TRUE(ok(cuFileGetParameterPosixPoolSlabArray(sizes, counts, 4)));
  EXPECT_EQ(sizes[1], 1024U);
  const size_t new_sizes[2] = {64, 2048}, new_counts[2] = {8, 4};
  ASSERT_TRUE(ok(cuFileSetParameterPosixPoolSlabArray(new_sizes, new_counts, 2)));
  ASSERT_TRUE(ok(cuFileGetParameterPosixPoolSlabArray(sizes, counts, 2)));
  EXPECT_EQ(sizes[1], 2048U);
  EXPECT_EQ(counts[0], 8U);
  EXPECT_EQ(cuFileSetParameterPosixPoolSlabArray(nullptr, new_counts, 2).err,
            CU_FILE_INVALID_VALUE);
  EXPECT_EQ(cuFileGetParameterPosixPoolSlabArray(sizes, counts, 1).err, CU_FILE_INVALID_VALUE);

  // Once the driver is open, parameters are fixed; getters still work.
  ASSERT_TRUE(ok(cuFileDriverOpen()));
  CUfileDrvProps_t p;
  ASSERT_TRUE(ok(cuFileDriverGetProperties(&p)));
  EXPECT_EQ(p.max_batch_io_size, 16U);
  EXPECT_EQ(p.nvfs.max_direct_io_size, 2048U);
  EXPECT_EQ(cuFileSetParameterSizeT(CUFILE_PARAM_PROPERTIES_IO_BATCHSIZE, 32).err,
            CU_FILE_DRIVER_ALREADY_OPEN);
  EXPECT_EQ(cuFileSetParameterBool(CUFILE_PARAM_FORCE_COMPAT_MODE, true).err,
            CU_FILE_DRIVER_ALREADY_OPEN);
  EXPECT_EQ(cuFileSetParameterString(CUFILE_PARAM_LOG_DIR, "/tmp").err,
            CU_FILE_DRIVER_ALREADY_OPEN);
  EXPECT_EQ(cuFileSetParameterPosixPoolSlabArray(new_sizes, new_counts, 2).err,
            CU_FILE_DRIVER_ALREADY_OPEN);
  ASSERT_TRUE(ok(cuFileGetParameterSizeT(CUFILE_PARAM_PROPERTIES_IO_BATCHSIZE, &v)));
  EXPECT_EQ(v, 16U);
  close_driver_completely();
  ASSERT_TRUE(ok(cuFileSetParameterSizeT(CUFILE_PARAM_PROPERTIES_IO_BATCHSIZE, batch)));
  ASSERT_TRUE(ok(cuFileSetParameterSizeT(CUFILE_PARAM_PROPERTIES_MAX_DIRECT_IO_SIZE_KB, io_kb)));
}

TEST(Driver, ErrorStringsAndMacros) {
  std::set<std::string> texts;
  for (int c = CU_FILE_DRIVER_NOT_INITIALIZED; c <= CU_FILE_BATCH_NOCOMPAT_ERROR; ++c) {
    if (c == 5021 || c == 5032) continue;  // unused values
    const char* s = cufileop_status_error(static_cast<CUfileOpError>(c));
    ASSERT_NE(s, nullptr);
    EXPECT_GT(std::strlen(s), 5U) << c;
    texts.insert(s);
  }
  EXPECT_EQ(texts.size(), 47U) << "every code has its own text";
  EXPECT_NE(std::string(cufileop_status_error(CU_FILE_SUCCESS)), "");
  EXPECT_NE(cufileop_status_error(static_cast<CUfileOpError>(42)), nullptr);
  const ssize_t ret = -CU_FILE_INVALID_VALUE;
  EXPECT_TRUE(IS_CUFILE_ERR(ret));
  EXPECT_FALSE(IS_CUFILE_ERR(-EIO));
  EXPECT_STREQ(CUFILE_ERRSTR(ret), cufileop_status_error(CU_FILE_INVALID_VALUE));
  const CUfileError_t st{CU_FILE_CUDA_DRIVER_ERROR, static_cast<CUresult>(700)};
  EXPECT_TRUE(IS_CUDA_ERR(st));
  EXPECT_EQ(static_cast<int>(CU_FILE_CUDA_ERR(st)), 700);
}

TEST(Driver, PlatformQueries) {
  close_driver_completely();
  size_t bar = 0;
  EXPECT_EQ(cuFileGetBARSizeInKB(0, &bar).err, CU_FILE_DRIVER_NOT_INITIALIZED);
  ASSERT_TRUE(ok(cuFileDriverOpen()));
  EXPECT_EQ(cuFileGetBARSizeInKB(0, nullptr).err, CU_FILE_INVALID_VALUE);
  EXPECT_EQ(cuFileGetBARSizeInKB(-1, &bar).err, CU_FILE_INVALID_VALUE);
  // The fake GPU's PCI function is not in this machine's sysfs: its BAR size is unknown.
  EXPECT_EQ(cuFileGetBARSizeInKB(0, &bar).err, CU_FILE_INVALID_VALUE);

  // P2P modes: none where no NVIDIA library serves the direct path; a request is kept and
  // narrows what is reported, never widens it.
  int modes = -1;
  auto get = [&](CUfileDriverStatusFlags_t fs) {
    CUfileP2PFlags_t f{};
    const CUfileError_t st = cuFileDriverGetP2PFlags(fs, &f);
    std::memcpy(&modes, &f, sizeof modes);
    return st;
  };
  ASSERT_TRUE(ok(get(CU_FILE_NVME_SUPPORTED)));
  if (mode() != "fake_cufile") {
    EXPECT_EQ(modes, 0);
  }
  ASSERT_TRUE(ok(cuFileDriverSetP2PFlags(CU_FILE_NVME_SUPPORTED, CU_FILE_P2P_FLAG_PCI_P2PDMA)));
  ASSERT_TRUE(ok(get(CU_FILE_NVME_SUPPORTED)));
  EXPECT_EQ(modes & ~static_cast<int>(CU_FILE_P2P_FLAG_PCI_P2PDMA), 0);
  EXPECT_EQ(get(CU_FILE_MAX_TARGET_TYPES).err, CU_FILE_INVALID_VALUE);
  EXPECT_EQ(cuFileDriverGetP2PFlags(CU_FILE_NVME_SUPPORTED, nullptr).err, CU_FILE_INVALID_VALUE);
  EXPECT_EQ(cuFileDriverSetP2PFlags(CU_FILE_MAX_TARGET_TYPES, CUFILE_P2PDMA).err,
            CU_FILE_INVALID_VALUE);
  close_driver_completely();
}

// ------------------------------------------------------------------ handles and buffers

TEST_F(CuFile, HandleRegisterChecks) {
  CUfileHandle_t fh = nullptr;
  CUfileDescr_t d;
  std::memset(&d, 0, sizeof d);
  EXPECT_EQ(cuFileHandleRegister(nullptr, &d).err, CU_FILE_INVALID_VALUE);
  EXPECT_EQ(cuFileHandleRegister(&fh, nullptr).err, CU_FILE_INVALID_VALUE);
  cufile_test_set_handle_type(&d, 7);
  EXPECT_EQ(cuFileHandleRegister(&fh, &d).err, CU_FILE_INVALID_VALUE);
  d.type = CU_FILE_HANDLE_TYPE_OPAQUE_WIN32;
  EXPECT_EQ(cuFileHandleRegister(&fh, &d).err, CU_FILE_IO_NOT_SUPPORTED);
  d.type = CU_FILE_HANDLE_TYPE_USERSPACE_FS;  // without fs_ops: nothing could move the bytes
  EXPECT_EQ(cuFileHandleRegister(&fh, &d).err, CU_FILE_INVALID_VALUE);
  EXPECT_EQ(register_fd(&fh, -1).err, CU_FILE_INVALID_VALUE);

  const int closed = ::open(path_.c_str(), O_RDONLY);
  ::close(closed);
  EXPECT_EQ(register_fd(&fh, closed).err, CU_FILE_INVALID_VALUE);

  for (const int flag : {O_APPEND, O_NONBLOCK, O_NOATIME}) {
    const int fd = ::open(path_.c_str(), O_RDWR | flag);
    ASSERT_GE(fd, 0);
    EXPECT_EQ(register_fd(&fh, fd).err, CU_FILE_INVALID_FILE_OPEN_FLAG) << flag;
    ::close(fd);
  }
  const int tmp = ::open(dir_.path().c_str(), O_TMPFILE | O_RDWR, 0600);
  if (tmp >= 0) {  // not every file system has O_TMPFILE
    EXPECT_EQ(register_fd(&fh, tmp).err, CU_FILE_INVALID_FILE_OPEN_FLAG);
    ::close(tmp);
  }
  const int dir_flag = ::open(dir_.path().c_str(), O_RDONLY | O_DIRECTORY);
  EXPECT_EQ(register_fd(&fh, dir_flag).err, CU_FILE_INVALID_FILE_OPEN_FLAG);
  ::close(dir_flag);
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  EXPECT_EQ(register_fd(&fh, pipe_fds[0]).err, CU_FILE_INVALID_FILE_TYPE);
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
  const int null_dev = ::open("/dev/null", O_RDWR);
  EXPECT_EQ(register_fd(&fh, null_dev).err, CU_FILE_INVALID_FILE_TYPE);
  ::close(null_dev);

  const int fd = open_file(path_, O_RDONLY);
  ASSERT_TRUE(ok(register_fd(&fh, fd)));
  CUfileHandle_t again = nullptr;
  EXPECT_EQ(register_fd(&again, fd).err, CU_FILE_HANDLE_ALREADY_REGISTERED);
  cuFileHandleDeregister(fh);
  ASSERT_TRUE(ok(register_fd(&again, fd)));  // deregistered: the fd may be registered again
  cuFileHandleDeregister(again);
  cuFileHandleDeregister(again);    // unknown now: ignored
  cuFileHandleDeregister(nullptr);  // never registered: ignored
  ::close(fd);
}

TEST_F(CuFile, BufRegisterChecks) {
  Buffer buf(1 << 20, device_memory());
  ASSERT_NE(buf.get(), nullptr);
  EXPECT_EQ(cuFileBufRegister(nullptr, 4096, 0).err, CU_FILE_INVALID_VALUE);
  EXPECT_EQ(cuFileBufRegister(buf.get(), 0, 0).err, CU_FILE_INVALID_VALUE);
  EXPECT_EQ(cuFileBufRegister(buf.get(), 4096, 4).err, CU_FILE_INVALID_VALUE);
  EXPECT_EQ(cuFileBufRegister(reinterpret_cast<void*>(UINTPTR_MAX - 10), 4096, 0).err,
            CU_FILE_INVALID_VALUE);
  ASSERT_TRUE(ok(cuFileBufRegister(buf.get(), buf.size(), 0)));
  EXPECT_EQ(cuFileBufRegister(buf.get(), buf.size(), 0).err, CU_FILE_MEMORY_ALREADY_REGISTERED);
  ASSERT_TRUE(ok(cuFileBufDeregister(buf.get())));
  EXPECT_EQ(cuFileBufDeregister(buf.get()).err, CU_FILE_MEMORY_NOT_REGISTERED);
  EXPECT_EQ(cuFileBufDeregister(nullptr).err, CU_FILE_INVALID_VALUE);
  ASSERT_TRUE(ok(cuFileBufRegister(buf.get(), 4096, CU_FILE_RDMA_REGISTER)));  // the legacy flag
  ASSERT_TRUE(ok(cuFileBufDeregister(buf.get())));
  ASSERT_TRUE(ok(cuFileBufRegister(buf.get(), 4096,
                                   CU_FILE_RDMA_REGISTER | CU_FILE_RDMA_RELAXED_ORDERING)));
  ASSERT_TRUE(ok(cuFileBufDeregister(buf.get())));
  if (device_memory()) {
    // Past the end of the allocation.
    EXPECT_EQ(cuFileBufRegister(buf.get(), buf.size() + (1 << 20), 0).err,
              CU_FILE_CUDA_POINTER_RANGE_ERROR);
    // Registered device memory is capped by max_device_pinned_mem_size (KiB), set before the
    // driver opens (once open, cuFileDriverSet* is a no-op, as NVIDIA documents).
    close_driver_completely();
    ASSERT_TRUE(ok(cuFileDriverSetMaxPinnedMemSize(512)));
    ASSERT_TRUE(ok(cuFileDriverOpen()));
    EXPECT_EQ(cuFileBufRegister(buf.get(), buf.size(), 0).err, CU_FILE_GPU_MEMORY_PINNING_FAILED);
    ASSERT_TRUE(ok(cuFileBufRegister(buf.get(), 256 * 1024, 0)));
    ASSERT_TRUE(ok(cuFileBufDeregister(buf.get())));
    close_driver_completely();
    ASSERT_TRUE(ok(cuFileDriverSetMaxPinnedMemSize(UINT64_MAX)));  // NVIDIA's "no limit"
    ASSERT_TRUE(ok(cuFileDriverOpen()));
    ASSERT_TRUE(ok(cuFileBufRegister(buf.get(), buf.size(), 0)));
    ASSERT_TRUE(ok(cuFileBufDeregister(buf.get())));
    close_driver_completely();
    ASSERT_TRUE(ok(cuFileDriverSetMaxPinnedMemSize(33554432)));
    ASSERT_TRUE(ok(cuFileDriverOpen()));
  }
}

// ------------------------------------------------------------------ synchronous IO

struct Shape {
  size_t size;
  off_t file_offset;
  off_t buf_offset;
};

// Aligned, unaligned in each argument, tiny, and spanning many I/O requests.
const Shape kShapes[] = {{65536, 0, 0},        {4096, 8192, 4096}, {1000, 3, 0},
                         {70001, 4095, 17},    {1, 1048575, 5},    {524288, 4096, 0},
                         {300000, 12345, 4093}};

void roundtrip(const std::string& path, const std::vector<unsigned char>& data, bool registered) {
  SCOPED_TRACE(registered ? "registered buffer" : "unregistered buffer");
  const int fd = open_file(path, O_RDWR);
  ASSERT_GE(fd, 0);
  CUfileHandle_t fh = nullptr;
  ASSERT_TRUE(ok(register_fd(&fh, fd)));
  Buffer buf(1 << 20, device_memory());
  if (registered) {
    ASSERT_TRUE(ok(cuFileBufRegister(buf.get(), buf.size(), 0)));
  }
  std::vector<unsigned char> expect = data;
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(testing::Message()
                 << s.size << " bytes at " << s.file_offset << " buf+" << s.buf_offset);
    const size_t in_file = std::min(s.size, expect.size() - static_cast<size_t>(s.file_offset));
    // Read what is there.
    ASSERT_EQ(cuFileRead(fh, buf.get(), s.size, s.file_offset, s.buf_offset),
              static_cast<ssize_t>(in_file));
    const auto got = buf.bytes(static_cast<size_t>(s.buf_offset), in_file);
    ASSERT_EQ(0, std::memcmp(got.data(), expect.data() + s.file_offset, in_file));
    // Overwrite it with new bytes from the buffer.
    const auto fresh =
        random_bytes(s.size, static_cast<unsigned>(s.size + static_cast<size_t>(s.file_offset)));
    buf.fill(fresh, static_cast<size_t>(s.buf_offset));
    ASSERT_EQ(cuFileWrite(fh, buf.get(), s.size, s.file_offset, s.buf_offset),
              static_cast<ssize_t>(s.size));
    expect.resize(std::max(expect.size(), static_cast<size_t>(s.file_offset) + s.size));
    std::memcpy(expect.data() + s.file_offset, fresh.data(), s.size);
  }
  if (registered) {
    ASSERT_TRUE(ok(cuFileBufDeregister(buf.get())));
  }
  cuFileHandleDeregister(fh);
  ::close(fd);
  EXPECT_EQ(read_file(path), expect);
}

TEST_F(CuFile, ReadWriteAnyAlignmentRegistered) {
  roundtrip(path_, data_, true);
}
TEST_F(CuFile, ReadWriteAnyAlignmentUnregistered) {
  roundtrip(path_, data_, false);
}

TEST_F(CuFile, ReadAtAndPastEndOfFile) {
  const int fd = open_file(path_, O_RDONLY);
  CUfileHandle_t fh = nullptr;
  ASSERT_TRUE(ok(register_fd(&fh, fd)));
  Buffer buf(65536, device_memory());
  const off_t end = static_cast<off_t>(data_.size());
  EXPECT_EQ(cuFileRead(fh, buf.get(), 65536, end - 100, 0), 100);  // short at the end
  EXPECT_EQ(buf.bytes(0, 100), std::vector<unsigned char>(data_.end() - 100, data_.end()));
  EXPECT_EQ(cuFileRead(fh, buf.get(), 4096, end, 0), 0);
  EXPECT_EQ(cuFileRead(fh, buf.get(), 4096, end + 8192, 0), 0);
  EXPECT_EQ(cuFileRead(fh, buf.get(), 0, 0, 0), 0);
  cuFileHandleDeregister(fh);
  ::close(fd);
}

TEST_F(CuFile, DataPathErrors) {
  const int fd = open_file(path_, O_RDONLY);
  CUfileHandle_t fh = nullptr;
  ASSERT_TRUE(ok(register_fd(&fh, fd)));
  Buffer buf(65536, device_memory());
  auto* unknown = reinterpret_cast<CUfileHandle_t>(static_cast<uintptr_t>(0xdead));
  EXPECT_EQ(cuFileRead(unknown, buf.get(), 4096, 0, 0), -CU_FILE_HANDLE_NOT_REGISTERED);
  EXPECT_EQ(cuFileRead(nullptr, buf.get(), 4096, 0, 0), -CU_FILE_HANDLE_NOT_REGISTERED);
  EXPECT_EQ(cuFileRead(fh, nullptr, 4096, 0, 0), -CU_FILE_INVALID_VALUE);
  EXPECT_EQ(cuFileRead(fh, buf.get(), 4096, -1, 0), -CU_FILE_INVALID_VALUE);
  EXPECT_EQ(cuFileRead(fh, buf.get(), 4096, 0, -1), -CU_FILE_INVALID_VALUE);
  EXPECT_EQ(cuFileRead(fh, buf.get(), SIZE_MAX, 0, 0), -CU_FILE_INVALID_VALUE);
  EXPECT_EQ(cuFileRead(fh, buf.get(), 4096, LLONG_MAX - 100, 0), -CU_FILE_INVALID_VALUE);
  EXPECT_EQ(cuFileWrite(fh, buf.get(), static_cast<size_t>(SSIZE_MAX) + 1, 0, 0),
            -CU_FILE_INVALID_VALUE);
  // A registered buffer bounds the access.
  ASSERT_TRUE(ok(cuFileBufRegister(buf.get(), 8192, 0)));
  EXPECT_EQ(cuFileRead(fh, buf.get(), 8192, 0, 4096), -CU_FILE_INVALID_MAPPING_RANGE);
  EXPECT_EQ(cuFileRead(fh, buf.get(), 4096, 0, 4096), 4096);
  ASSERT_TRUE(ok(cuFileBufDeregister(buf.get())));
  // Writing through a read-only descriptor, as pwrite(2) would say.
  errno = 0;
  EXPECT_EQ(cuFileWrite(fh, buf.get(), 4096, 0, 0), -1);
  EXPECT_EQ(errno, EBADF);
  // I/O after the caller closed its descriptor.
  ::close(fd);
  errno = 0;
  EXPECT_EQ(cuFileRead(fh, buf.get(), 4096, 0, 0), -1);
  EXPECT_EQ(errno, EBADF);
  cuFileHandleDeregister(fh);

  const int wfd = open_file(path_, O_WRONLY);
  ASSERT_TRUE(ok(register_fd(&fh, wfd)));
  errno = 0;
  EXPECT_EQ(cuFileRead(fh, buf.get(), 4096, 0, 0), -1);
  EXPECT_EQ(errno, EBADF);
  cuFileHandleDeregister(fh);
  ::close(wfd);
}

// ------------------------------------------------------------------ batch

void prepare_batch(std::vector<CUfileIOParams_t>& io, CUfileHandle_t fh, void* base, size_t piece,
                   CUfileOpcode_t op) {
  for (size_t i = 0; i < io.size(); ++i) {
    std::memset(&io[i], 0, sizeof io[i]);
    io[i].mode = CUFILE_BATCH;
    io[i].fh = fh;
    io[i].opcode = op;
    io[i].cookie = reinterpret_cast<void*>(i + 1);
    io[i].u.batch.devPtr_base = base;
    io[i].u.batch.file_offset = static_cast<off_t>(i * piece);
    io[i].u.batch.devPtr_offset = static_cast<off_t>(i * piece);
    io[i].u.batch.size = piece;
  }
}

// Collects `n` events, waiting at most a few seconds.
std::vector<CUfileIOEvents_t> collect(CUfileBatchHandle_t b, unsigned n) {
  std::vector<CUfileIOEvents_t> all;
  std::vector<CUfileIOEvents_t> ev(n);
  for (int tries = 0; all.size() < n && tries < 100; ++tries) {
    unsigned nr = n;
    timespec timeout{0, 100000000};
    EXPECT_TRUE(ok(cuFileBatchIOGetStatus(b, 1, &nr, ev.data(), &timeout)));
    all.insert(all.end(), ev.begin(), ev.begin() + nr);
  }
  return all;
}

TEST_F(CuFile, BatchReadWrite) {
  const int fd = open_file(path_, O_RDWR);
  CUfileHandle_t fh = nullptr;
  ASSERT_TRUE(ok(register_fd(&fh, fd)));
  constexpr unsigned n = 8;
  const size_t piece = 12289;  // unaligned pieces
  Buffer buf(n * piece, device_memory());
  CUfileBatchHandle_t batch = nullptr;
  ASSERT_TRUE(ok(cuFileBatchIOSetUp(&batch, n)));
  std::vector<CUfileIOParams_t> io(n);
  prepare_batch(io, fh, buf.get(), piece, CUFILE_READ);
  ASSERT_TRUE(ok(cuFileBatchIOSubmit(batch, n, io.data(), 0)));
  std::vector<CUfileIOEvents_t> ev(n);
  unsigned nr = n;
  ASSERT_TRUE(ok(cuFileBatchIOGetStatus(batch, n, &nr, ev.data(), nullptr)));  // waits for all
  ASSERT_EQ(nr, n);
  std::set<void*> cookies;
  for (const auto& e : ev) {
    EXPECT_EQ(e.status, CUFILE_COMPLETE);
    EXPECT_EQ(e.ret, piece);
    cookies.insert(e.cookie);
  }
  EXPECT_EQ(cookies.size(), n);
  EXPECT_EQ(buf.bytes(0, n * piece),
            std::vector<unsigned char>(data_.begin(), data_.begin() + n * piece));

  // The slots are free again: write new bytes through the same batch.
  const auto fresh = random_bytes(n * piece, 99);
  buf.fill(fresh);
  prepare_batch(io, fh, buf.get(), piece, CUFILE_WRITE);
  ASSERT_TRUE(ok(cuFileBatchIOSubmit(batch, n, io.data(), 0)));
  const auto done = collect(batch, n);
  ASSERT_EQ(done.size(), n);
  for (const auto& e : done) EXPECT_EQ(e.status, CUFILE_COMPLETE);
  cuFileBatchIODestroy(batch);
  cuFileHandleDeregister(fh);
  ::close(fd);
  const auto file = read_file(path_);
  EXPECT_EQ(std::vector<unsigned char>(file.begin(), file.begin() + n * piece), fresh);
}

TEST_F(CuFile, BatchErrors) {
  const int fd = open_file(path_, O_RDONLY);
  CUfileHandle_t fh = nullptr;
  ASSERT_TRUE(ok(register_fd(&fh, fd)));
  Buffer buf(65536, device_memory());
  CUfileBatchHandle_t batch = nullptr;
  EXPECT_EQ(cuFileBatchIOSetUp(nullptr, 4).err, CU_FILE_INVALID_VALUE);
  EXPECT_EQ(cuFileBatchIOSetUp(&batch, 0).err, CU_FILE_INVALID_VALUE);
  EXPECT_EQ(cuFileBatchIOSetUp(&batch, 129).err, CU_FILE_INVALID_VALUE);  // > io_batchsize
  ASSERT_TRUE(ok(cuFileBatchIOSetUp(&batch, 4)));

  std::vector<CUfileIOParams_t> io(5);
  prepare_batch(io, fh, buf.get(), 4096, CUFILE_READ);
  auto* unknown = reinterpret_cast<CUfileBatchHandle_t>(static_cast<uintptr_t>(0xbad));
  EXPECT_EQ(cuFileBatchIOSubmit(unknown, 1, io.data(), 0).err, CU_FILE_INVALID_VALUE);
  EXPECT_EQ(cuFileBatchIOSubmit(batch, 1, nullptr, 0).err, CU_FILE_INVALID_VALUE);
  EXPECT_EQ(cuFileBatchIOSubmit(batch, 1, io.data(), 1).err,
            CU_FILE_INVALID_VALUE);  // flags must be 0
  EXPECT_EQ(cuFileBatchIOSubmit(batch, 5, io.data(), 0).err,
            CU_FILE_INVALID_VALUE);  // > nr of SetUp
  auto bad = io;
  bad[1].mode = static_cast<CUfileBatchMode_t>(0);
  EXPECT_EQ(cuFileBatchIOSubmit(batch, 2, bad.data(), 0).err, CU_FILE_INVALID_VALUE);
  bad = io;
  cufile_test_set_opcode(&bad[1], 9);
  EXPECT_EQ(cuFileBatchIOSubmit(batch, 2, bad.data(), 0).err, CU_FILE_INVALID_VALUE);
  bad = io;
  bad[1].fh = reinterpret_cast<CUfileHandle_t>(static_cast<uintptr_t>(0xdead));
  EXPECT_EQ(cuFileBatchIOSubmit(batch, 2, bad.data(), 0).err, CU_FILE_HANDLE_NOT_REGISTERED);
  // Nothing of the refused submissions ran.
  unsigned nr = 4;
  std::vector<CUfileIOEvents_t> ev(4);
  timespec zero{0, 0};
  ASSERT_TRUE(ok(cuFileBatchIOGetStatus(batch, 0, &nr, ev.data(), &zero)));
  EXPECT_EQ(nr, 0U);

  // An entry whose I/O fails completes as FAILED with the negative code.
  bad = io;
  bad[2].u.batch.file_offset = -4096;
  ASSERT_TRUE(ok(cuFileBatchIOSubmit(batch, 3, bad.data(), 0)));
  EXPECT_EQ(cuFileBatchIOSubmit(batch, 2, io.data(), 0).err,
            CU_FILE_BATCH_FULL);  // 3 of 4 slots busy
  nr = 4;
  ASSERT_TRUE(ok(cuFileBatchIOGetStatus(batch, 3, &nr, ev.data(), nullptr)));
  ASSERT_EQ(nr, 3U);
  for (unsigned i = 0; i < nr; ++i) {
    if (ev[i].cookie == bad[2].cookie) {
      EXPECT_EQ(ev[i].status, CUFILE_FAILED);
      EXPECT_EQ(static_cast<ssize_t>(ev[i].ret), -CU_FILE_INVALID_VALUE);
    } else {
      EXPECT_EQ(ev[i].status, CUFILE_COMPLETE);
      EXPECT_EQ(ev[i].ret, 4096U);
    }
  }
  nr = 2;
  EXPECT_EQ(cuFileBatchIOGetStatus(batch, 3, &nr, ev.data(), nullptr).err,
            CU_FILE_INVALID_VALUE);  // min > max
  EXPECT_EQ(cuFileBatchIOGetStatus(batch, 0, nullptr, ev.data(), nullptr).err,
            CU_FILE_INVALID_VALUE);
  EXPECT_EQ(cuFileBatchIOGetStatus(batch, 0, &nr, nullptr, nullptr).err, CU_FILE_INVALID_VALUE);
  timespec bad_time{0, 2000000000L};
  EXPECT_EQ(cuFileBatchIOGetStatus(batch, 0, &nr, ev.data(), &bad_time).err, CU_FILE_INVALID_VALUE);
  EXPECT_EQ(cuFileBatchIOGetStatus(unknown, 0, &nr, ev.data(), nullptr).err, CU_FILE_INVALID_VALUE);
  // Waiting for more than is outstanding returns what there is instead of hanging.
  nr = 4;
  ASSERT_TRUE(ok(cuFileBatchIOGetStatus(batch, 4, &nr, ev.data(), nullptr)));
  EXPECT_EQ(nr, 0U);
  EXPECT_EQ(cuFileBatchIOCancel(unknown).err, CU_FILE_INVALID_VALUE);
  cuFileBatchIODestroy(batch);
  cuFileBatchIODestroy(batch);  // unknown now: ignored
  EXPECT_EQ(cuFileBatchIOSubmit(batch, 1, io.data(), 0).err, CU_FILE_INVALID_VALUE);
  cuFileHandleDeregister(fh);
  ::close(fd);
}

TEST_F(CuFile, BatchCancelAndDestroyWithEntriesInFlight) {
  const int fd = open_file(path_, O_RDONLY);
  CUfileHandle_t fh = nullptr;
  ASSERT_TRUE(ok(register_fd(&fh, fd)));
  constexpr unsigned n = 64;
  const size_t piece = data_.size() / n;
  Buffer buf(data_.size(), device_memory());
  std::vector<CUfileIOParams_t> io(n);
  prepare_batch(io, fh, buf.get(), piece, CUFILE_READ);
  CUfileBatchHandle_t batch = nullptr;
  ASSERT_TRUE(ok(cuFileBatchIOSetUp(&batch, n)));
  ASSERT_TRUE(ok(cuFileBatchIOSubmit(batch, n, io.data(), 0)));
  ASSERT_TRUE(ok(cuFileBatchIOCancel(batch)));
  const auto events = collect(batch, n);
  ASSERT_EQ(events.size(), n) << "every entry comes back, canceled or complete";
  for (const auto& e : events) {
    ASSERT_TRUE(e.status == CUFILE_COMPLETE || e.status == CUFILE_CANCELED) << e.status;
    if (e.status == CUFILE_COMPLETE) {
      const size_t i = reinterpret_cast<uintptr_t>(e.cookie) - 1;
      EXPECT_EQ(buf.bytes(i * piece, piece),
                std::vector<unsigned char>(data_.begin() + static_cast<long>(i * piece),
                                           data_.begin() + static_cast<long>((i + 1) * piece)));
    }
  }
  // Destroy while entries run: it waits for them.
  ASSERT_TRUE(ok(cuFileBatchIOSubmit(batch, n, io.data(), 0)));
  cuFileBatchIODestroy(batch);
  cuFileHandleDeregister(fh);
  ::close(fd);
}

// ------------------------------------------------------------------ streams

TEST_F(CuFile, AsyncOnNullStreamIsSynchronous) {
  const int fd = open_file(dir_.file("async.bin"), O_CREAT | O_RDWR);
  CUfileHandle_t fh = nullptr;
  ASSERT_TRUE(ok(register_fd(&fh, fd)));
  Buffer src(100000, device_memory()), dst(100000, device_memory());
  const auto bytes = random_bytes(100000, 3);
  src.fill(bytes);
  size_t size = 99999;
  off_t file_off = 1, buf_off = 1;
  ssize_t written = 0, got = 0;
  ASSERT_TRUE(ok(cuFileStreamRegister(nullptr, 0)));
  ASSERT_TRUE(ok(cuFileWriteAsync(fh, src.get(), &size, &file_off, &buf_off, &written, nullptr)));
  EXPECT_EQ(written, 99999);
  ASSERT_TRUE(ok(cuFileReadAsync(fh, dst.get(), &size, &file_off, &buf_off, &got, nullptr)));
  EXPECT_EQ(got, 99999);
  EXPECT_EQ(dst.bytes(1, 99999), std::vector<unsigned char>(bytes.begin() + 1, bytes.end()));
  // A failing I/O reports through *bytes_read_p.
  off_t bad_off = -1;
  ASSERT_TRUE(ok(cuFileReadAsync(fh, dst.get(), &size, &bad_off, &buf_off, &got, nullptr)));
  EXPECT_EQ(got, -CU_FILE_INVALID_VALUE);
  ASSERT_TRUE(ok(cuFileStreamDeregister(nullptr)));
  cuFileHandleDeregister(fh);
  ::close(fd);
}

TEST_F(CuFile, AsyncOnCudaStream) {
  if (!device_memory()) GTEST_SKIP() << "no CUDA streams without libcuda";
  const int fd = open_file(dir_.file("async.bin"), O_CREAT | O_RDWR);
  CUfileHandle_t fh = nullptr;
  ASSERT_TRUE(ok(register_fd(&fh, fd)));
  CUstream stream = Cuda::get().create_stream();
  ASSERT_NE(stream, nullptr);
  ASSERT_TRUE(ok(cuFileStreamRegister(stream, 0xF)));
  EXPECT_EQ(cuFileStreamRegister(stream, 0).err, CU_FILE_INVALID_VALUE);  // already registered
  Buffer src(262144, true), dst(262144, true);
  const auto bytes = random_bytes(262144, 5);
  src.fill(bytes);
  size_t size = 262144;
  off_t file_off = 0, buf_off = 0;
  ssize_t written = 0, got = 0;
  ASSERT_TRUE(ok(cuFileWriteAsync(fh, src.get(), &size, &file_off, &buf_off, &written, stream)));
  ASSERT_TRUE(ok(cuFileReadAsync(fh, dst.get(), &size, &file_off, &buf_off, &got, stream)));
  ASSERT_EQ(Cuda::get().synchronize(stream), 0);
  EXPECT_EQ(written, 262144);
  EXPECT_EQ(got, 262144);
  EXPECT_EQ(dst.bytes(0, 262144), bytes);
  ASSERT_TRUE(ok(cuFileStreamDeregister(stream)));
  EXPECT_EQ(cuFileStreamDeregister(stream).err, CU_FILE_INVALID_VALUE);
  Cuda::get().destroy_stream(stream);
  cuFileHandleDeregister(fh);
  ::close(fd);
}

TEST_F(CuFile, AsyncErrors) {
  const int fd = open_file(path_, O_RDONLY);
  CUfileHandle_t fh = nullptr;
  ASSERT_TRUE(ok(register_fd(&fh, fd)));
  Buffer buf(8192, device_memory());
  size_t size = 4096;
  off_t off = 0;
  ssize_t got = 0;
  EXPECT_EQ(cuFileReadAsync(fh, buf.get(), nullptr, &off, &off, &got, nullptr).err,
            CU_FILE_INVALID_VALUE);
  EXPECT_EQ(cuFileReadAsync(fh, buf.get(), &size, nullptr, &off, &got, nullptr).err,
            CU_FILE_INVALID_VALUE);
  EXPECT_EQ(cuFileReadAsync(fh, buf.get(), &size, &off, nullptr, &got, nullptr).err,
            CU_FILE_INVALID_VALUE);
  EXPECT_EQ(cuFileReadAsync(fh, buf.get(), &size, &off, &off, nullptr, nullptr).err,
            CU_FILE_INVALID_VALUE);
  EXPECT_EQ(cuFileWriteAsync(fh, nullptr, &size, &off, &off, &got, nullptr).err,
            CU_FILE_INVALID_VALUE);
  auto* unknown = reinterpret_cast<CUfileHandle_t>(static_cast<uintptr_t>(0xdead));
  EXPECT_EQ(cuFileReadAsync(unknown, buf.get(), &size, &off, &off, &got, nullptr).err,
            CU_FILE_HANDLE_NOT_REGISTERED);
  EXPECT_EQ(cuFileStreamRegister(nullptr, 0x10).err, CU_FILE_INVALID_VALUE);
  auto* not_registered = reinterpret_cast<CUstream>(static_cast<uintptr_t>(0x1234));
  EXPECT_EQ(cuFileStreamDeregister(not_registered).err, CU_FILE_INVALID_VALUE);
  if (!device_memory()) {
    // The simulated device has no streams a program could have made: only NULL is valid.
    EXPECT_EQ(cuFileStreamRegister(not_registered, 0).err, CU_FILE_INVALID_VALUE);
    EXPECT_EQ(cuFileReadAsync(fh, buf.get(), &size, &off, &off, &got, not_registered).err,
              CU_FILE_INVALID_VALUE);
  }
  cuFileHandleDeregister(fh);
  ::close(fd);
}

// ------------------------------------------------------------------ statistics and paths

TEST_F(CuFile, StatsCountCallsAndPaths) {
  EXPECT_EQ(cuFileSetStatsLevel(4).err, CU_FILE_INVALID_VALUE);
  EXPECT_EQ(cuFileGetStatsLevel(nullptr).err, CU_FILE_INVALID_VALUE);
  ASSERT_TRUE(ok(cuFileSetStatsLevel(0)));
  CUfileStatsLevel3_t s3;
  EXPECT_EQ(cuFileGetStatsL1(&s3.detailed.basic).err, CU_FILE_INVALID_VALUE);  // level 0: off
  ASSERT_TRUE(ok(cuFileSetStatsLevel(3)));
  int level = 0;
  ASSERT_TRUE(ok(cuFileGetStatsLevel(&level)));
  EXPECT_EQ(level, 3);
  EXPECT_EQ(cuFileGetStatsL3(nullptr).err, CU_FILE_INVALID_VALUE);
  ASSERT_TRUE(ok(cuFileStatsReset()));
  ASSERT_TRUE(ok(cuFileStatsStart()));

  const int fd = open_file(path_, O_RDONLY);
  CUfileHandle_t fh = nullptr;
  ASSERT_TRUE(ok(register_fd(&fh, fd)));
  Buffer buf(1 << 20, device_memory());
  ASSERT_EQ(cuFileRead(fh, buf.get(), 1 << 20, 0, 0), 1 << 20);  // aligned
  ASSERT_EQ(cuFileRead(fh, buf.get(), 5000, 3, 0), 5000);        // unaligned
  EXPECT_EQ(cuFileRead(fh, buf.get(), 4096, -1, 0), -CU_FILE_INVALID_VALUE);
  ASSERT_TRUE(ok(cuFileGetStatsL3(&s3)));
  const CUfileStatsLevel1_t& s1 = s3.detailed.basic;
  EXPECT_EQ(s1.read_ops.ok, 2U);
  EXPECT_EQ(s1.read_bytes, (1U << 20) + 5000U);
  EXPECT_EQ(s1.hdl_register_ops.ok, 1U);
  EXPECT_EQ(s3.detailed.read_size_kb_hist[9], 1U);  // 1024 KiB: [1024, 2048)
  EXPECT_EQ(s3.detailed.read_size_kb_hist[1], 1U);  // ~4.9 KiB: [4, 8)
  const CUfilePerGpuStats_t& g = s3.per_gpu_stats[0];
  EXPECT_EQ(s3.num_gpus, 1U);
  EXPECT_EQ(g.n_total_reads, 3U);
  EXPECT_EQ(g.n_reads_err, 1U);
  EXPECT_EQ(g.n_unaligned_reads, 1U);
  // Which path served the reads: host memory neither; device memory direct (nvfs) where the
  // fake cuFile serves aligned requests, else Sluice's bounce path (posix, cuFile's compat).
  if (mode() == "sim") {
    EXPECT_EQ(g.n_nvfs_reads + g.n_posix_reads, 0U);
  } else if (mode() == "fake_cufile") {
    EXPECT_EQ(g.n_nvfs_reads, 1U);
    EXPECT_EQ(g.n_posix_reads, 1U);
  } else {
    EXPECT_EQ(g.n_nvfs_reads, 0U);
    EXPECT_EQ(g.n_posix_reads, 2U);
  }
  ASSERT_TRUE(ok(cuFileStatsStop()));
  ASSERT_EQ(cuFileRead(fh, buf.get(), 4096, 0, 0), 4096);
  CUfileStatsLevel1_t after;
  ASSERT_TRUE(ok(cuFileGetStatsL1(&after)));
  EXPECT_EQ(after.read_ops.ok, 2U) << "stopped: not counted";
  ASSERT_TRUE(ok(cuFileStatsStart()));
  CUfileStatsLevel2_t s2;
  ASSERT_TRUE(ok(cuFileGetStatsL2(&s2)));
  ASSERT_TRUE(ok(cuFileSetStatsLevel(0)));
  cuFileHandleDeregister(fh);
  ::close(fd);
}

TEST_F(CuFile, FakeCuFileServesAlignedDeviceRequests) {
  if (mode() != "fake_cufile") GTEST_SKIP() << "needs the fake libcufile";
  void* fake = dlopen(std::getenv("SLUICE_LIBCUFILE"), RTLD_NOW | RTLD_NOLOAD);
  const int fd = open_file(path_, O_RDONLY);
  CUfileHandle_t fh = nullptr;
  ASSERT_TRUE(ok(register_fd(&fh, fd)));
  Buffer buf(1 << 20, true);
  ASSERT_EQ(cuFileRead(fh, buf.get(), 1 << 20, 0, 0), 1 << 20);
  EXPECT_EQ(buf.bytes(0, 1 << 20), data_);
  // The fake is loaded by now (by Sluice's direct path) and counted the read.
  if (fake == nullptr) fake = dlopen(std::getenv("SLUICE_LIBCUFILE"), RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(fake, nullptr);
  uint64_t (*bytes_read)() = nullptr;
  void* sym = dlsym(fake, "fake_cufile_bytes_read");
  std::memcpy(&bytes_read, &sym, sizeof bytes_read);
  ASSERT_NE(bytes_read, nullptr);
  EXPECT_GE(bytes_read(), 1U << 20);
  dlclose(fake);
  cuFileHandleDeregister(fh);
  ::close(fd);
}

// ------------------------------------------------------------------ CUDA 13.4 / GDS 1.17-1.19

// cuFileReadv/cuFileWritev against the file's bytes: one file range from and to many buffers of any
// size and alignment (buffers at odd offsets of their allocations, segments of 1 byte to many
// requests), short at the end of the file, and the errors of the scalar calls.
TEST_F(CuFile, ReadvWritevMatchPreadAndPwrite) {
  const int fd = open_file(path_, O_RDWR);
  ASSERT_GE(fd, 0);
  CUfileHandle_t fh = nullptr;
  ASSERT_TRUE(ok(register_fd(&fh, fd)));
  const std::vector<size_t> lens = {4096, 1, 70001, 0, 4093, 262144, 17, 300000};
  std::vector<std::unique_ptr<Buffer>> bufs;
  std::vector<CUfileIOVec_t> iov;
  size_t total = 0;
  for (size_t i = 0; i < lens.size(); ++i) {
    bufs.push_back(std::make_unique<Buffer>(lens[i] + 64, device_memory()));
    iov.push_back({static_cast<char*>(bufs.back()->get()) + (i * 13) % 64, lens[i]});
    total += lens[i];
  }
  const off_t at = 12345;
  ASSERT_EQ(cuFileReadv(fh, iov.data(), iov.size(), at, 0), static_cast<ssize_t>(total));
  size_t pos = static_cast<size_t>(at);
  for (size_t i = 0; i < lens.size(); ++i) {
    SCOPED_TRACE(i);
    const size_t off = (i * 13) % 64;
    if (lens[i] == 0) continue;
    EXPECT_EQ(bufs[i]->bytes(off, lens[i]),
              std::vector<unsigned char>(data_.begin() + static_cast<long>(pos),
                                         data_.begin() + static_cast<long>(pos + lens[i])));
    pos += lens[i];
  }
  // Writev: fresh bytes into the buffers, written as one range, read back with pread.
  std::vector<unsigned char> fresh = random_bytes(total, 11);
  size_t k = 0;
  for (size_t i = 0; i < lens.size(); ++i) {
    if (lens[i] == 0) continue;
    bufs[i]->fill(std::vector<unsigned char>(fresh.begin() + static_cast<long>(k),
                                             fresh.begin() + static_cast<long>(k + lens[i])),
                  (i * 13) % 64);
    k += lens[i];
  }
  ASSERT_EQ(cuFileWritev(fh, iov.data(), iov.size(), 4096, 0), static_cast<ssize_t>(total));
  const auto file = read_file(path_);
  EXPECT_EQ(std::vector<unsigned char>(file.begin() + 4096, file.begin() + 4096 + static_cast<long>(total)),
            fresh);
  // At the end of the file: short, and the later segments move nothing.
  const auto end = static_cast<off_t>(file.size());
  EXPECT_EQ(cuFileReadv(fh, iov.data(), iov.size(), end - 5000, 0), 5000);
  EXPECT_EQ(cuFileReadv(fh, iov.data(), iov.size(), end, 0), 0);
  EXPECT_EQ(cuFileReadv(fh, iov.data(), 0, 0, 0), 0);
  // The errors of the scalar calls.
  EXPECT_EQ(cuFileReadv(fh, iov.data(), iov.size(), 0, 1), -CU_FILE_INVALID_VALUE);  // flags
  EXPECT_EQ(cuFileReadv(fh, nullptr, 2, 0, 0), -CU_FILE_INVALID_VALUE);
  EXPECT_EQ(cuFileReadv(fh, iov.data(), iov.size(), -1, 0), -CU_FILE_INVALID_VALUE);
  CUfileIOVec_t bad[2] = {iov[0], {nullptr, 4096}};
  EXPECT_EQ(cuFileReadv(fh, bad, 2, 0, 0), -CU_FILE_INVALID_VALUE);
  auto* unknown = reinterpret_cast<CUfileHandle_t>(static_cast<uintptr_t>(0xdead));
  EXPECT_EQ(cuFileReadv(unknown, iov.data(), iov.size(), 0, 0), -CU_FILE_HANDLE_NOT_REGISTERED);
  cuFileHandleDeregister(fh);
  const int ro = open_file(path_, O_RDONLY);
  ASSERT_TRUE(ok(register_fd(&fh, ro)));
  errno = 0;
  EXPECT_EQ(cuFileWritev(fh, iov.data(), iov.size(), 0, 0), -1);  // read-only descriptor
  EXPECT_EQ(errno, EBADF);
  cuFileHandleDeregister(fh);
  ::close(ro);
  ::close(fd);
}

// CUDA 13.4's statistics count the vectored calls apart from cuFileRead/cuFileWrite.
TEST_F(CuFile, StatsCountVectoredCallsApart) {
  const int fd = open_file(path_, O_RDONLY);
  CUfileHandle_t fh = nullptr;
  ASSERT_TRUE(ok(register_fd(&fh, fd)));
  ASSERT_TRUE(ok(cuFileSetStatsLevel(1)));
  ASSERT_TRUE(ok(cuFileStatsReset()));
  Buffer a(8192, device_memory()), b(8192, device_memory());
  CUfileIOVec_t iov[2] = {{a.get(), 8192}, {b.get(), 4096}};
  ASSERT_EQ(cuFileReadv(fh, iov, 2, 0, 0), 12288);
  ASSERT_EQ(cuFileReadv(fh, iov, 2, 0, 0), 12288);
  EXPECT_EQ(cuFileReadv(fh, iov, 2, -1, 0), -CU_FILE_INVALID_VALUE);
  CUfileStatsLevel1_t s{};
  ASSERT_TRUE(ok(cuFileGetStatsL1(&s)));
  EXPECT_EQ(s.readv_ops.ok, 2U);
  EXPECT_EQ(s.readv_ops.err, 1U);
  EXPECT_EQ(s.readv_bytes, 2U * 12288);
  EXPECT_EQ(s.read_ops.ok, 0U) << "readv counts apart from read";
  EXPECT_EQ(s.writev_ops.ok, 0U);
  ASSERT_TRUE(ok(cuFileSetStatsLevel(0)));
  cuFileHandleDeregister(fh);
  ::close(fd);
}

// GDS 1.17's GPU bounce-buffer slabs: set before the open, read back as set, and shaping the
// staging the properties report; refused once open and for malformed arrays.
TEST(Driver, GpuBounceBufferSlabArray) {
  close_driver_completely();
  size_t sizes[8] = {}, counts[8] = {};
  ASSERT_TRUE(ok(cuFileGetParameterGpuBounceBufferSlabArray(sizes, counts, 8)));
  EXPECT_GT(sizes[0], 0U) << "Sluice's uniform staging, as one slab";
  const size_t new_sizes[3] = {1024, 4096, 16384}, new_counts[3] = {16, 4, 2};
  ASSERT_TRUE(ok(cuFileSetParameterGpuBounceBufferSlabArray(new_sizes, new_counts, 3)));
  ASSERT_TRUE(ok(cuFileGetParameterGpuBounceBufferSlabArray(sizes, counts, 3)));
  EXPECT_EQ(std::vector<size_t>(sizes, sizes + 3), std::vector<size_t>({1024, 4096, 16384}));
  EXPECT_EQ(std::vector<size_t>(counts, counts + 3), std::vector<size_t>({16, 4, 2}));
  EXPECT_EQ(cuFileGetParameterGpuBounceBufferSlabArray(sizes, counts, 2).err,
            CU_FILE_INVALID_VALUE);
  const size_t zero[1] = {0};
  EXPECT_EQ(cuFileSetParameterGpuBounceBufferSlabArray(zero, new_counts, 1).err,
            CU_FILE_INVALID_VALUE);
  EXPECT_EQ(cuFileSetParameterGpuBounceBufferSlabArray(new_sizes, new_counts, 9).err,
            CU_FILE_INVALID_VALUE);
  CUfileDrvProps_t p;
  ASSERT_TRUE(ok(cuFileDriverGetProperties(&p)));  // opens
  EXPECT_EQ(p.max_device_cache_size, 16U * 1024 + 4 * 4096 + 2 * 16384);
  EXPECT_EQ(p.per_buffer_cache_size, 16384U);
  EXPECT_EQ(cuFileSetParameterGpuBounceBufferSlabArray(new_sizes, new_counts, 3).err,
            CU_FILE_DRIVER_ALREADY_OPEN);
  // The staging works: a read into device or host memory through it.
  TempDir dir;
  const auto bytes = random_bytes(3 << 20, 21);
  write_file(dir.file("slabs.bin"), bytes);
  const int fd = open_file(dir.file("slabs.bin"), O_RDONLY);
  CUfileHandle_t fh = nullptr;
  ASSERT_TRUE(ok(register_fd(&fh, fd)));
  Buffer buf(3 << 20, device_memory());
  ASSERT_EQ(cuFileRead(fh, buf.get(), 3 << 20, 0, 0), 3 << 20);
  EXPECT_EQ(buf.bytes(0, 3 << 20), bytes);
  cuFileHandleDeregister(fh);
  ::close(fd);
  close_driver_completely();
}

// NVIDIA's sample 007 sets a 64 KiB cache: the smallest staging that works serves it, for
// unaligned and many-chunk requests alike.
TEST(Driver, SixtyFourKiBCacheWorks) {
  close_driver_completely();
  CUfileDrvProps_t before;
  ASSERT_TRUE(ok(cuFileDriverGetProperties(&before)));
  close_driver_completely();
  ASSERT_TRUE(ok(cuFileDriverSetMaxCacheSize(64)));
  ASSERT_TRUE(ok(cuFileDriverOpen()));
  TempDir dir;
  const auto bytes = random_bytes((1 << 20) + 777, 23);
  write_file(dir.file("small-cache.bin"), bytes);
  const int fd = open_file(dir.file("small-cache.bin"), O_RDONLY);
  CUfileHandle_t fh = nullptr;
  ASSERT_TRUE(ok(register_fd(&fh, fd)));
  Buffer buf(bytes.size() + 4096, device_memory());
  ASSERT_EQ(cuFileRead(fh, buf.get(), bytes.size(), 0, 3), static_cast<ssize_t>(bytes.size()));
  EXPECT_EQ(buf.bytes(3, bytes.size()), bytes);
  cuFileHandleDeregister(fh);
  ::close(fd);
  close_driver_completely();
  // A larger cache afterwards gets the staging buffers of before back, not 64 KiB ones.
  ASSERT_TRUE(ok(cuFileDriverSetMaxCacheSize(before.max_device_cache_size)));
  CUfileDrvProps_t after;
  ASSERT_TRUE(ok(cuFileDriverGetProperties(&after)));
  EXPECT_EQ(after.max_device_cache_size, before.max_device_cache_size);
  EXPECT_EQ(after.per_buffer_cache_size, before.per_buffer_cache_size);
  size_t staging_kb = 0;
  ASSERT_TRUE(
      ok(cuFileGetParameterSizeT(CUFILE_PARAM_PROPERTIES_PER_BUFFER_CACHE_SIZE_KB, &staging_kb)));
  EXPECT_EQ(staging_kb, before.per_buffer_cache_size);
  close_driver_completely();
}

// A user-space file system (CU_FILE_HANDLE_TYPE_USERSPACE_FS): its CUfileFSOps_t read and write
// move the bytes, for host and device buffers, through the sync, vectored and batch calls; short
// reads at its end of file, its errors as -1 with errno, and a missing operation refused.
struct MemoryFs {
  std::vector<char> bytes;
  int calls = 0;
  int fail_errno = 0;
};
ssize_t memfs_read(const void* h, char* buf, size_t n, sluice_cufile_loff_t off,
                   const cufileRDMAInfo_t* rdma) {
  auto* fs = static_cast<MemoryFs*>(const_cast<void*>(h));
  ++fs->calls;
  if (rdma == nullptr || rdma->desc_len != 0) return -EFAULT;  // Sluice passes "no RDMA"
  if (fs->fail_errno != 0) return -fs->fail_errno;
  if (off >= static_cast<sluice_cufile_loff_t>(fs->bytes.size())) return 0;
  // At most 100000 bytes a call: Sluice must call again for the rest, as pread would be.
  n = std::min({n, fs->bytes.size() - static_cast<size_t>(off), size_t{100000}});
  std::memcpy(buf, fs->bytes.data() + off, n);
  return static_cast<ssize_t>(n);
}
ssize_t memfs_write(const void* h, const char* buf, size_t n, sluice_cufile_loff_t off,
                    const cufileRDMAInfo_t*) {
  auto* fs = static_cast<MemoryFs*>(const_cast<void*>(h));
  ++fs->calls;
  if (fs->bytes.size() < static_cast<size_t>(off) + n) fs->bytes.resize(static_cast<size_t>(off) + n);
  std::memcpy(fs->bytes.data() + off, buf, n);
  return static_cast<ssize_t>(n);
}
const char* memfs_type(const void*) {
  return "memfs";
}

TEST_F(CuFile, UserSpaceFileSystem) {
  MemoryFs fs;
  const auto src = random_bytes(700001, 31);
  fs.bytes.assign(src.begin(), src.end());
  CUfileFSOps_t ops{};
  ops.fs_type = memfs_type;
  ops.read = memfs_read;
  ops.write = memfs_write;
  CUfileDescr_t d;
  std::memset(&d, 0, sizeof d);
  d.type = CU_FILE_HANDLE_TYPE_USERSPACE_FS;
  d.handle.handle = &fs;
  d.fs_ops = &ops;
  CUfileHandle_t fh = nullptr;
  ASSERT_TRUE(ok(cuFileHandleRegister(&fh, &d)));
  Buffer buf(1 << 20, device_memory());
  ASSERT_EQ(cuFileRead(fh, buf.get(), 600000, 12345, 7), 600000);
  EXPECT_EQ(buf.bytes(7, 600000), std::vector<unsigned char>(src.begin() + 12345, src.begin() + 612345));
  EXPECT_GE(fs.calls, 6) << "100000 bytes a call: called again for the rest";
  EXPECT_EQ(cuFileRead(fh, buf.get(), 4096, 700000, 0), 1);  // short at its end of file
  EXPECT_EQ(cuFileRead(fh, buf.get(), 4096, 800000, 0), 0);
  const auto fresh = random_bytes(5000000, 32);  // more than one staging chunk
  Buffer big(fresh.size(), device_memory());
  big.fill(fresh);
  ASSERT_EQ(cuFileWrite(fh, big.get(), fresh.size(), 100, 0), static_cast<ssize_t>(fresh.size()));
  EXPECT_EQ(std::vector<unsigned char>(fs.bytes.begin() + 100, fs.bytes.end()), fresh);
  CUfileIOVec_t iov[2] = {{buf.get(), 4096}, {static_cast<char*>(buf.get()) + 8192, 3}};
  ASSERT_EQ(cuFileReadv(fh, iov, 2, 200, 0), 4099);
  EXPECT_EQ(buf.bytes(8192, 3), std::vector<unsigned char>(fresh.begin() + 4196, fresh.begin() + 4199));
  fs.fail_errno = EIO;
  errno = 0;
  EXPECT_EQ(cuFileRead(fh, buf.get(), 4096, 0, 0), -1);
  EXPECT_EQ(errno, EIO);
  cuFileHandleDeregister(fh);
  ops.write = nullptr;  // read-only: a write is not supported
  fs.fail_errno = 0;
  ASSERT_TRUE(ok(cuFileHandleRegister(&fh, &d)));
  EXPECT_EQ(cuFileWrite(fh, buf.get(), 4096, 0, 0), -CU_FILE_IO_NOT_SUPPORTED);
  cuFileHandleDeregister(fh);
  ops.read = nullptr;  // neither operation: nothing to register
  EXPECT_EQ(cuFileHandleRegister(&fh, &d).err, CU_FILE_INVALID_VALUE);
}

// The statistics layout: 13.4's by default; with SLUICE_CUFILE_STATS_ABI=13.3 (the
// cufile.stats_abi_13_3 entry), nothing past 13.3's struct sizes is written, and L2/L3's parts
// sit at 13.3's offsets.
TEST(Stats, LayoutFollowsTheSetting) {
  const char* abi = std::getenv("SLUICE_CUFILE_STATS_ABI");
  const bool old = abi != nullptr && std::string(abi) == "13.3";
  ASSERT_TRUE(ok(cuFileSetStatsLevel(3)));
  std::vector<unsigned char> l1(sizeof(CUfileStatsLevel1_t), 0xAB);
  ASSERT_TRUE(ok(cuFileGetStatsL1(reinterpret_cast<CUfileStatsLevel1_t*>(l1.data()))));
  const auto untouched = [](const std::vector<unsigned char>& v, size_t from) {
    return std::all_of(v.begin() + static_cast<long>(from), v.end(),
                       [](unsigned char c) { return c == 0xAB; });
  };
  EXPECT_EQ(untouched(l1, 512), old) << "bytes 512..623 of L1";
  EXPECT_FALSE(untouched(l1, 504)) << "13.3's last field is written in both layouts";
  auto l3 = std::make_unique<std::array<unsigned char, sizeof(CUfileStatsLevel3_t)>>();
  l3->fill(0xAB);
  ASSERT_TRUE(ok(cuFileGetStatsL3(reinterpret_cast<CUfileStatsLevel3_t*>(l3->data()))));
  uint32_t gpus = 0;
  std::memcpy(&gpus, l3->data() + (old ? 1024 : 1136), sizeof gpus);
  EXPECT_EQ(gpus, 1U) << "num_gpus at " << (old ? 1024 : 1136);
  const bool tail_untouched = std::all_of(l3->begin() + 5000, l3->end(),
                                          [](unsigned char c) { return c == 0xAB; });
  EXPECT_EQ(tail_untouched, old) << "bytes 5000..5111 of L3";
  ASSERT_TRUE(ok(cuFileSetStatsLevel(0)));
}

TEST(Driver, ExportPCIeTopology) {
  close_driver_completely();  // gdscheck exports without opening the driver
  TempDir dir;
  const std::string out = dir.file("topology.json");
  EXPECT_EQ(cuFileExportPCIeTopology(nullptr).err, CU_FILE_INVALID_VALUE);
  ASSERT_TRUE(ok(cuFileExportPCIeTopology(out.c_str())));
  const auto text = read_file(out);
  const std::string json(text.begin(), text.end());
  EXPECT_NE(json.find("\"gpus\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"nvme\""), std::string::npos) << json;
  if (device_memory()) {
    EXPECT_NE(json.find("\"0000:17:00.0\""), std::string::npos) << "the fake GPU: " << json;
  }
  EXPECT_EQ(cuFileExportPCIeTopology(dir.file("no-such-dir/t.json").c_str()).err,
            CU_FILE_INVALID_VALUE);
}

}  // namespace
}  // namespace cufile_test
