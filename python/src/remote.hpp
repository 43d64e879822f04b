// sluice.File for URLs: the binding of a read-only remote object (remote.cpp).
#pragma once

#include <pybind11/pybind11.h>

namespace sluice::python {

/// Binds sluice._sluice.RemoteFile and makes sluice._sluice.File(URL) return one (after bind_files).
void bind_remote(pybind11::module_& m);

}  // namespace sluice::python
