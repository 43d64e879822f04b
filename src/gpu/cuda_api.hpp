// The CUDA driver API, loaded at run time from libcuda.so.1 (or the file SLUICE_LIBCUDA names),
// so one build serves machines with and without a GPU and nothing links against CUDA.
//
// The few driver types are declared here with the driver's ABI instead of including cuda.h, so
// the build does not need the toolkit. Where cuda.h is present, tests/fakes/cuda/cuda_abi_check.cpp
// checks every entry point and constant below against it at compile time.
//
// Never include <cuda.h> in a file that includes this one except the ABI check: cuda.h #defines
// unversioned names (cuMemAlloc -> cuMemAlloc_v2) and flag constants.
#pragma once

#include <cstddef>
#include <string>

#include "core/cuda_codes.hpp"

namespace sluice::detail::cu {

using CUdevice = int;
using CUdeviceptr = unsigned long long;  // CUdeviceptr_v2 on 64-bit hosts
struct CUctx_st;
struct CUstream_st;
struct CUevent_st;
using CUcontext = CUctx_st*;
using CUstream = CUstream_st*;
using CUevent = CUevent_st*;
using CUhostFn = void (*)(void* user_data);

// CUresult values: core/cuda_codes.hpp (included above).

// CUpointer_attribute / CUmemorytype (enums, 4 bytes).
inline constexpr int pointer_attribute_memory_type = 2;
inline constexpr unsigned memorytype_host = 1;
inline constexpr unsigned memorytype_device = 2;

// Flags.
inline constexpr unsigned memhostalloc_portable = 0x01;     // CU_MEMHOSTALLOC_PORTABLE
inline constexpr unsigned memhostalloc_devicemap = 0x02;    // CU_MEMHOSTALLOC_DEVICEMAP
inline constexpr unsigned stream_wait_value_geq = 0x0;      // CU_STREAM_WAIT_VALUE_GEQ
inline constexpr unsigned memhostregister_portable = 0x01;  // CU_MEMHOSTREGISTER_PORTABLE
inline constexpr unsigned stream_non_blocking = 0x1;        // CU_STREAM_NON_BLOCKING
inline constexpr unsigned event_disable_timing = 0x2;       // CU_EVENT_DISABLE_TIMING

// Every entry point sluice uses: X(exported symbol, parameter list). The symbol is the versioned
// name libcuda exports for the current ABI (cuMemAlloc_v2, not the 32-bit cuMemAlloc).
// clang-format off
#define SLUICE_CUDA_ENTRY_POINTS(X)                                                            \
  X(cuGetErrorName, (CUresult error, const char** str))                                        \
  X(cuInit, (unsigned int flags))                                                              \
  X(cuDriverGetVersion, (int* version))                                                        \
  X(cuDeviceGetCount, (int* count))                                                            \
  X(cuDeviceGet, (CUdevice* device, int ordinal))                                              \
  X(cuDeviceGetName, (char* name, int len, CUdevice dev))                                      \
  X(cuDeviceGetPCIBusId, (char* bus_id, int len, CUdevice dev))                                \
  X(cuDeviceTotalMem_v2, (std::size_t* bytes, CUdevice dev))                                   \
  X(cuDevicePrimaryCtxRetain, (CUcontext* ctx, CUdevice dev))                                  \
  X(cuDevicePrimaryCtxRelease_v2, (CUdevice dev))                                              \
  X(cuCtxSetCurrent, (CUcontext ctx))                                                          \
  X(cuCtxGetCurrent, (CUcontext* ctx))                                                         \
  X(cuCtxPushCurrent_v2, (CUcontext ctx))                                                      \
  X(cuCtxPopCurrent_v2, (CUcontext* ctx))                                                      \
  X(cuMemAlloc_v2, (CUdeviceptr* dptr, std::size_t bytes))                                     \
  X(cuMemFree_v2, (CUdeviceptr dptr))                                                          \
  X(cuMemHostAlloc, (void** pp, std::size_t bytes, unsigned int flags))                        \
  X(cuMemFreeHost, (void* p))                                                                  \
  X(cuMemHostRegister_v2, (void* p, std::size_t bytes, unsigned int flags))                    \
  X(cuMemHostUnregister, (void* p))                                                            \
  X(cuPointerGetAttribute, (void* data, int attribute, CUdeviceptr ptr))                       \
  X(cuStreamCreate, (CUstream* stream, unsigned int flags))                                    \
  X(cuStreamDestroy_v2, (CUstream stream))                                                     \
  X(cuStreamSynchronize, (CUstream stream))                                                    \
  X(cuMemcpyHtoDAsync_v2, (CUdeviceptr dst, const void* src, std::size_t bytes, CUstream s))  \
  X(cuMemcpyDtoHAsync_v2, (void* dst, CUdeviceptr src, std::size_t bytes, CUstream s))        \
  X(cuLaunchHostFunc, (CUstream stream, CUhostFn fn, void* user_data))                         \
  X(cuEventCreate, (CUevent* event, unsigned int flags))                                       \
  X(cuEventDestroy_v2, (CUevent event))                                                        \
  X(cuEventRecord, (CUevent event, CUstream stream))                                           \
  X(cuEventQuery, (CUevent event))                                                             \
  X(cuEventSynchronize, (CUevent event))

// Entry points sluice can do without: a driver that lacks them still serves every path, and the
// feature that needs them falls back (stream memory operations: stream-ordered transfers wait in
// a host function instead, see docs/paths.md). Null when missing.
#define SLUICE_CUDA_OPTIONAL_ENTRY_POINTS(X)                                                   \
  X(cuMemHostGetDevicePointer_v2, (CUdeviceptr* dptr, void* p, unsigned int flags))            \
  X(cuStreamWaitValue32_v2, (CUstream stream, CUdeviceptr addr, unsigned int value, unsigned int flags))
// clang-format on

/// Typed pointers to the loaded driver's entry points; all non-null once loaded, except the
/// optional ones.
struct Api {
#define SLUICE_CUDA_MEMBER(name, params) CUresult(*name) params = nullptr;
  SLUICE_CUDA_ENTRY_POINTS(SLUICE_CUDA_MEMBER)
  SLUICE_CUDA_OPTIONAL_ENTRY_POINTS(SLUICE_CUDA_MEMBER)
#undef SLUICE_CUDA_MEMBER

  int driver_version = 0;  ///< cuDriverGetVersion: 1000*major + 10*minor
  std::string library;     ///< the file that was loaded ("libcuda.so.1" or SLUICE_LIBCUDA)
};

/// The process-wide driver: loaded and cuInit'ed on the first call (thread-safe), then cached,
/// failure included. Null when it cannot be used; then `reason` says why ("libcuda.so.1 not found
/// (dlopen: ...)", "libcuda.so.1: missing symbol cuLaunchHostFunc", "cuInit: CUDA_ERROR_NO_DEVICE
/// (100)") and `code` holds the CUresult (error_not_initialized when the library did not load,
/// error_not_found for a missing symbol).
[[nodiscard]] const Api* driver(std::string* reason = nullptr, CUresult* code = nullptr);

/// "CUDA_ERROR_OUT_OF_MEMORY (2)"; "CUresult 12345" when the driver does not know the code or
/// is not loaded.
[[nodiscard]] std::string result_text(CUresult r);

/// True once exit() has started tearing down libcuda's own state: from then on no CUDA call is
/// safe, so destructors that release driver resources skip it and leave the rest to the OS.
[[nodiscard]] bool process_exiting() noexcept;

}  // namespace sluice::detail::cu
