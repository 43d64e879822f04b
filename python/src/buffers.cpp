#include "buffers.hpp"

#include <dlpack/dlpack.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace py = pybind11;

namespace sluice::python {
namespace {

// Whether an array of `shape` with `strides` (in elements or bytes, as `unit` says) covers one
// contiguous range, in C or in Fortran order. Extents of 1 may have any stride.
bool contiguous(const std::vector<std::int64_t>& shape, const std::vector<std::int64_t>& strides,
                std::int64_t unit) {
  auto in_order = [&](bool c_order) {
    std::int64_t expect = unit;
    for (std::size_t k = 0; k < shape.size(); ++k) {
      const std::size_t i = c_order ? shape.size() - 1 - k : k;
      if (shape[i] == 0) return true;
      if (shape[i] != 1 && strides[i] != expect) return false;
      expect *= shape[i];
    }
    return true;
  };
  return in_order(true) || in_order(false);
}

std::size_t element_count(const std::vector<std::int64_t>& shape) {
  std::size_t n = 1;
  for (const std::int64_t e : shape) {
    if (e < 0) throw py::value_error("the array has a negative extent");
    n *= static_cast<std::size_t>(e);
  }
  return n;
}

// typestr "<f4", "|u1", "<c8": the item size is the number after the kind.
std::size_t typestr_itemsize(const std::string& typestr) {
  if (typestr.size() < 3) throw py::value_error("__cuda_array_interface__: bad typestr '" + typestr + "'");
  return static_cast<std::size_t>(std::stoul(typestr.substr(2)));
}

void not_contiguous(const char* source) {
  throw py::value_error(std::string("the buffer is not contiguous (") + source +
                        "): pass a contiguous array (numpy.ascontiguousarray, tensor.contiguous())");
}

void read_only(const char* source) {
  throw py::type_error(std::string("the buffer is read-only (") + source +
                       "): bytes read from the file need writable memory");
}

// hasattr without the AttributeError: py::hasattr lets the lookup raise one, whose message
// (formatted per call) cost a 4 KiB read from Python more than the read's own syscall.
bool has_attr(py::handle obj, PyObject* name) {
  PyObject* found = nullptr;
#if PY_VERSION_HEX >= 0x030D0000
  const int rc = PyObject_GetOptionalAttr(obj.ptr(), name, &found);
#else
  const int rc = _PyObject_LookupAttr(obj.ptr(), name, &found);
#endif
  if (rc < 0) throw py::error_already_set();
  Py_XDECREF(found);
  return rc == 1;
}

// Interned once; never released (a module-lifetime constant, like CPython's own).
PyObject* interned(const char* name) { return PyUnicode_InternFromString(name); }

}  // namespace

Buffer::Buffer(Buffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)),
      nbytes_(std::exchange(o.nbytes_, 0)),
      cuda_device_(std::exchange(o.cuda_device_, std::nullopt)),
      stream_(std::exchange(o.stream_, std::nullopt)),
      source_(o.source_),
      owner_(std::move(o.owner_)),
      view_(std::move(o.view_)),
      managed_(std::exchange(o.managed_, nullptr)) {}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    release();
    data_ = std::exchange(o.data_, nullptr);
    nbytes_ = std::exchange(o.nbytes_, 0);
    cuda_device_ = std::exchange(o.cuda_device_, std::nullopt);
    stream_ = std::exchange(o.stream_, std::nullopt);
    source_ = o.source_;
    owner_ = std::move(o.owner_);
    view_ = std::move(o.view_);
    managed_ = std::exchange(o.managed_, nullptr);
  }
  return *this;
}

Buffer::~Buffer() { release(); }

void Buffer::release() noexcept {
  if (view_) PyBuffer_Release(view_.get());
  view_.reset();
  if (managed_ != nullptr && managed_->deleter != nullptr) managed_->deleter(managed_);
  managed_ = nullptr;
  owner_ = py::object();
  data_ = nullptr;
  nbytes_ = 0;
}

Buffer Buffer::acquire(py::handle obj, Access access) {
  Buffer b;
  b.owner_ = py::reinterpret_borrow<py::object>(obj);
  static PyObject* const cai = interned("__cuda_array_interface__");
  static PyObject* const dlpack = interned("__dlpack__");
  if (has_attr(obj, cai)) return from_cuda_array_interface(obj, access, std::move(b));
  if (PyObject_CheckBuffer(obj.ptr()) != 0) return from_buffer_protocol(obj, access, std::move(b));
  if (has_attr(obj, dlpack)) return from_dlpack(obj, std::move(b));
  throw py::type_error(std::string("a transfer needs a buffer (NumPy array, PyTorch tensor, CuPy array, bytearray, "
                                   "anything with the buffer protocol, __cuda_array_interface__ or __dlpack__), not ") +
                       std::string(py::str(obj.get_type().attr("__name__"))));
}

