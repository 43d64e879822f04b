#include "tensors.hpp"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "dlpack_export.hpp"

namespace py = pybind11;

namespace sluice::python {

HostBytes Tensor::host_bytes() const {
  if (owner_->dlpack_type != 1) {
    throw py::buffer_error("tensor '" + name() + "' is in device memory of " + device() +
                           ", which the host cannot read: use __dlpack__ (torch.from_dlpack)");
  }
  return {owner_, tensor_->data, static_cast<py::ssize_t>(info().bytes)};
}

std::string dtype_name(const TensorInfo& t) {
  if (t.dtype == DType::c128) return "C128";
  return dtype_text(t, TensorFormat::safetensors);
}

std::string Tensor::dtype() const {
  return bytes_view_ ? "U8" : dtype_name(info());
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
  DlpackRegion region{.owner = owner_, .data = tensor_->data, .device_type = owner_->dlpack_type,
                      .device_id = owner_->dlpack_id, .type = *type, .shape = {}, .strides = {}};
  if (bytes_view_) {
    region.shape = {static_cast<std::int64_t>(info().bytes)};
  } else {
    region.shape.assign(info().shape.begin(), info().shape.end());
    if (info().fortran_order && region.shape.size() > 1) {  // column-major, as stored: strides say so
      std::int64_t stride = 1;
      for (const std::int64_t extent : region.shape) {
        region.strides.push_back(stride);
        stride *= extent;
      }
    }
  }
  return make_dlpack_capsule(std::move(region));
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
