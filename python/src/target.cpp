#include "target.hpp"

#include <string>
#include <string_view>

namespace py = pybind11;

namespace sluice::python {
namespace {

// "cpu", "pinned", "sim", "auto", "cuda", "cuda:N", an int N (cuda:N, as safetensors takes it)
// or a torch.device (whose str() is one of these).
std::string device_spec(const py::handle& device) {
  if (device.is_none()) return "cpu";
  if (py::isinstance<py::bool_>(device))
    throw py::type_error("device must be a str, an int or a torch.device, not bool");
  if (py::isinstance<py::int_>(device)) return "cuda:" + std::to_string(device.cast<int>());
  if (py::isinstance<py::str>(device)) return device.cast<std::string>();
  if (py::hasattr(device, "type") && py::hasattr(device, "index"))
    return py::str(device).cast<std::string>();
  throw py::type_error("device must be a str, an int or a torch.device, not " +
                       py::str(device.get_type().attr("__name__")).cast<std::string>());
}

}  // namespace

Target parse_target(const py::handle& device) {
  Target t;
  const std::string spec = device_spec(device);
  if (spec == "cpu") return t;
  if (spec != "pinned" && spec != "sim" && spec != "auto" && spec.rfind("cuda", 0) != 0) {
    throw py::value_error(
        "device must be 'cpu', 'pinned', 'sim', 'auto', 'cuda' or 'cuda:N', not '" + spec + "'");
  }
  {
    py::gil_scoped_release unlocked;
    t.device = open_device(spec == "pinned" ? std::string_view("auto") : std::string_view(spec));
  }
  const DeviceInfo& info = t.device->info();
  const bool cuda = info.kind == DeviceKind::cuda;
  if (spec == "pinned") {
    t.target = LoadTarget::pinned_host;
    t.name = "pinned";
    return t;
  }
  t.target = LoadTarget::device;
  t.name = cuda ? "cuda:" + std::to_string(info.ordinal) : "sim";
  t.dlpack_type = cuda ? 2 : 1;  // kDLCUDA; the sim device's memory is host memory
  t.dlpack_id = cuda ? info.ordinal : 0;
  return t;
}

}  // namespace sluice::python
