// The device argument of sluice.load and sluice.data.Loader: "cpu", "pinned", "sim", "auto",
// "cuda", "cuda:N", an int N or a torch.device, resolved to a LoadTarget, its Device and how
// DLPack names the memory (target.cpp).
#pragma once

#include <memory>
#include <string>

#include <pybind11/pybind11.h>

#include "sluice/device.hpp"
#include "sluice/load.hpp"

namespace sluice::python {

struct Target {
  LoadTarget target = LoadTarget::pageable_host;
  std::shared_ptr<Device> device;
  std::string name = "cpu";  ///< "cpu", "pinned", "sim", "cuda:N"
  int dlpack_type = 1;       ///< DLDeviceType: kDLCPU (1) for host and sim memory, kDLCUDA (2)
  int dlpack_id = 0;
};

/// Opens the device `device` names (the GIL released meanwhile). ValueError for a name that is
/// none of these, TypeError for another type; sluice.Error when the device cannot be opened
/// ("cuda" without a GPU says libcuda is missing: never a silent fallback to another device).
[[nodiscard]] Target parse_target(const pybind11::handle& device);

}  // namespace sluice::python
