// CUDA driver API device: libcuda.so.1 loaded at run time (SLUICE_LIBCUDA may name another file).
#pragma once

#include <memory>
#include <string>

#include "sluice/device.hpp"

namespace sluice::detail {

/// Whether libcuda loads, cuInit succeeds and at least one GPU is present; otherwise the reason
/// ("libcuda.so.1 not found", "cuInit: CUDA_ERROR_NO_DEVICE (100)", ...). Cached after the first call.
[[nodiscard]] bool cuda_available(std::string* reason = nullptr);
/// Number of CUDA devices (0 when cuda_available() is false).
[[nodiscard]] int cuda_device_count();
/// Opens GPU `ordinal` (its primary context). Throws an Error (domain cuda) with the reason.
[[nodiscard]] std::shared_ptr<Device> make_cuda_device(int ordinal);

}  // namespace sluice::detail
