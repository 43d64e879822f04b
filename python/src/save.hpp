// The bindings under sluice.torch.save_file, sluice.numpy.save_file and
// sluice.torch.save_checkpoint (save.cpp), on the save API (sluice/save.hpp), and
// sluice.last_save_report.
#pragma once

#include <pybind11/pybind11.h>

namespace sluice::python {

void bind_save(pybind11::module_& m);

}  // namespace sluice::python
