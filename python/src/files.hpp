// sluice.File, sluice.Result, sluice.Future (files.cpp).
#pragma once

#include <pybind11/pybind11.h>

namespace sluice::python {

void bind_files(pybind11::module_& m);

}  // namespace sluice::python
