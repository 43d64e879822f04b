// The one error mapper: sluice::Error -> errno, -> cuFile codes, and cuFile codes -> Error.
// docs/errors.md shows the same tables; tests/error_map_test.cpp checks every row against values
// written from NVIDIA's and Linux's headers, not from these tables.
#include <cerrno>

#include "core/cuda_codes.hpp"
#include "cufile.h"
#include "sluice/error.hpp"
#include "sluice/internal/cufile_errors.hpp"

namespace sluice {
namespace {

namespace cu = detail::cu;

struct CuFileErrno {
  CUfileOpError err;
  int errno_value;
};

// The errno of each CUfileOpError that is not EIO. "Not supported" answers are EOPNOTSUPP,
// bad buffers EFAULT, "retry later" EAGAIN.
constexpr CuFileErrno kCuFileErrno[] = {
    {CU_FILE_DRIVER_NOT_INITIALIZED, EOPNOTSUPP},
    {CU_FILE_DRIVER_INVALID_PROPS, EINVAL},
    {CU_FILE_DRIVER_UNSUPPORTED_LIMIT, EINVAL},
    {CU_FILE_DRIVER_CLOSING, ESHUTDOWN},
    {CU_FILE_PLATFORM_NOT_SUPPORTED, EOPNOTSUPP},
    {CU_FILE_IO_NOT_SUPPORTED, EOPNOTSUPP},
    {CU_FILE_DEVICE_NOT_SUPPORTED, EOPNOTSUPP},
    {CU_FILE_CUDA_POINTER_INVALID, EFAULT},
    {CU_FILE_CUDA_MEMORY_TYPE_INVALID, EFAULT},
    {CU_FILE_CUDA_POINTER_RANGE_ERROR, EFAULT},
    {CU_FILE_CUDA_CONTEXT_MISMATCH, EINVAL},
    {CU_FILE_INVALID_MAPPING_SIZE, EFAULT},
    {CU_FILE_INVALID_MAPPING_RANGE, EFAULT},
    {CU_FILE_INVALID_FILE_TYPE, EINVAL},
    {CU_FILE_INVALID_FILE_OPEN_FLAG, EINVAL},
    {CU_FILE_DIO_NOT_SET, EOPNOTSUPP},
    {CU_FILE_INVALID_VALUE, EINVAL},
    {CU_FILE_MEMORY_ALREADY_REGISTERED, EINVAL},
    {CU_FILE_MEMORY_NOT_REGISTERED, EINVAL},
    {CU_FILE_PERMISSION_DENIED, EACCES},
    {CU_FILE_DRIVER_ALREADY_OPEN, EALREADY},
    {CU_FILE_HANDLE_NOT_REGISTERED, EBADF},
    {CU_FILE_HANDLE_ALREADY_REGISTERED, EEXIST},
    {CU_FILE_DEVICE_NOT_FOUND, ENODEV},
    {CU_FILE_IO_DISABLED, EOPNOTSUPP},
    {CU_FILE_GPU_MEMORY_PINNING_FAILED, ENOMEM},
    {CU_FILE_BATCH_FULL, EAGAIN},
    {CU_FILE_ASYNC_NOT_SUPPORTED, EOPNOTSUPP},
    {CU_FILE_INTERNAL_BATCH_SETUP_ERROR, EAGAIN},
    {CU_FILE_INTERNAL_BATCH_SUBMIT_ERROR, EAGAIN},
    {CU_FILE_INTERNAL_BATCH_GETSTATUS_ERROR, EAGAIN},
    {CU_FILE_INTERNAL_BATCH_CANCEL_ERROR, EAGAIN},
    {CU_FILE_NOMEM_ERROR, ENOMEM},
    {CU_FILE_INVALID_CONTEXT_ERROR, EINVAL},
    {CU_FILE_BATCH_NOCOMPAT_ERROR, EOPNOTSUPP},
};

int cufile_errno(int err) noexcept {
  for (const CuFileErrno& row : kCuFileErrno) {
    if (row.err == err) return row.errno_value;
  }
  return EIO;  // the driver's own failures (nvidia-fs, internal, CU_FILE_IO_ERROR, ...)
}

int cuda_errno(int result) noexcept {
  switch (result) {
    case cu::error_invalid_value:
      return EINVAL;
    case cu::error_out_of_memory:
      return ENOMEM;
    case cu::error_not_initialized:
    case cu::error_no_device:
    case cu::error_invalid_device:
      return ENODEV;
    default:
      return EIO;
  }
}

// The cuFile status of an OS error in a control call (data-path calls return the errno itself).
int os_cufile_error(int errno_value) noexcept {
  switch (errno_value) {
    case EINVAL:
      return CU_FILE_INVALID_VALUE;
    case ENOMEM:
      return CU_FILE_NOMEM_ERROR;
    case EACCES:
    case EPERM:
      return CU_FILE_PERMISSION_DENIED;
    case ENODEV:
      return CU_FILE_DEVICE_NOT_FOUND;
    case EOPNOTSUPP:
    case ENOSYS:
      return CU_FILE_IO_NOT_SUPPORTED;
    default:
      return CU_FILE_IO_ERROR;
  }
}

}  // namespace

int to_errno(const Error& e) noexcept {
  switch (e.domain()) {
    case ErrorDomain::os:
    case ErrorDomain::data:
      return e.code() > 0 ? e.code() : EIO;
    case ErrorDomain::usage:
      return EINVAL;
    case ErrorDomain::cuda:
      return cuda_errno(e.code());
    case ErrorDomain::cufile:
      return cufile_errno(e.code());
  }
  return EIO;
}

CuFileStatus to_cufile_status(const Error& e) noexcept {
  switch (e.domain()) {
    case ErrorDomain::usage:
      return {CU_FILE_INVALID_VALUE, 0};
    case ErrorDomain::cufile:
      return {e.code() > 0 ? e.code() : CU_FILE_INTERNAL_ERROR, 0};
    case ErrorDomain::cuda:
      if (e.code() == cu::error_no_device || e.code() == cu::error_invalid_device)
        return {CU_FILE_DEVICE_NOT_FOUND, 0};
      return {CU_FILE_CUDA_DRIVER_ERROR, e.code()};
    case ErrorDomain::os:
      return {os_cufile_error(e.code()), 0};
    case ErrorDomain::data:
      return {CU_FILE_IO_ERROR, 0};
  }
  return {CU_FILE_INTERNAL_ERROR, 0};
}

ssize_t to_cufile_result(const Error& e, int* err_no) noexcept {
  if (e.domain() == ErrorDomain::os || e.domain() == ErrorDomain::data) {
    *err_no = to_errno(e);
    return -1;
  }
  *err_no = 0;
  return -static_cast<ssize_t>(to_cufile_status(e).err);
}

Error from_cufile_status(CuFileStatus st, ErrorContext ctx, std::string_view detail) {
  if (st.err == CU_FILE_CUDA_DRIVER_ERROR && st.cu_err != cu::success)
    return {ErrorDomain::cuda, st.cu_err, std::move(ctx), detail};
  return {ErrorDomain::cufile, st.err, std::move(ctx), detail};
}

Error from_cufile_result(ssize_t ret, int err_no, ErrorContext ctx, std::string_view detail) {
  if (ret == -1) return {ErrorDomain::os, err_no > 0 ? err_no : EIO, std::move(ctx), detail};
  return from_cufile_status({static_cast<int>(-ret), 0}, std::move(ctx), detail);
}

bool is_cufile_capability_error(int err) noexcept {
  switch (err < 0 ? -err : err) {
    case CU_FILE_DRIVER_NOT_INITIALIZED:
    case CU_FILE_PLATFORM_NOT_SUPPORTED:
    case CU_FILE_IO_NOT_SUPPORTED:
    case CU_FILE_DEVICE_NOT_SUPPORTED:
    case CU_FILE_NVFS_DRIVER_ERROR:
    case CU_FILE_CUDA_POINTER_INVALID:
    case CU_FILE_CUDA_MEMORY_TYPE_INVALID:
    case CU_FILE_CUDA_POINTER_RANGE_ERROR:
    case CU_FILE_INVALID_MAPPING_SIZE:
    case CU_FILE_INVALID_MAPPING_RANGE:
    case CU_FILE_DIO_NOT_SET:
    case CU_FILE_IO_DISABLED:
    case CU_FILE_GPU_MEMORY_PINNING_FAILED:
    case CU_FILE_NOMEM_ERROR:
      return true;
    default:
      return false;
  }
}

}  // namespace sluice
