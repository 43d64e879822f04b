// sluice::Error <-> cuFile's codes: the one mapping, used by libsluice_cufile (every entry point
// of the cuFile C ABI) and by the direct path (which turns cuFileRead/cuFileWrite results into
// Errors). An interface between Sluice's own libraries, not for applications: they see
// sluice::Error (and its errno_value()) or, through libsluice_cufile, cuFile's codes.
//
// Codes are plain ints so this header needs no cufile.h: `err` is a CUfileOpError (5001..5049,
// capi/cufile.h), `cu_err` a CUresult. The tables are in docs/errors.md.
#pragma once

#include <sys/types.h>

#include <string_view>

#include "sluice/error.hpp"
#include "sluice/export.hpp"

namespace sluice {

/// What a cuFile control call returns (CUfileError_t): the CUfileOpError and, for
/// CU_FILE_CUDA_DRIVER_ERROR, the CUDA driver's result.
struct CuFileStatus {
  int err = 0;
  int cu_err = 0;
  friend bool operator==(const CuFileStatus&, const CuFileStatus&) = default;
};

/// The status a control call reports for `e`: usage errors are CU_FILE_INVALID_VALUE, cuFile
/// errors keep their code, CUDA errors are CU_FILE_CUDA_DRIVER_ERROR with the CUresult (no such
/// GPU: CU_FILE_DEVICE_NOT_FOUND), OS errors by their errno (ENOMEM: CU_FILE_NOMEM_ERROR, ...).
[[nodiscard]] SLUICE_API CuFileStatus to_cufile_status(const Error& e) noexcept;

/// What cuFileRead/cuFileWrite (and the batch and stream APIs' byte counts) report for `e`:
/// -1 with the errno in *err_no for OS and data errors, else -CUfileOpError (*err_no is 0).
[[nodiscard]] SLUICE_API ssize_t to_cufile_result(const Error& e, int* err_no) noexcept;

/// The Error for a failed control call's status (st.err != 0).
[[nodiscard]] SLUICE_API Error from_cufile_status(CuFileStatus st, ErrorContext ctx,
                                                  std::string_view detail = {});

/// The Error for a failed cuFileRead/cuFileWrite: `ret` is -1 (then `err_no` is the errno it
/// set) or -CUfileOpError.
[[nodiscard]] SLUICE_API Error from_cufile_result(ssize_t ret, int err_no, ErrorContext ctx,
                                                  std::string_view detail = {});

/// Whether a CUfileOpError says "not this way" (no nvidia-fs, a file system or buffer GDS cannot
/// serve, ...) rather than "the storage failed": with path auto the bounce path serves the
/// request instead. docs/paths.md lists them.
[[nodiscard]] SLUICE_API bool is_cufile_capability_error(int err) noexcept;

}  // namespace sluice
