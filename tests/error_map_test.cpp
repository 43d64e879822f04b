// The one error mapper (sluice/internal/cufile_errors.hpp, Error::errno_value): every cuFile code, every
// CUDA result Sluice names and the errno values it gives a meaning, in both directions.
//
// The expected values are written here from NVIDIA's cufile.h / cuda.h and Linux's errno list
// (literals, not the mapper's constants), so a wrong row in the mapper's table fails.
#include <gtest/gtest.h>

#include <cerrno>
#include <set>

#include "sluice/error.hpp"
#include "sluice/internal/cufile_errors.hpp"

namespace sluice {
namespace {

constexpr int kCudaDriverError = 5011;  // CU_FILE_CUDA_DRIVER_ERROR
constexpr int kDeviceNotFound = 5029;   // CU_FILE_DEVICE_NOT_FOUND
constexpr int kInvalidValue = 5022;     // CU_FILE_INVALID_VALUE
constexpr int kIoError = 5044;          // CU_FILE_IO_ERROR

struct CuFileRow {
  int code;         // CUfileOpError, as NVIDIA's cufile.h numbers it
  int errno_value;  // what Error::errno_value() says for it
  bool capability;  // "not this way": path auto falls back to bounce
};

// Every CUfileOpError NVIDIA defines (5021 and 5032 are unused; 5050 is the sentinel).
constexpr CuFileRow kCuFile[] = {
    {5001, EOPNOTSUPP, true}, {5002, EINVAL, false},     {5003, EINVAL, false},
    {5004, EIO, false},       {5005, EIO, false},        {5006, ESHUTDOWN, false},
    {5007, EOPNOTSUPP, true}, {5008, EOPNOTSUPP, true},  {5009, EOPNOTSUPP, true},
    {5010, EIO, true},        {5011, EIO, false},        {5012, EFAULT, true},
    {5013, EFAULT, true},     {5014, EFAULT, true},      {5015, EINVAL, false},
    {5016, EFAULT, true},     {5017, EFAULT, true},      {5018, EINVAL, false},
    {5019, EINVAL, false},    {5020, EOPNOTSUPP, true},  {5022, EINVAL, false},
    {5023, EINVAL, false},    {5024, EINVAL, false},     {5025, EACCES, false},
    {5026, EALREADY, false},  {5027, EBADF, false},      {5028, EEXIST, false},
    {5029, ENODEV, false},    {5030, EIO, false},        {5031, EIO, false},
    {5033, EIO, false},       {5034, EOPNOTSUPP, true},  {5035, EIO, false},
    {5036, ENOMEM, true},     {5037, EAGAIN, false},     {5038, EOPNOTSUPP, false},
    {5039, EAGAIN, false},    {5040, EAGAIN, false},     {5041, EAGAIN, false},
    {5042, EAGAIN, false},    {5043, ENOMEM, true},      {5044, EIO, false},
    {5045, EIO, false},       {5046, EIO, false},        {5047, EINVAL, false},
    {5048, EIO, false},       {5049, EOPNOTSUPP, false},
};

TEST(ErrorMap, TheCuFileTableCoversEveryCode) {
  std::set<int> seen;
  for (const CuFileRow& r : kCuFile) seen.insert(r.code);
  for (int code = 5001; code <= 5049; ++code) {
    if (code == 5021 || code == 5032) continue;
    EXPECT_EQ(seen.count(code), 1U) << code;
  }
  EXPECT_EQ(seen.size(), 47U);
}

TEST(ErrorMap, EveryCuFileCodeRoundTrips) {
  for (const CuFileRow& r : kCuFile) {
    SCOPED_TRACE(r.code);
    // A control call's status -> Error -> status.
    const Error e = from_cufile_status({r.code, 0}, {.op = "cuFileBufRegister"});
    EXPECT_EQ(e.domain(), ErrorDomain::cufile);
    EXPECT_EQ(e.code(), r.code);
    EXPECT_EQ(e.errno_value(), r.errno_value);
    EXPECT_EQ(to_errno(e), r.errno_value);
    EXPECT_EQ(to_cufile_status(e), (CuFileStatus{r.code, 0}));
    // cuFileRead's -CUfileOpError -> Error -> the same return.
    const Error io = from_cufile_result(
        -r.code, 0, {.op = "read", .path = "f", .offset = 8192, .size = 4096, .has_range = true});
    EXPECT_EQ(io.code(), r.code);
    int err_no = -1;
    EXPECT_EQ(to_cufile_result(io, &err_no), -r.code);
    EXPECT_EQ(err_no, 0);
    EXPECT_EQ(is_cufile_capability_error(r.code), r.capability);
    EXPECT_EQ(is_cufile_capability_error(-r.code), r.capability);
  }
  EXPECT_FALSE(is_cufile_capability_error(0));
}

struct CudaRow {
  int result;  // CUresult, as NVIDIA's cuda.h numbers it
  int errno_value;
  CuFileStatus status;  // what a cuFile control call returns for it
};

constexpr CudaRow kCuda[] = {
    {1, EINVAL, {kCudaDriverError, 1}},   // CUDA_ERROR_INVALID_VALUE
    {2, ENOMEM, {kCudaDriverError, 2}},   // CUDA_ERROR_OUT_OF_MEMORY
    {3, ENODEV, {kCudaDriverError, 3}},   // CUDA_ERROR_NOT_INITIALIZED
    {100, ENODEV, {kDeviceNotFound, 0}},  // CUDA_ERROR_NO_DEVICE
    {101, ENODEV, {kDeviceNotFound, 0}},  // CUDA_ERROR_INVALID_DEVICE
    {201, EIO, {kCudaDriverError, 201}},  // CUDA_ERROR_INVALID_CONTEXT
    {400, EIO, {kCudaDriverError, 400}},  // CUDA_ERROR_INVALID_HANDLE
    {500, EIO, {kCudaDriverError, 500}},  // CUDA_ERROR_NOT_FOUND
    {600, EIO, {kCudaDriverError, 600}},  // CUDA_ERROR_NOT_READY
    {712, EIO, {kCudaDriverError, 712}},  // CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED
    {713, EIO, {kCudaDriverError, 713}},  // CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED
    {999, EIO, {kCudaDriverError, 999}},  // CUDA_ERROR_UNKNOWN
};

TEST(ErrorMap, CudaResults) {
  for (const CudaRow& r : kCuda) {
    SCOPED_TRACE(r.result);
    const Error e(ErrorDomain::cuda, r.result, {.op = "cuMemAlloc"});
    EXPECT_EQ(e.errno_value(), r.errno_value);
    EXPECT_EQ(to_cufile_status(e), r.status);
    // cuFileRead has no room for the CUresult: the cuFile code alone.
    int err_no = -1;
    EXPECT_EQ(to_cufile_result(e, &err_no), -r.status.err);
    EXPECT_EQ(err_no, 0);
    // And back: CU_FILE_CUDA_DRIVER_ERROR with its CUresult is that CUDA error again.
    const Error back = from_cufile_status(r.status, {.op = "cuFileDriverOpen"});
    if (r.status.err == kCudaDriverError) {
      EXPECT_EQ(back.domain(), ErrorDomain::cuda);
      EXPECT_EQ(back.code(), r.result);
    } else {
      EXPECT_EQ(back.domain(), ErrorDomain::cufile);
      EXPECT_EQ(back.code(), kDeviceNotFound);
    }
    EXPECT_EQ(to_cufile_status(back), r.status);
  }
  // CU_FILE_CUDA_DRIVER_ERROR without a CUresult (as cuFileRead reports it) stays a cuFile error.
  const Error bare = from_cufile_status({kCudaDriverError, 0}, {.op = "x"});
  EXPECT_EQ(bare.domain(), ErrorDomain::cufile);
  EXPECT_EQ(bare.code(), kCudaDriverError);
}

struct OsRow {
  int errno_value;
  int status;  // the CUfileOpError a control call gives for it
};

constexpr OsRow kOs[] = {
    {EINVAL, kInvalidValue},   {ENOMEM, 5043},     {EACCES, 5025},     {EPERM, 5025},
    {ENODEV, kDeviceNotFound}, {EOPNOTSUPP, 5008}, {ENOSYS, 5008},     {EIO, kIoError},
    {ENOSPC, kIoError},        {EBADF, kIoError},  {ENOENT, kIoError},
};

TEST(ErrorMap, OsErrors) {
  for (const OsRow& r : kOs) {
    SCOPED_TRACE(r.errno_value);
    const Error e(ErrorDomain::os, r.errno_value, {.op = "read"});
    EXPECT_EQ(e.errno_value(), r.errno_value);
    EXPECT_EQ(to_cufile_status(e), (CuFileStatus{r.status, 0}));
    // The data path keeps the errno itself: -1 with errno, as pread(2) would.
    int err_no = 0;
    EXPECT_EQ(to_cufile_result(e, &err_no), -1);
    EXPECT_EQ(err_no, r.errno_value);
    const Error back = from_cufile_result(-1, err_no, {.op = "read"});
    EXPECT_EQ(back.domain(), ErrorDomain::os);
    EXPECT_EQ(back.code(), r.errno_value);
  }
  // A -1 whose errno got lost is still an I/O error, never success.
  EXPECT_EQ(from_cufile_result(-1, 0, {.op = "read"}).errno_value(), EIO);
}

TEST(ErrorMap, UsageErrorsAreEinvalEverywhere) {
  // Whatever code a caller hands in, a usage error carries EINVAL.
  for (const int given : {0, EINVAL, EIO}) {
    const Error e(ErrorDomain::usage, given, {.op = "read"}, "null buffer");
    EXPECT_EQ(e.code(), EINVAL);
    EXPECT_EQ(e.errno_value(), EINVAL);
    EXPECT_EQ(to_cufile_status(e), (CuFileStatus{kInvalidValue, 0}));
    int err_no = -1;
    EXPECT_EQ(to_cufile_result(e, &err_no), -kInvalidValue);
    EXPECT_EQ(err_no, 0);
  }
}

TEST(ErrorMap, DataErrorsAreIoErrorsWithTheirErrno) {
  const Error truncated(ErrorDomain::data, 0, {.op = "read"}, "file ended early");
  EXPECT_EQ(truncated.code(), EIO);  // no errno given: EIO
  EXPECT_EQ(truncated.errno_value(), EIO);
  const Error malformed(ErrorDomain::data, EINVAL, {.op = "safetensors header"}, "bad JSON");
  EXPECT_EQ(malformed.errno_value(), EINVAL);
  EXPECT_EQ(to_cufile_status(malformed), (CuFileStatus{kIoError, 0}));
  int err_no = 0;
  EXPECT_EQ(to_cufile_result(truncated, &err_no), -1);
  EXPECT_EQ(err_no, EIO);
}

TEST(ErrorMap, ErrorExposesWhatPythonsOSErrorNeeds) {
  const Error e = from_cufile_result(-1, ENOSPC,
                                     {.op = "write",
                                      .path = "/data/ckpt.bin",
                                      .offset = 1 << 20,
                                      .size = 65536,
                                      .has_range = true});
  EXPECT_EQ(e.errno_value(), ENOSPC);
  EXPECT_EQ(e.path(), "/data/ckpt.bin");
  EXPECT_TRUE(e.has_range());
  EXPECT_EQ(e.offset(), 1U << 20);
  EXPECT_EQ(e.length(), 65536U);
  const Error open(ErrorDomain::os, ENOENT, {.op = "open", .path = "/nope"});
  EXPECT_FALSE(open.has_range());
  EXPECT_EQ(open.length(), 0U);
}

}  // namespace
}  // namespace sluice
