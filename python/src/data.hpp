// The extension half of sluice.data (python/sluice/data.py): _Loader over sluice::Loader, and
// _Batch, whose regions (the whole batch, or one WebDataset field) leave as _View objects that
// any DLPack consumer takes without a copy (data.cpp).
//
// Lifetime: a _Batch and every DLPack export of its views share one copy of the sluice::Batch,
// whose lease holds the batch buffer; the buffer goes back to the Loader's region when the last
// of them, sluice's or a framework's tensor, is gone (possibly after the Loader). As in
// tensors.hpp, the DLPack deleter touches no Python object: it may run without the GIL.
#pragma once

#include <pybind11/pybind11.h>

namespace sluice::python {

void bind_data(pybind11::module_& m);

}  // namespace sluice::python
