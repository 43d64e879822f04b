#include "tensors.hpp"

#include <dlpack/dlpack.h>

#include <cstdint>
#include <string>
#include <vector>

namespace py = pybind11;

namespace sluice::python {
namespace {

// What a DLManagedTensor's manager_ctx owns: a reference to the load's memory and the arrays
// the DLTensor points to. Plain C++: deleting it needs no GIL.
struct Export {
  DLManagedTensor managed{};
  std::shared_ptr<const Loaded> owner;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;
};

void delete_export(DLManagedTensor* self) noexcept {
  delete static_cast<Export*>(self->manager_ctx);
}

// A capsule nobody consumed still owns its tensor; a consumer renames it "used_dltensor" and
// calls the deleter itself when done.
void capsule_destructor(PyObject* capsule) noexcept {
  if (PyCapsule_IsValid(capsule, "dltensor") == 0) return;
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
  if (managed != nullptr && managed->deleter != nullptr) managed->deleter(managed);
}

}  // namespace

HostBytes Tensor::host_bytes() const {
  if (owner_->dlpack_type != 1) {
    throw py::buffer_error("tensor '" + name() + "' is in device memory of " + device() +
                           ", which the host cannot read: use __dlpack__ (torch.from_dlpack)");
  }
  return {owner_, tensor_->data, static_cast<py::ssize_t>(info().bytes)};
}

std::string Tensor::dtype() const {
  if (bytes_view_) return "U8";
  if (info().dtype == DType::c128) return "C128";
  return dtype_text(info(), TensorFormat::safetensors);
}

py::tuple Tensor::shape() const {
  if (bytes_view_) return py::make_tuple(info().bytes);
  py::tuple out(info().shape.size());
  for (std::size_t i = 0; i < info().shape.size(); ++i) out[i] = py::int_(info().shape[i]);
  return out;
}

py::tuple Tensor::dlpack_device() const {
  return py::make_tuple(owner_->dlpack_type, owner_->dlpack_id);
}

py::capsule Tensor::dlpack(const py::object& /*stream*/, const py::object& dl_device,
                           const py::object& copy) const {
  // `stream` needs no wait: load() returns after every byte is in place, on host and device alike.
  if (!copy.is_none() && copy.cast<bool>())
    throw py::buffer_error("sluice.Tensor cannot export a copy (copy=True)");
  if (!dl_device.is_none() && !dl_device.equal(dlpack_device())) {
    throw py::buffer_error("sluice.Tensor '" + name() + "' is on " + device() +
                           ", not on the DLPack device asked for");
  }
  const std::optional<DLPackType> type =
      bytes_view_ ? to_dlpack(DType::u8) : to_dlpack(info().dtype);
  if (!type) {
    throw py::type_error(
        "tensor '" + name() + "' has type " + dtype() +
        ", which DLPack cannot describe: Tensor.view_bytes() gives its bytes as U8");
  }
  auto ex = std::make_unique<Export>();
  ex->owner = owner_;
  if (bytes_view_) {
    ex->shape = {static_cast<std::int64_t>(info().bytes)};
  } else {
    ex->shape.assign(info().shape.begin(), info().shape.end());
    if (info().fortran_order && ex->shape.size() > 1) {  // column-major, as stored: strides say so
      std::int64_t stride = 1;
      for (const std::int64_t extent : ex->shape) {
        ex->strides.push_back(stride);
        stride *= extent;
      }
    }
  }
  DLTensor& t = ex->managed.dl_tensor;
  t.data = tensor_->data;
  t.device = {static_cast<DLDeviceType>(owner_->dlpack_type), owner_->dlpack_id};
  t.ndim = static_cast<std::int32_t>(ex->shape.size());
  t.dtype = {type->code, type->bits, type->lanes};
  t.shape = ex->shape.data();
  t.strides = ex->strides.empty() ? nullptr : ex->strides.data();
  t.byte_offset = 0;
  ex->managed.manager_ctx = ex.get();
  ex->managed.deleter = &delete_export;
  PyObject* capsule = PyCapsule_New(&ex->managed, "dltensor", &capsule_destructor);
  if (capsule == nullptr) throw py::error_already_set();
  ex.release();  // owned by the capsule, then by its consumer
  return py::reinterpret_steal<py::capsule>(capsule);
}

std::string Tensor::repr() const {
  std::string shape_text = py::str(shape());
  return "sluice.Tensor('" + name() + "', dtype='" + dtype() + "', shape=" + shape_text +
         ", device='" + device() + "')";
}

py::dict tensor_dict(std::shared_ptr<const Loaded> loaded) {
  py::dict out;
  for (const LoadedTensor& t : loaded->tensors.tensors()) {
    out[py::str(t.info->name)] = py::cast(Tensor(loaded, &t));
  }
  return out;
}

void bind_tensors(py::module_& m) {
  // Only ever made for host memory (Tensor::host_bytes checks), as a buffer getter cannot fail.
  py::class_<HostBytes>(m, "_HostBytes", py::buffer_protocol()).def_buffer([](const HostBytes& b) {
    return py::buffer_info(b.data, 1, "B", 1, {b.nbytes}, {py::ssize_t{1}}, false);
  });
  py::class_<Tensor>(
      m, "Tensor",
      "One loaded tensor. Frameworks take it through DLPack (torch.from_dlpack, numpy.from_dlpack) "
      "without a copy; its memory is freed when the last tensor made from its load goes.")
      .def_property_readonly("name", &Tensor::name)
      .def_property_readonly("dtype", &Tensor::dtype,
                             "The safetensors spelling: 'F32', 'BF16', 'BOOL', ...")
      .def_property_readonly("shape", &Tensor::shape)
      .def_property_readonly("nbytes", &Tensor::nbytes)
      .def_property_readonly("device", &Tensor::device, "'cpu', 'pinned', 'sim' or 'cuda:N'.")
      .def_property_readonly("fortran_order", &Tensor::fortran_order,
                             "Whether the bytes are in column-major order (.npy files written so).")
      .def(
          "__dlpack__",
          [](const Tensor& t, const py::object& stream, const py::object& /*max_version*/,
             const py::object& dl_device,
             const py::object& copy) { return t.dlpack(stream, dl_device, copy); },
          py::arg("stream") = py::none(), py::kw_only(), py::arg("max_version") = py::none(),
          py::arg("dl_device") = py::none(), py::arg("copy") = py::none(),
          "A DLPack capsule of the tensor (unversioned DLManagedTensor).")
      .def("__dlpack_device__", &Tensor::dlpack_device,
           "(1, 0) for host and sim memory, (2, N) for cuda:N.")
      .def("view_bytes", &Tensor::view_bytes,
           "The tensor's bytes as a 1-d U8 Tensor on the same memory.")
      .def("_host_bytes", &Tensor::host_bytes,
           "The bytes of a tensor in host memory, as a writable buffer (numpy.frombuffer); "
           "BufferError for CUDA.")
      .def("__repr__", &Tensor::repr);
}

}  // namespace sluice::python
