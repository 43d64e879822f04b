// The CUDA driver results (CUresult) Sluice names: the one place their values are written.
//
// Here, in core, rather than in gpu/cuda_api.hpp (which includes this file), because the error
// mapper (core/error_map.cpp) needs a few of them and core sits below gpu. The values are cuda.h's;
// where cuda.h is present, tests/fakes/cuda/cuda_abi_check.cpp checks each against it at compile
// time. Never include <cuda.h> beside this header: it #defines names that clash.
#pragma once

namespace sluice::detail::cu {

using CUresult = int;  // enum cudaError_enum: 4 bytes

inline constexpr CUresult success = 0;
inline constexpr CUresult error_invalid_value = 1;
inline constexpr CUresult error_out_of_memory = 2;
inline constexpr CUresult error_not_initialized = 3;
inline constexpr CUresult error_no_device = 100;
inline constexpr CUresult error_invalid_device = 101;
inline constexpr CUresult error_invalid_context = 201;
inline constexpr CUresult error_invalid_handle = 400;
inline constexpr CUresult error_not_found = 500;
inline constexpr CUresult error_not_ready = 600;
inline constexpr CUresult error_host_memory_already_registered = 712;
inline constexpr CUresult error_host_memory_not_registered = 713;
inline constexpr CUresult error_unknown = 999;

}  // namespace sluice::detail::cu
