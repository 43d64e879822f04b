// sluice.File, sluice.Result and sluice.Future: files and transfers, on sluice::File and the
// transfer API (sluice/transfer.hpp). Every transfer runs with the GIL released, on a copy of the
// File's handle (so another thread's close() cannot pull the descriptors from under it), and
// reports the path the bytes took and why.
#include "files.hpp"

#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <exception>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "buffers.hpp"
#include "sluice/device.hpp"
#include "sluice/file.hpp"
#include "sluice/path.hpp"
#include "sluice/transfer.hpp"

namespace py = pybind11;

namespace sluice::python {
namespace {

// A transfer in flight: its future, and the memory and file it uses, kept until it completes.
// Dropping a Future waits for its transfer, so the memory cannot go while bytes still move.
class Future {
 public:
  Future(TransferFuture f, Buffer buffer, File file)
      : future_(std::move(f)), buffer_(std::move(buffer)), file_(std::move(file)) {}
  Future(const Future&) = delete;
  Future& operator=(const Future&) = delete;
  ~Future() {
    if (future_.valid()) {
      py::gil_scoped_release unlocked;
      future_.wait();
    }
  }

  // The result, waiting at most `timeout` seconds (None: as long as it takes); raises the
  // transfer's error, or TimeoutError.
  TransferResult result(std::optional<double> timeout) {
    if (future_.valid()) {
      bool ready = true;
      {
        py::gil_scoped_release unlocked;
        if (timeout) {
          ready = future_.wait_for(std::chrono::duration<double>(std::max(0.0, *timeout))) ==
                  std::future_status::ready;
        }
        if (ready) {
          try {
            result_ = future_.get();
          } catch (...) {
            error_ = std::current_exception();
          }
        }
      }
      if (!ready) {
        PyErr_SetString(PyExc_TimeoutError, "the transfer did not complete in time");
        throw py::error_already_set();
      }
      buffer_ = Buffer();  // done with the memory (the GIL is held again here)
    }
    if (error_) std::rethrow_exception(error_);
    return *result_;
  }

  bool done() const { return !future_.valid() || future_.ready(); }

