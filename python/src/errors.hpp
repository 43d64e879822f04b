// How a sluice::Error reaches Python: as sluice.Error (an OSError), or the subclass that also
// derives from the builtin OSError subclass users already catch (FileNotFoundError,
// PermissionError, ...), with errno, filename, offset, length, op and the library's message.
// Usage errors become ValueError. The classes are defined in Python (sluice/_errors.py), so they
// pickle, print and subclass like any Python exception.
#pragma once

#include <pybind11/pybind11.h>

namespace sluice::python {

/// Registers the translator of sluice::Error; call once, from the module's init.
void register_errors(pybind11::module_& m);

}  // namespace sluice::python
