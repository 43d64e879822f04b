// Loading tensor files from Python: the device argument to a LoadTarget and Device, paths and
// options to a Checkpoint and LoadOptions, and the result to a dict of sluice.Tensor sharing one
// LoadedTensors. The GIL is released while headers are read and while bytes move.
#include "load.hpp"

#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sluice/device.hpp"
#include "sluice/load.hpp"
#include "target.hpp"
#include "tensors.hpp"

namespace py = pybind11;

namespace sluice::python {
namespace {

// The report of this thread's last load (sluice.last_load_report()).
thread_local std::optional<TransferResult> t_last_load_report;

// A str or os.PathLike, or a list/tuple of them.
std::vector<std::string> path_list(const py::handle& paths) {
  const py::object fspath = py::module_::import("os").attr("fspath");
  std::vector<std::string> out;
  if (py::isinstance<py::list>(paths) || py::isinstance<py::tuple>(paths)) {
    for (const py::handle p : paths) out.push_back(fspath(p).cast<std::string>());
    if (out.empty()) throw py::value_error("paths is empty: give a file, an index or a folder");
  } else {
    out.push_back(fspath(paths).cast<std::string>());
  }
  return out;
}

struct Share {
  std::optional<std::vector<std::string>> tensors;
  std::optional<int> rank;
  std::optional<int> world;
  std::string host_load = "auto";
};

LoadOptions make_options(const Target& t, const Share& s) {
  LoadOptions o;
  o.target = t.target;
  o.device = t.device;
  const std::optional<HostLoad> host_load = parse_host_load(s.host_load);
  if (!host_load) {
    throw py::value_error("host_load must be 'auto', 'read' or 'mapped', not '" + s.host_load + "'");
  }
  o.host_load = *host_load;
  if (s.tensors) o.tensors = *s.tensors;
  if (s.rank.has_value() != s.world.has_value())
    throw py::value_error("rank and world go together");
  if (s.world) {
    if (*s.world < 1) throw py::value_error("world must be at least 1");
    if (*s.rank < 0 || *s.rank >= *s.world) {
      throw py::value_error("rank must be in [0, world): rank " + std::to_string(*s.rank) +
                            ", world " + std::to_string(*s.world));
    }
    o.rank = static_cast<unsigned>(*s.rank);
    o.world = static_cast<unsigned>(*s.world);
  }
  return o;
}

py::dict load_checkpoint(const Checkpoint& cp, const py::handle& device, const Share& share) {
  const Target target = parse_target(device);
  const LoadOptions options = make_options(target, share);
  // LoadOptions reads an empty list as "all"; in Python, tensors=[] asks for none.
  if (share.tensors && share.tensors->empty()) return py::dict();
  auto loaded = std::make_shared<Loaded>();
  loaded->device = target.name;
  loaded->dlpack_type = target.dlpack_type;
  loaded->dlpack_id = target.dlpack_id;
  {
    py::gil_scoped_release unlocked;
    loaded->tensors = load(cp, options);
  }
  t_last_load_report = loaded->tensors.result();
  return tensor_dict(std::move(loaded));
}

Checkpoint open_checkpoint(const py::handle& paths) {
  const std::vector<std::string> list = path_list(paths);
  py::gil_scoped_release unlocked;
  return Checkpoint::open(list);
}

// Names a tensors= argument: None, one name, or an iterable of names.
std::optional<std::vector<std::string>> tensor_names(const py::handle& tensors) {
  if (tensors.is_none()) return std::nullopt;
  if (py::isinstance<py::str>(tensors))
    return std::vector<std::string>{tensors.cast<std::string>()};
  std::vector<std::string> out;
  for (const py::handle n : tensors) out.push_back(n.cast<std::string>());
  return out;
}

constexpr const char* kLoadDoc =
    "Loads tensor files into memory and returns {name: sluice.Tensor}. `paths`: a .safetensors or "
    ".npy file, a "
    "sharded checkpoint's *.index.json, a folder, or a list of them (str or os.PathLike). "
    "`device`: 'cpu' "
    "(pageable host memory, the default), 'pinned' (page-locked host memory of the 'auto' device), "
    "'sim' (the "
    "simulated GPU), 'cuda', 'cuda:N', 'auto', an int N (cuda:N) or a torch.device. `tensors`: "
    "names to load "
    "(None: all). `rank`/`world`: load only this process's share (both or neither; None: "
    "everything). `host_load` (device 'cpu' only): 'auto' (the default: where the page cache holds "
    "the files, the tensors view a private copy-on-write mapping of them, as safetensors' do; "
    "else a read into fresh memory), 'read' (always a copy in fresh memory) or 'mapped' (always "
    "the mapping). The tensors of one call share one allocation (or mapping), freed when the last "
    "of them (and of the framework tensors made from them) goes. sluice.last_load_report() says "
    "the path the bytes took ('mapped' for the mapping) and why.";

void bind_checkpoint(py::module_& m) {
  py::class_<Checkpoint>(m, "_Checkpoint",
                         "Opened tensor files, every header checked (sluice.safe_open's).")
      .def(py::init([](const py::object& paths) { return open_checkpoint(paths); }),
           py::arg("paths"))
      .def("keys",
           [](const Checkpoint& cp) {
             std::vector<std::string> out;
             for (const TensorInfo& t : cp.tensors()) out.push_back(t.name);
             return out;
           })
      .def("metadata",
           [](const Checkpoint& cp) -> py::object {
             // The first file's __metadata__ (safe_open opens one file); None when it has none.
             if (cp.layouts().empty() || cp.layouts()[0].metadata.empty()) return py::none();
             py::dict out;
             for (const auto& [k, v] : cp.layouts()[0].metadata) out[py::str(k)] = py::str(v);
             return out;
           })
      .def(
          "load",
          [](const Checkpoint& cp, const py::object& device, const py::object& tensors,
             std::optional<int> rank, std::optional<int> world, const std::string& host_load) {
            return load_checkpoint(cp, device, {tensor_names(tensors), rank, world, host_load});
          },
          py::arg("device") = "cpu", py::kw_only(), py::arg("tensors") = py::none(),
          py::arg("rank") = py::none(), py::arg("world") = py::none(),
          py::arg("host_load") = "auto")
      .def(
          "describe",
          [](const Checkpoint& cp, const std::string& name) {
            const TensorInfo& t = cp.at(name);  // a usage Error (ValueError) when none
            py::tuple shape(t.shape.size());
            for (std::size_t i = 0; i < t.shape.size(); ++i) shape[i] = t.shape[i];
            return py::make_tuple(dtype_name(t), shape, t.fortran_order, t.element_bits);
          },
          py::arg("name"),
          "(dtype, shape, fortran_order, bits per element) of tensor `name`; ValueError when none.")
      .def(
          "load_part",
          [](const Checkpoint& cp, const std::string& name, std::uint64_t first,
             std::uint64_t count, const py::object& device, const std::string& host_load) {
            const Checkpoint part = cp.part(name, first, count);  // no I/O: the GIL stays
            const py::dict one = load_checkpoint(part, device, {std::nullopt, std::nullopt, std::nullopt, host_load});
            return py::object(one[py::str(name)]);  // not the accessor: it refers to `one`
          },
          py::arg("name"), py::arg("first"), py::arg("count"), py::arg("device") = "cpu",
          py::arg("host_load") = "auto",
          "Elements [first, first + count) of tensor `name`, in storage order, as a 1-d "
          "sluice.Tensor "
          "on `device`: only their bytes are read (Checkpoint::part).");
}

}  // namespace

void bind_load(py::module_& m) {
  bind_checkpoint(m);
  m.def(
      "load",
      [](const py::object& paths, const py::object& device, const py::object& tensors,
         std::optional<int> rank, std::optional<int> world, const std::string& host_load) {
        const Share share{tensor_names(tensors), rank, world, host_load};
        const Checkpoint cp = open_checkpoint(paths);
        return load_checkpoint(cp, device, share);
      },
      py::arg("paths"), py::arg("device") = "cpu", py::kw_only(), py::arg("tensors") = py::none(),
      py::arg("rank") = py::none(), py::arg("world") = py::none(), py::arg("host_load") = "auto",
      kLoadDoc);
  m.def(
      "last_load_report", []() -> std::optional<TransferResult> { return t_last_load_report; },
      "The Result of this thread's last successful load (bytes, path, reason, seconds, ios, "
      "cached_bytes), or "
      "None before "
      "the first.");
  m.def("loaded_bytes_in_use", &loaded_bytes_in_use,
        "Bytes of memory that loaded tensors of this process hold (every load's allocation, "
        "whatever the device), "
        "until the last tensor of a load, sluice's or a framework's, is gone.");
}

}  // namespace sluice::python
