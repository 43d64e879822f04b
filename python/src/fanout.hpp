// The bindings under sluice.distributed: the fan-out planner (sluice/fanout.hpp) and the
// checkpoint table it plans over.
#pragma once

#include <pybind11/pybind11.h>

namespace sluice::python {

void bind_fanout(pybind11::module_& m);

}  // namespace sluice::python
