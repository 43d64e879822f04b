// One failure, one code: cuFileRead/cuFileWrite, a batch entry and cuFileReadAsync/WriteAsync
// report the same failure with the same code, each in its API's convention (docs/errors.md):
//   cuFileRead/Write     -CUfileOpError, or -1 with errno
//   batch                Submit's status for what it checks up front, else the event's
//                        -CUfileOpError or -errno
//   ReadAsync/WriteAsync the call's status for what it checks up front, else *bytes_p:
//                        -CUfileOpError, or -1 (an OS error: the stream has no errno to set)
// Written as a cuFile user would, against <cufile.h> only. With SLUICE_FAULTS set (the
// cufile.entry_points.faults entry: every read fails with EIO), the injected EIO must come out
// of every entry point the same way too.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>
#include <vector>

#include "cufile_test_util.hpp"

namespace cufile_test {
namespace {

constexpr int kErrnoLost = -1;  // the stream API's -1: an OS error, errno not reported

struct Request {
  bool write = false;
  CUfileHandle_t fh = nullptr;
  void* base = nullptr;
  size_t size = 4096;
  off_t file_offset = 0;
  off_t buf_offset = 0;
};

// Each returns 0 for success, else the CUfileOpError or errno the entry point reported.
int via_sync(const Request& r) {
  errno = 0;
  const ssize_t n = r.write ? cuFileWrite(r.fh, r.base, r.size, r.file_offset, r.buf_offset)
                            : cuFileRead(r.fh, r.base, r.size, r.file_offset, r.buf_offset);
  if (n >= 0) return 0;
  return n == -1 ? errno : static_cast<int>(-n);
}

int via_batch(const Request& r) {
  CUfileBatchHandle_t batch = nullptr;
  if (cuFileBatchIOSetUp(&batch, 1).err != CU_FILE_SUCCESS) {
    ADD_FAILURE() << "cuFileBatchIOSetUp failed";
    return 0;
  }
  CUfileIOParams_t p;
  std::memset(&p, 0, sizeof p);
  p.mode = CUFILE_BATCH;
  p.fh = r.fh;
  p.opcode = r.write ? CUFILE_WRITE : CUFILE_READ;
  p.u.batch.devPtr_base = r.base;
  p.u.batch.size = r.size;
  p.u.batch.file_offset = r.file_offset;
  p.u.batch.devPtr_offset = r.buf_offset;
  int code = 0;
  if (const CUfileError_t st = cuFileBatchIOSubmit(batch, 1, &p, 0); st.err != CU_FILE_SUCCESS) {
    code = st.err;
  } else {
    CUfileIOEvents_t ev{};
    unsigned nr = 1;
    EXPECT_EQ(cuFileBatchIOGetStatus(batch, 1, &nr, &ev, nullptr).err, CU_FILE_SUCCESS);
    EXPECT_EQ(nr, 1U);
    if (ev.status == CUFILE_FAILED) code = static_cast<int>(-static_cast<ssize_t>(ev.ret));
  }
  cuFileBatchIODestroy(batch);
  return code;
}

int via_async(const Request& r) {
  size_t size = r.size;
  off_t file_offset = r.file_offset;
  off_t buf_offset = r.buf_offset;
  ssize_t bytes = 0;
  const CUfileError_t st =
      r.write ? cuFileWriteAsync(r.fh, r.base, &size, &file_offset, &buf_offset, &bytes, nullptr)
              : cuFileReadAsync(r.fh, r.base, &size, &file_offset, &buf_offset, &bytes, nullptr);
  if (st.err != CU_FILE_SUCCESS) return st.err;
  if (bytes >= 0) return 0;
  return bytes == -1 ? kErrnoLost : static_cast<int>(-bytes);
}

class EntryPoints : public ::testing::Test {
 protected:
  void SetUp() override {
    if (device_memory()) {
      ASSERT_TRUE(Cuda::get().ok()) << "mode " << mode() << " needs libcuda.so.1";
    }
    Cuda::get().bind();
    ASSERT_EQ(cuFileDriverOpen().err, CU_FILE_SUCCESS);
    path_ = dir_.file("data.bin");
    write_file(path_, random_bytes(1 << 20, 11));
    fd_ = open_file(path_, O_RDONLY);
    ASSERT_GE(fd_, 0);
    ASSERT_EQ(register_fd(&fh_, fd_).err, CU_FILE_SUCCESS);
  }
  void TearDown() override {
    cuFileHandleDeregister(fh_);
    ::close(fd_);
    EXPECT_EQ(cuFileDriverClose().err, CU_FILE_SUCCESS);
  }

  // Runs `r` through every entry point: an OS error is `code` as an errno (async: kErrnoLost).
  static void expect_everywhere(const Request& r, int code, bool os_error) {
    EXPECT_EQ(via_sync(r), code) << "cuFileRead/Write";
    EXPECT_EQ(via_batch(r), code) << "batch";
    EXPECT_EQ(via_async(r), os_error ? kErrnoLost : code) << "ReadAsync/WriteAsync";
  }

  TempDir dir_;
  std::string path_;
  int fd_ = -1;
  CUfileHandle_t fh_ = nullptr;
};

TEST_F(EntryPoints, SameFailureSameCode) {
  if (std::getenv("SLUICE_FAULTS") != nullptr) GTEST_SKIP() << "every read fails here";
  Buffer buf(65536, device_memory());
  Request ok_read{.fh = fh_, .base = buf.get()};
  {
    SCOPED_TRACE("a good read succeeds everywhere");
    expect_everywhere(ok_read, 0, false);
  }
  {
    SCOPED_TRACE("unregistered handle");
    Request r = ok_read;
    r.fh = reinterpret_cast<CUfileHandle_t>(static_cast<uintptr_t>(0xdead));
    expect_everywhere(r, CU_FILE_HANDLE_NOT_REGISTERED, false);
  }
  {
    SCOPED_TRACE("null buffer");
    Request r = ok_read;
    r.base = nullptr;
    expect_everywhere(r, CU_FILE_INVALID_VALUE, false);
  }
  {
    SCOPED_TRACE("negative file offset");
    Request r = ok_read;
    r.file_offset = -4096;
    expect_everywhere(r, CU_FILE_INVALID_VALUE, false);
  }
  {
    SCOPED_TRACE("past the registered length");
    ASSERT_EQ(cuFileBufRegister(buf.get(), 8192, 0).err, CU_FILE_SUCCESS);
    Request r = ok_read;
    r.size = 8192;
    r.buf_offset = 4096;
    expect_everywhere(r, CU_FILE_INVALID_MAPPING_RANGE, false);
    ASSERT_EQ(cuFileBufDeregister(buf.get()).err, CU_FILE_SUCCESS);
  }
  {
    SCOPED_TRACE("write through a read-only descriptor");
    Request r = ok_read;
    r.write = true;
    expect_everywhere(r, EBADF, true);
  }
}

TEST_F(EntryPoints, InjectedEioIsTheSameEverywhere) {
  if (std::getenv("SLUICE_FAULTS") == nullptr)
    GTEST_SKIP() << "needs SLUICE_FAULTS=eio=1,only=read";
  Buffer buf(65536, device_memory());
  expect_everywhere({.fh = fh_, .base = buf.get()}, EIO, true);
}

}  // namespace
}  // namespace cufile_test
