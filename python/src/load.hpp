// sluice.load, sluice.last_load_report, sluice.loaded_bytes_in_use and the checkpoint behind
// sluice.safe_open (load.cpp), on the loader API (sluice/load.hpp).
#pragma once

#include <pybind11/pybind11.h>

namespace sluice::python {

void bind_load(pybind11::module_& m);

}  // namespace sluice::python