 private:
  TransferFuture future_;
  Buffer buffer_;
  File file_;
  std::optional<TransferResult> result_;
  std::exception_ptr error_;
};

OpenMode parse_mode(const std::string& mode, OpenOptions& options) {
  if (mode == "r" || mode == "rb") return OpenMode::read;
  if (mode == "r+" || mode == "rb+" || mode == "r+b") {
    options.create = false;
    return OpenMode::read_write;
  }
  if (mode == "w" || mode == "wb") {
    options.truncate = true;
    return OpenMode::write;
  }
  throw py::value_error("mode must be 'r', 'r+' or 'w', not '" + mode + "'");
}

// The mode as File() takes it ("r", "w", "r+").
const char* mode_text(const File& f) {
  return f.mode() == OpenMode::read ? "r" : f.mode() == OpenMode::write ? "w" : "r+";
}

std::string device_text(const py::object& device) {
  if (device.is_none()) return "";
  if (py::isinstance<py::str>(device)) return device.cast<std::string>();
  return py::str(device).cast<std::string>();  // torch.device("cuda:1") -> "cuda:1"
}

// What a transfer needs besides the file: the memory, how many bytes, and the options.
struct Request {
  Buffer buffer;
  std::uint64_t size = 0;
  std::uint64_t offset = 0;
  TransferOptions options;
};

Request make_request(const py::object& buf, Access access, std::int64_t offset,
                     const std::optional<std::int64_t>& size, const py::object& device,
                     const std::optional<std::string>& path) {
  Request r{Buffer::acquire(buf, access), 0, 0, {}};
  if (offset < 0) throw py::value_error("offset must be at least 0");
  if (size && *size < 0) throw py::value_error("size must be at least 0");
  r.offset = static_cast<std::uint64_t>(offset);
  r.size = size ? static_cast<std::uint64_t>(*size) : r.buffer.nbytes();
  if (r.size > r.buffer.nbytes()) {
    throw py::value_error("size " + std::to_string(r.size) + " is larger than the buffer (" +
                          std::to_string(r.buffer.nbytes()) + " bytes)");
  }
  if (path && *path != "auto") {
    r.options.path = parse_path(*path);
    if (!r.options.path) throw py::value_error("path must be 'auto', 'direct', 'bounce', 'posix' or 'host', not '" + *path + "'");
  }
  const std::string asked = device_text(device);
  if (const auto ordinal = r.buffer.cuda_device()) {
    const std::string own = "cuda:" + std::to_string(*ordinal);
    if (!asked.empty() && asked != own && !(asked == "cuda" && *ordinal == 0)) {
      throw py::value_error("the buffer is memory of " + own + ", not of device '" + asked + "'");
    }
    r.options.device = open_device(own);
  } else if (!asked.empty() && asked != "cpu") {
    r.options.device = open_device(asked);
  }
  if (const auto stream = r.buffer.stream(); stream && r.options.device) {
    // __cuda_array_interface__'s stream: 1 is the legacy default stream (handle 0), 2 the
    // per-thread default stream (CU_STREAM_PER_THREAD, whose handle is 2).
    py::gil_scoped_release unlocked;
    r.options.device->synchronize(*stream == 1 ? nullptr : reinterpret_cast<StreamHandle>(*stream));
  }
  return r;
}

File& open_file(File& f) {
  if (!f.is_open()) throw py::value_error("I/O on a closed file (" + f.path() + ")");
  return f;
}

TransferResult run_sync(File& f, const py::object& buf, std::int64_t offset, std::optional<std::int64_t> size,
                        const py::object& device, const std::optional<std::string>& path, IoOp op) {
  Request r = make_request(buf, op == IoOp::read ? Access::fill : Access::source, offset, size, device, path);
  const File file = open_file(f);  // this call's own handle
  py::gil_scoped_release unlocked;
  return op == IoOp::read ? read(file, r.buffer.data(), r.size, r.offset, r.options)
                          : write(file, r.buffer.data(), r.size, r.offset, r.options);
}

std::unique_ptr<Future> run_async(File& f, const py::object& buf, std::int64_t offset,
                                  std::optional<std::int64_t> size, const py::object& device,
                                  const std::optional<std::string>& path, IoOp op) {
  Request r = make_request(buf, op == IoOp::read ? Access::fill : Access::source, offset, size, device, path);
  File file = open_file(f);
  TransferFuture fut;
  {
    py::gil_scoped_release unlocked;
    fut = op == IoOp::read ? read_async(file, r.buffer.data(), r.size, r.offset, r.options)
                           : write_async(file, r.buffer.data(), r.size, r.offset, r.options);
  }
  return std::make_unique<Future>(std::move(fut), std::move(r.buffer), std::move(file));
}

std::string result_repr(const TransferResult& r) {
  return "sluice.Result(bytes=" + std::to_string(r.bytes) + ", path='" + std::string(to_string(r.path)) +
         "', seconds=" + std::to_string(r.seconds) + ", reason='" + r.reason + "')";
}

void bind_result(py::module_& m) {
  py::class_<TransferResult>(m, "Result", "What a transfer did: bytes moved, the path they took and why.")
      .def_readonly("bytes", &TransferResult::bytes, "Bytes moved (a read stops at the end of the file).")
      .def_property_readonly(
          "path", [](const TransferResult& r) { return std::string(to_string(r.path)); },
          "The path the bytes took: 'direct', 'bounce', 'posix' or 'host'; a load into pageable host "
          "memory may say 'mapped' (views of a private mapping of the file, docs/paths.md).")
      .def_readonly("reason", &TransferResult::reason, "Why that path, and how.")
      .def_readonly("seconds", &TransferResult::seconds, "Wall time of the transfer.")
      .def_readonly("ios", &TransferResult::ios, "I/O requests issued.")
      .def_readonly("cached_bytes", &TransferResult::cached_bytes,
                    "Of `bytes`, those read buffered because the page cache held them.")
      .def("__repr__", &result_repr);
}

void bind_future(py::module_& m) {
  py::class_<Future>(m, "Future",
                     "A transfer in flight. Dropping it waits for the transfer, which keeps its buffer until then.")
      .def("result", &Future::result, py::arg("timeout") = py::none(),
           "The transfer's Result, waiting up to `timeout` seconds (None: as long as it takes). Raises the "
           "transfer's error, or TimeoutError.")
      .def("done", &Future::done, "Whether the transfer has completed (successfully or not).");
}

constexpr const char* kReadDoc =
    "Reads up to `size` bytes (default: the buffer's size) at file `offset` into `buf`: a NumPy array, a "
    "PyTorch tensor (CPU or CUDA), a CuPy array, a bytearray, or anything with the buffer protocol, "
    "__cuda_array_interface__ or __dlpack__; contiguous and writable. Fewer bytes only at the end of the "
    "file. `device`: the GPU the memory is on when the buffer cannot say ('sim', 'cuda:N'); CUDA memory "
    "names its own. `path`: 'auto' (default: as configured), or 'direct', 'bounce', 'posix', 'host' "
    "(strict: an error if it cannot be taken). The GIL is released while bytes move, except for a read of at "
    "most 64 KiB of a file whose last small read the page cache served (a copy of about a microsecond).";
constexpr const char* kWriteDoc =
    "Writes `size` bytes (default: the buffer's size) from `buf` at file `offset`, extending the file as "
    "needed. Buffers, `device` and `path` as for read().";

void bind_file_class(py::module_& m) {
  py::class_<File>(m, "File", "A file open for transfers; a context manager.")
      .def(py::init([](const std::string& path, const std::string& mode, bool direct) {
             OpenOptions options;
             options.direct = direct;
             const OpenMode open_mode = parse_mode(mode, options);
             py::gil_scoped_release unlocked;
             return File::open(path, open_mode, options);
           }),
           py::arg("path"), py::arg("mode") = "r", py::kw_only(), py::arg("direct") = true,
           "Opens `path`: mode 'r' (read), 'r+' (read and write, must exist) or 'w' (write: created, "
           "truncated). `direct=False` never uses O_DIRECT.")
      .def_property_readonly("path", &File::path)
      .def_property_readonly(
          "mode", &mode_text)
      .def_property_readonly("size", [](const File& f) { return open_file(const_cast<File&>(f)).size(); },
                             "Current size in bytes.")
      .def_property_readonly("closed", [](const File& f) { return !f.is_open(); })
      .def_property_readonly("direct", &File::has_direct, "Whether the file has an O_DIRECT descriptor.")
      .def_property_readonly("direct_reason", &File::direct_reason, "Why it has none ('' when it has).")
      .def_property_readonly("filesystem", &File::fs_type)
      .def("fileno", [](File& f) { return open_file(f).fd(); })
      .def("close", &File::close, "Closes the file; transfers in flight keep their own handle.")
      .def("__enter__", [](File& f) -> File& { return f; }, py::return_value_policy::reference)
      .def("__exit__", [](File& f, const py::args&) { f.close(); })
      .def("__repr__", [](const File& f) {
        return "sluice.File('" + f.path() + "', mode='" +
               mode_text(f) + "'" +
               (f.is_open() ? "" : ", closed") + ")";
      });
}

void bind_transfers(py::module_& m) {
  auto file = py::reinterpret_borrow<py::class_<File>>(m.attr("File"));
  const auto args = [] {
    return std::make_tuple(py::arg("buf"), py::arg("offset") = 0, py::arg("size") = py::none(), py::kw_only(),
                           py::arg("device") = py::none(), py::arg("path") = py::none());
  };
  auto sync = [](IoOp op) {
    return [op](File& f, const py::object& buf, std::int64_t offset, std::optional<std::int64_t> size,
                const py::object& device, const std::optional<std::string>& path) {
      return run_sync(f, buf, offset, size, device, path, op);
    };
  };
  auto async = [](IoOp op) {
    return [op](File& f, const py::object& buf, std::int64_t offset, std::optional<std::int64_t> size,
                const py::object& device, const std::optional<std::string>& path) {
      return run_async(f, buf, offset, size, device, path, op);
    };
  };
  std::apply([&](auto... a) { file.def("read", sync(IoOp::read), a..., kReadDoc); }, args());
  std::apply([&](auto... a) { file.def("write", sync(IoOp::write), a..., kWriteDoc); }, args());
  std::apply([&](auto... a) {
    file.def("read_async", async(IoOp::read), a..., "read() that returns at once with a Future.");
  }, args());
  std::apply([&](auto... a) {
    file.def("write_async", async(IoOp::write), a..., "write() that returns at once with a Future.");
  }, args());
}

// File.read's common call, read(buf) or read(buf, offset) into host memory, as a METH_FASTCALL
// method beside the pybind11 one: pybind11's dispatcher (its argument vectors, keyword
// handling, type lookups) cost a 4 KiB read of a cached file more than the read itself. Every
// other call (keywords, a size, GPU memory, anything unexpected) goes to the pybind11 binding,
// which checks and reports as it always did; the fast one does the same transfer (run_sync with
// no size, device or path) and raises what it raises.
PyObject* g_full_read = nullptr;  // the pybind11 function, owned for the process

PyObject* full_read(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  const Py_ssize_t kw = kwnames == nullptr ? 0 : PyTuple_GET_SIZE(kwnames);
  std::vector<PyObject*> all(static_cast<std::size_t>(1 + nargs + kw));
  all[0] = self;
  std::copy(args, args + nargs + kw, all.begin() + 1);
  return PyObject_Vectorcall(g_full_read, all.data(), static_cast<std::size_t>(nargs + 1), kwnames);
}

// The Python exception for the C++ one being handled, as pybind11's dispatcher raises it.
PyObject* raise_current() {
  try {
    throw;
  } catch (py::error_already_set& e) {
    e.restore();
    return nullptr;
  } catch (...) {
    if (py::detail::apply_exception_translators(py::detail::get_local_internals().registered_exception_translators) ||
        py::detail::apply_exception_translators(py::detail::get_internals().registered_exception_translators)) {
      return nullptr;
    }
    PyErr_SetString(PyExc_SystemError, "an exception escaped the exception translators");
    return nullptr;
  }
}

// The Result of a fast read. The last one made is kept, and where nothing else holds it any
// more (its reference count is ours alone, as after `f.read(buf, off)` whose result was
// dropped) it is refilled instead of made anew, as CPython's zip() refills its tuple: a new
// pybind11 instance (allocation, registration, release) cost a 4 KiB read a tenth of its time.
// Only with the GIL held, which every caller has.
PyObject* result_object(TransferResult&& r, const py::detail::type_info* type) {
  static PyObject* spare = nullptr;  // one reference, ours; never released (a module constant)
  if (spare != nullptr && Py_REFCNT(spare) == 1) {
    auto* inst = reinterpret_cast<py::detail::instance*>(spare);
    const py::detail::value_and_holder vh = inst->get_value_and_holder(type, false);
    auto* value = vh ? static_cast<TransferResult*>(vh.value_ptr()) : nullptr;
    if (value != nullptr) {
      *value = std::move(r);
      Py_INCREF(spare);
      return spare;
    }
  }
  PyObject* made = py::detail::type_caster_generic::cast(
                       &r, py::return_value_policy::move, py::handle(), type, nullptr,
                       [](const void* p) -> void* {
                         return new TransferResult(std::move(*static_cast<TransferResult*>(const_cast<void*>(p))));
                       })
                       .ptr();
  if (made != nullptr) {
    Py_XDECREF(spare);
    spare = made;
    Py_INCREF(spare);
  }
  return made;
}

// A read of at most this many bytes of a file whose last small read the page cache served
// (File::last_small_read_cached) keeps the GIL: it is a copy of about a microsecond, and
// releasing the GIL and taking it back cost a tenth of that call. Any other read releases it.
constexpr std::size_t gil_held_bytes = 64 * 1024;

PyObject* fast_read(PyObject* self, PyObject* const* args, Py_ssize_t nargsf, PyObject* kwnames) {
  const Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  if (kwnames != nullptr || nargs < 1 || nargs > 2 || (nargs == 2 && !PyLong_CheckExact(args[1]))) {
    return full_read(self, args, nargs, kwnames);
  }
  long long offset = 0;
  if (nargs == 2) {
    int overflow = 0;
    offset = PyLong_AsLongLongAndOverflow(args[1], &overflow);
    if (overflow != 0 || offset < 0) return full_read(self, args, nargs, kwnames);  // it raises
  }
  // The type records, looked up once: py::cast finds them by hashing the type's name each call.
  static const py::detail::type_info* const file_type = py::detail::get_type_info(typeid(File));
  static const py::detail::type_info* const result_type = py::detail::get_type_info(typeid(TransferResult));
  auto* inst = reinterpret_cast<py::detail::instance*>(self);  // the descriptor checked its type
  const py::detail::value_and_holder vh = inst->get_value_and_holder(file_type, false);
  const auto* f = vh ? static_cast<const File*>(vh.value_ptr()) : nullptr;  // null: not initialised
  if (f == nullptr || !f->is_open()) return full_read(self, args, nargs, kwnames);
  Buffer buf;
  try {
    buf = Buffer::acquire(args[0], Access::fill);
  } catch (...) {
    PyErr_Clear();
    return full_read(self, args, nargs, kwnames);  // raises what the checks raise
  }
  if (buf.cuda_device()) return full_read(self, args, nargs, kwnames);
  try {
    TransferResult r;
    if (buf.nbytes() <= gil_held_bytes && f->last_small_read_cached()) {
      // With the GIL held no other thread can close() the file: its own handle would be a copy
      // (two reference counts) for nothing.
      r = read(*f, buf.data(), buf.nbytes(), static_cast<std::uint64_t>(offset), {});
    } else {
      const File file = *f;  // this call's own handle
      py::gil_scoped_release unlocked;
      r = read(file, buf.data(), buf.nbytes(), static_cast<std::uint64_t>(offset), {});
    }
    return result_object(std::move(r), result_type);
  } catch (...) {
    return raise_current();
  }
}

// Puts fast_read in the class as "read", keeping the pybind11 one for the calls it passes on.
void install_fast_read(py::module_& m) {
  const py::object cls = m.attr("File");
  py::object bound = py::reinterpret_borrow<py::object>(PyDict_GetItemString(
      reinterpret_cast<PyTypeObject*>(cls.ptr())->tp_dict, "read"));
  if (PyInstanceMethod_Check(bound.ptr())) bound = py::reinterpret_borrow<py::object>(PyInstanceMethod_GET_FUNCTION(bound.ptr()));
  g_full_read = bound.release().ptr();
  static const std::string doc =
      std::string("read($self, /, buf, offset=0, size=None, *, device=None, path=None)\n--\n\n") + kReadDoc;
  static PyMethodDef def{"read", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&fast_read)),
                         METH_FASTCALL | METH_KEYWORDS, doc.c_str()};
  const py::object descr =
      py::reinterpret_steal<py::object>(PyDescr_NewMethod(reinterpret_cast<PyTypeObject*>(cls.ptr()), &def));
  if (!descr) throw py::error_already_set();
  cls.attr("read") = descr;
}

}  // namespace

void bind_files(py::module_& m) {
  bind_result(m);
  bind_future(m);
  bind_file_class(m);
  bind_transfers(m);
  install_fast_read(m);
}

}  // namespace sluice::python
