// One DLPack export: a "dltensor" capsule of an unversioned DLManagedTensor (DLPack 0.6, which
// torch, NumPy and CuPy read) over memory that `owner` keeps alive. The manager_ctx holds that
// reference and the shape and strides the DLTensor points to; the consumer's deleter drops them
// and touches no Python object, so it may run without the GIL, on any thread. sluice.Tensor
// (tensors.cpp) and the batches of sluice.data (data.cpp) export through it.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <pybind11/pybind11.h>

#include "sluice/dtype.hpp"

namespace sluice::python {

struct DlpackRegion {
  std::shared_ptr<const void> owner;  ///< what keeps `data` valid
  void* data = nullptr;
  int device_type = 1;                ///< DLDeviceType: kDLCPU (1), kDLCUDA (2)
  int device_id = 0;
  DLPackType type{};
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;  ///< in elements; empty: C order
};

/// The capsule. A capsule nobody consumes deletes its tensor when it goes.
[[nodiscard]] pybind11::capsule make_dlpack_capsule(DlpackRegion region);

}  // namespace sluice::python
