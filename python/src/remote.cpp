// sluice.File for URLs (http://, https://, s3://): a read-only object read by ranges through
// RemoteReader (docs/remote.md) into host memory. sluice.File(URL) returns one of these: the
// File type's tp_new looks at the path (install_url_dispatch), so sluice.File stays the C++ type
// and a local File.read pays nothing for URLs (issue 37). It has File's read()/size/path/mode/
// close and context manager, and refuses writes and device memory with a clear error. The GIL is
// released while bytes move.
#include "remote.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include <pybind11/stl.h>

#include "buffers.hpp"
#include "sluice/error.hpp"
#include "sluice/remote.hpp"

namespace py = pybind11;

namespace sluice::python {
namespace {

class RemoteFile {
 public:
  RemoteFile(const std::string& url, const std::string& mode) {
    if (mode != "r" && mode != "rb") {
      throw_os_error(
          EROFS, {.op = "open", .path = url},
          "remote objects open read-only (mode 'r'): writing to a URL is not supported yet");
    }
    reader_ = std::make_unique<RemoteReader>(url);
    url_ = reader_->url();  // the URL as errors show it: a presigned signature is hidden
  }

  TransferResult read(const py::object& buf, std::int64_t offset,
                      std::optional<std::int64_t> size) {
    Buffer b = Buffer::acquire(buf, Access::fill);
    if (b.cuda_device()) {
      throw py::value_error(
          "reading a URL into device memory is not supported yet: read into host memory (" + url() +
          ")");
    }
    if (offset < 0) throw py::value_error("offset must not be negative");
    std::uint64_t n = b.nbytes();
    if (size) {
      if (*size < 0 || static_cast<std::uint64_t>(*size) > n) {
        throw py::value_error("size must be in [0, the buffer's " + std::to_string(n) + " bytes]");
      }
      n = static_cast<std::uint64_t>(*size);
    }
    RemoteReader& r = open_reader();
    py::gil_scoped_release unlocked;
    const std::lock_guard lock(mutex_);  // one read at a time per reader
    return r.read(b.data(), n, static_cast<std::uint64_t>(offset));
  }

  void write(const py::object&, std::int64_t offset, const std::optional<std::int64_t>&) {
    throw_os_error(EROFS,
                   {.op = "write",
                    .path = url(),
                    .offset = static_cast<std::uint64_t>(std::max<std::int64_t>(offset, 0))},
                   "remote objects are read-only: writing to a URL is not supported yet");
  }

  // The object's size: known after the first read; else one ranged GET of its first byte says it.
  std::uint64_t size() {
    RemoteReader& r = open_reader();
    if (!r.size()) {
      std::byte one{};
      py::gil_scoped_release unlocked;
      const std::lock_guard lock(mutex_);
      (void)r.read(&one, 1, 0);
    }
    return r.size().value_or(0);
  }

  [[nodiscard]] const std::string& url() const { return url_; }
  [[nodiscard]] bool closed() const { return reader_ == nullptr; }
  void close() { reader_.reset(); }
  [[nodiscard]] std::string reason() const { return reader_ ? reader_->reason() : std::string(); }

 private:
  RemoteReader& open_reader() {
    if (!reader_) throw py::value_error("I/O on a closed file (" + url_ + ")");
    return *reader_;
  }

