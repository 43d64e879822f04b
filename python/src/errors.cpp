#include "errors.hpp"

#include <exception>
#include <string>

#include "sluice/error.hpp"

namespace py = pybind11;

namespace sluice::python {
namespace {

std::string_view domain_name(ErrorDomain d) {
  switch (d) {
    case ErrorDomain::os: return "os";
    case ErrorDomain::cuda: return "cuda";
    case ErrorDomain::cufile: return "cufile";
    case ErrorDomain::usage: return "usage";
    case ErrorDomain::data: return "data";
  }
  return "os";
}

// Raises the Python exception for `e` (the GIL is held: translators run with it).
void raise(const Error& e) {
  if (e.domain() == ErrorDomain::usage) {
    PyErr_SetString(PyExc_ValueError, e.what());
    return;
  }
  const py::module_ errors = py::module_::import("sluice._errors");
  const py::object cls = errors.attr("class_for")(e.errno_value());
  py::object filename = e.path().empty() ? py::none() : py::object(py::str(e.path()));
  py::object offset = e.has_range() ? py::object(py::int_(e.offset())) : py::none();
  py::object length = e.has_range() ? py::object(py::int_(e.length())) : py::none();
  const py::object exc = cls(e.errno_value(), e.what(), filename, py::arg("offset") = offset,
                             py::arg("length") = length, py::arg("op") = e.op(),
                             py::arg("domain") = domain_name(e.domain()), py::arg("code") = e.code());
  PyErr_SetObject(cls.ptr(), exc.ptr());
}

}  // namespace

void register_errors(py::module_& m) {
  py::register_exception_translator([](std::exception_ptr p) {
    if (!p) return;
    try {
      std::rethrow_exception(p);
    } catch (const Error& e) {
      try {
        raise(e);
      } catch (py::error_already_set& nested) {
        nested.restore();  // building the exception failed: raise that failure instead
      }
    }
  });
  // The classes, re-exported by the package's __init__ (sluice.Error, ...).
  const py::module_ errors = py::module_::import("sluice._errors");
  m.attr("Error") = errors.attr("Error");
}

}  // namespace sluice::python