namespace {

// The ordinal of the CUDA device an object's memory is on: __dlpack_device__ where the object
// has it (PyTorch, CuPy), else 0.
int cuda_ordinal(py::handle obj) {
  if (!py::hasattr(obj, "__dlpack_device__")) return 0;
  const py::tuple dev = obj.attr("__dlpack_device__")();
  return dev[1].cast<int>();
}

}  // namespace

Buffer Buffer::from_cuda_array_interface(py::handle obj, Access access, Buffer b) {
  const py::dict cai = obj.attr("__cuda_array_interface__");
  const py::tuple data = cai["data"];
  const auto ptr = data[0].cast<std::uintptr_t>();
  const bool readonly = data[1].cast<bool>();
  const auto shape = cai["shape"].cast<std::vector<std::int64_t>>();
  const std::size_t itemsize = typestr_itemsize(cai["typestr"].cast<std::string>());
  if (cai.contains("strides") && !cai["strides"].is_none()) {
    const auto strides = cai["strides"].cast<std::vector<std::int64_t>>();
    if (!contiguous(shape, strides, static_cast<std::int64_t>(itemsize))) not_contiguous("__cuda_array_interface__");
  }
  if (access == Access::fill && readonly) read_only("__cuda_array_interface__");
  if (cai.contains("stream") && !cai["stream"].is_none()) b.stream_ = cai["stream"].cast<std::uintptr_t>();
  b.data_ = reinterpret_cast<void*>(ptr);
  b.nbytes_ = element_count(shape) * itemsize;
  b.cuda_device_ = cuda_ordinal(obj);
  b.source_ = "__cuda_array_interface__";
  return b;
}

Buffer Buffer::from_buffer_protocol(py::handle obj, Access access, Buffer b) {
  auto view = std::make_unique<Py_buffer>();
  if (PyObject_GetBuffer(obj.ptr(), view.get(), PyBUF_STRIDES) != 0) throw py::error_already_set();
  b.view_ = std::move(view);  // released by b from here on, also when a check below throws
  if (PyBuffer_IsContiguous(b.view_.get(), 'A') == 0) not_contiguous("buffer protocol");
  if (access == Access::fill && b.view_->readonly != 0) read_only("buffer protocol");
  b.data_ = b.view_->buf;
  b.nbytes_ = static_cast<std::size_t>(b.view_->len);
  b.source_ = "buffer protocol";
  return b;
}

Buffer Buffer::from_dlpack(py::handle obj, Buffer b) {
  py::capsule capsule = obj.attr("__dlpack__")();
  if (std::string(capsule.name() == nullptr ? "" : capsule.name()) != "dltensor") {
    throw py::value_error("__dlpack__ gave no unconsumed 'dltensor' capsule");
  }
  auto* managed = static_cast<DLManagedTensor*>(capsule.get_pointer());
  // Consumed: the capsule's destructor leaves it alone now, and this Buffer calls its deleter.
  if (PyCapsule_SetName(capsule.ptr(), "used_dltensor") != 0) throw py::error_already_set();
  b.managed_ = managed;
  const DLTensor& t = managed->dl_tensor;
  const std::vector<std::int64_t> shape(t.shape, t.shape + t.ndim);
  const std::size_t itemsize = (static_cast<std::size_t>(t.dtype.bits) * t.dtype.lanes + 7) / 8;
  if (t.strides != nullptr && !contiguous(shape, {t.strides, t.strides + t.ndim}, 1)) not_contiguous("DLPack");
  switch (t.device.device_type) {
    case kDLCPU:
    case kDLCUDAHost:
    case kDLCUDAManaged: break;
    case kDLCUDA: b.cuda_device_ = t.device.device_id; break;
    default:
      throw py::value_error("DLPack device type " + std::to_string(static_cast<int>(t.device.device_type)) +
                            " is neither host memory nor a CUDA device");
  }
  b.data_ = static_cast<char*>(t.data) + t.byte_offset;
  b.nbytes_ = element_count(shape) * itemsize;
  b.source_ = "DLPack";
  return b;
}

}  // namespace sluice::python