  std::unique_ptr<RemoteReader> reader_;
  std::string url_;
  std::mutex mutex_;
};

bool is_remote_url(PyObject* path) {
  if (path == nullptr || !PyUnicode_Check(path)) return false;
  Py_ssize_t n = 0;
  const char* text = PyUnicode_AsUTF8AndSize(path, &n);
  if (text == nullptr) {
    PyErr_Clear();
    return false;  // File's own init raises for a string it cannot take
  }
  const std::string_view p(text, static_cast<std::size_t>(n));
  return p.starts_with("http://") || p.starts_with("https://") || p.starts_with("s3://");
}

newfunc g_file_new = nullptr;      // pybind11's tp_new of File, for local paths
PyObject* g_remote_file = nullptr;  // the RemoteFile class, kept alive by the module

// File's tp_new: a URL makes a RemoteFile (not a File, so Python does not run File's __init__);
// anything else goes to pybind11 as before. Only construction pays for the check.
PyObject* file_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  PyObject* path = PyTuple_GET_SIZE(args) > 0 ? PyTuple_GET_ITEM(args, 0)
                   : kwargs != nullptr        ? PyDict_GetItemString(kwargs, "path")
                                              : nullptr;
  if (is_remote_url(path)) return PyObject_Call(g_remote_file, args, kwargs);
  return g_file_new(type, args, kwargs);
}

// File.__new__(cls, *args, **kwargs), as a Python subclass's super().__new__(cls) calls it: the
// inherited pybind11_object.__new__ would refuse a type whose tp_new is not its own.
PyObject* file_new_method(PyObject* file_type, PyObject* args, PyObject* kwargs) {
  PyObject* cls = PyTuple_GET_SIZE(args) > 0 ? PyTuple_GET_ITEM(args, 0) : nullptr;
  if (cls == nullptr || !PyType_Check(cls) ||
      !PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(cls),
                        reinterpret_cast<PyTypeObject*>(file_type))) {
    PyErr_SetString(PyExc_TypeError, "File.__new__(X): X must be a subtype of sluice.File");
    return nullptr;
  }
  const py::object rest =
      py::reinterpret_steal<py::object>(PyTuple_GetSlice(args, 1, PyTuple_GET_SIZE(args)));
  if (!rest) return nullptr;
  return file_new(reinterpret_cast<PyTypeObject*>(cls), rest.ptr(), kwargs);
}

void install_url_dispatch(py::module_& m) {
  auto* file = reinterpret_cast<PyTypeObject*>(m.attr("File").ptr());
  g_remote_file = m.attr("RemoteFile").ptr();
  g_file_new = file->tp_new;
  file->tp_new = &file_new;
  static PyMethodDef def{"__new__",
                         reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&file_new_method)),
                         METH_VARARGS | METH_KEYWORDS,
                         "Creates a File, or a RemoteFile for a URL."};
  const py::object method = py::reinterpret_steal<py::object>(
      PyCFunction_NewEx(&def, reinterpret_cast<PyObject*>(file), nullptr));
  if (!method) throw py::error_already_set();
  if (PyDict_SetItemString(file->tp_dict, "__new__", method.ptr()) != 0) {
    throw py::error_already_set();
  }
  PyType_Modified(file);
}

}  // namespace

void bind_remote(py::module_& m) {
  py::class_<RemoteFile>(
      m, "RemoteFile",
      "A URL (http://, https://, s3://) open read-only; sluice.File returns one for a URL.")
      .def(py::init([](const std::string& path, const std::string& mode, bool /*direct*/) {
             return std::make_unique<RemoteFile>(path, mode);
           }),
           py::arg("path"), py::arg("mode") = "r", py::kw_only(), py::arg("direct") = true,
           "Opens a URL read-only; `direct` is accepted as File takes it and has no effect.")
      .def("read", &RemoteFile::read, py::arg("buf"), py::arg("offset") = 0,
           py::arg("size") = py::none(),
           "Reads up to `size` bytes (default: the buffer's size) at `offset` into host memory "
           "`buf` by ranged "
           "GETs in flight; fewer bytes only at the end of the object.")
      .def("write", &RemoteFile::write, py::arg("buf"), py::arg("offset") = 0,
           py::arg("size") = py::none(),
           "Refused: remote objects are read-only (sluice.Error, errno EROFS).")
      .def_property_readonly("size", &RemoteFile::size, "The object's size in bytes.")
      .def_property_readonly("path", &RemoteFile::url, "The URL (a query string shown as '?...').")
      .def_property_readonly("mode", [](const RemoteFile&) { return std::string("r"); })
      .def_property_readonly("closed", &RemoteFile::closed)
      .def_property_readonly(
          "reason", &RemoteFile::reason,
          "How this object's bytes came so far (ranged GETs, in flight, connections, retries).")
      .def("close", &RemoteFile::close)
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](RemoteFile& f, const py::args&) { f.close(); })
      .def("__repr__",
           [](const RemoteFile& f) { return "sluice.File('" + f.url() + "', mode='r')"; });
  install_url_dispatch(m);
}

}  // namespace sluice::python
