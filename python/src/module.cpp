// The extension module sluice._sluice: the bindings of libsluice's public API. The package
// sluice (python/sluice/__init__.py) re-exports what users call; docs/python.md is the page.
#include <pybind11/pybind11.h>

#include "data.hpp"
#include "errors.hpp"
#include "fanout.hpp"
#include "files.hpp"
#include "load.hpp"
#include "remote.hpp"
#include "save.hpp"
#include "tensors.hpp"

PYBIND11_MODULE(_sluice, m) {
  m.doc() = "Sluice: storage to GPU and host memory, saying which path the bytes took and why.";
  m.attr("__version__") = SLUICE_VERSION_TEXT;
  sluice::python::register_errors(m);
  sluice::python::bind_files(m);
  sluice::python::bind_tensors(m);
  sluice::python::bind_load(m);
  sluice::python::bind_save(m);
  sluice::python::bind_data(m);
  sluice::python::bind_fanout(m);
  sluice::python::bind_remote(m);
}
