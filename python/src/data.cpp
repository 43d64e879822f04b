#include "data.hpp"

#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "sluice/ingest.hpp"
#include "dlpack_export.hpp"
#include "sluice/units.hpp"
#include "target.hpp"

namespace py = pybind11;

namespace sluice::python {
namespace {

// One batch as Python sees it: the Batch (its lease), the dataset for its sample ids, and how
// DLPack names its memory.
struct BatchRef {
  Batch batch;
  std::shared_ptr<const Dataset> dataset;
  std::string device;
  int dlpack_type = 1;
  int dlpack_id = 0;
};

// A region of a batch with a type and a shape: what torch.from_dlpack takes.
class View {
 public:
  View(std::shared_ptr<const BatchRef> owner, std::uint64_t offset, std::vector<std::int64_t> shape, DType dtype)
      : owner_(std::move(owner)), offset_(offset), shape_(std::move(shape)), dtype_(dtype) {}

  [[nodiscard]] py::tuple dlpack_device() const { return py::make_tuple(owner_->dlpack_type, owner_->dlpack_id); }
  [[nodiscard]] std::uintptr_t data_ptr() const {
    return reinterpret_cast<std::uintptr_t>(owner_->batch.data()) + offset_;
  }
  [[nodiscard]] py::tuple shape() const { return py::cast(shape_); }
  [[nodiscard]] std::string dtype() const { return std::string(safetensors_name(dtype_)); }

  [[nodiscard]] py::capsule dlpack(const py::object& dl_device, const py::object& copy) const {
    // No `stream` wait: the Loader hands a batch out once its copy to the device is complete.
    if (!copy.is_none() && copy.cast<bool>()) throw py::buffer_error("a batch cannot export a copy (copy=True)");
    if (!dl_device.is_none() && !dl_device.equal(dlpack_device())) {
      throw py::buffer_error("the batch is on " + owner_->device + ", not on the DLPack device asked for");
    }
    const std::optional<DLPackType> type = to_dlpack(dtype_);
    if (!type) throw py::type_error("type " + dtype() + " has no DLPack code: view the batch's bytes as U8");
    return make_dlpack_capsule({.owner = owner_,
                                .data = static_cast<std::byte*>(owner_->batch.data()) + offset_,
                                .device_type = owner_->dlpack_type,
                                .device_id = owner_->dlpack_id,
                                .type = *type,
                                .shape = shape_,
                                .strides = {}});  // C order
  }

 private:
  std::shared_ptr<const BatchRef> owner_;
  std::uint64_t offset_ = 0;
  std::vector<std::int64_t> shape_;
  DType dtype_ = DType::u8;
};

class PyBatch {
 public:
  explicit PyBatch(std::shared_ptr<const BatchRef> ref) : ref_(std::move(ref)) {}

  [[nodiscard]] const Batch& batch() const noexcept { return ref_->batch; }
  [[nodiscard]] std::vector<std::uint64_t> samples() const {
    return {batch().samples().begin(), batch().samples().end()};
  }
  // The ids of `sluice ingest --emit`: ints, or "SHARD/KEY" strings for WebDataset.
  [[nodiscard]] py::list ids() const {
    py::list out;
    const bool wds = ref_->dataset->format() == DatasetFormat::webdataset;
    for (const std::uint64_t k : batch().samples()) {
      if (wds) {
        out.append(py::str(ref_->dataset->sample_id(k)));
      } else {
        out.append(py::int_(k));
      }
    }
    return out;
  }
  [[nodiscard]] std::optional<std::string> dtype() const {
    const auto s = batch().shape();
    if (!s) return std::nullopt;
    return std::string(safetensors_name(s->dtype));
  }
  [[nodiscard]] std::optional<std::vector<std::uint64_t>> shape() const {
    const auto s = batch().shape();
    if (!s) return std::nullopt;
    return s->shape;
  }
  // (name, byte offset in the batch, offsets of each sample within the field)
  [[nodiscard]] py::list fields() const {
    py::list out;
    for (const BatchField& f : batch().fields()) out.append(py::make_tuple(f.name, f.offset, f.offsets));
    return out;
  }
  // `shape` elements of `dtype` at byte `offset` of the batch.
  [[nodiscard]] View view(std::uint64_t offset, const std::vector<std::int64_t>& shape, const std::string& dtype) const {
    const std::optional<DType> t = parse_safetensors_dtype(dtype);
    if (!t || element_bits(*t) % 8 != 0 || element_bits(*t) == 0) throw py::value_error("no whole-byte type " + dtype);
    std::uint64_t bytes = element_bits(*t) / 8;
    for (const std::int64_t e : shape) {
      if (e < 0) throw py::value_error("a negative extent in the shape");
      bytes *= static_cast<std::uint64_t>(e);
    }
    if (offset > batch().bytes() || bytes > batch().bytes() - offset) {
      throw py::value_error("the view (" + std::to_string(bytes) + " bytes at " + std::to_string(offset) +
                            ") runs past the batch's " + std::to_string(batch().bytes()) + " bytes");
    }
    return {ref_, offset, shape, *t};
  }

 private:
  std::shared_ptr<const BatchRef> ref_;
};

std::uint64_t budget_bytes(const py::handle& budget) {
  if (py::isinstance<py::bool_>(budget)) throw py::type_error("memory_budget must be an int or a str like '1G'");
  if (py::isinstance<py::int_>(budget)) {
    const auto v = budget.cast<long long>();
    if (v <= 0) throw py::value_error("memory_budget must be positive");
    return static_cast<std::uint64_t>(v);
  }
  if (py::isinstance<py::str>(budget)) {
    const auto text = budget.cast<std::string>();
    const auto v = parse_size(text);
    if (!v || *v == 0) throw py::value_error("memory_budget '" + text + "' is not a size like '512M' or '1G'");
    return *v;
  }
  throw py::type_error("memory_budget must be an int or a str like '1G'");
}

class PyLoader {
 public:
  PyLoader(const std::vector<std::string>& paths, const std::optional<std::string>& format, std::uint64_t batch_size,
           std::uint64_t seq_len, std::uint64_t seed, bool shuffle, unsigned rank, unsigned world,
           const py::object& device, unsigned prefetch, const py::object& memory_budget, bool drop_last) {
    DatasetOptions d;
    if (format) {
      d.format = parse_dataset_format(*format);
      if (!d.format) throw py::value_error("format must be 'megatron', 'wds' or 'npy', not '" + *format + "'");
    }
    d.seq_len = seq_len;
    IngestOptions o;
    o.batch_size = batch_size;
    o.seed = seed;
    o.shuffle = shuffle;
    o.drop_last = drop_last;
    o.rank = rank;
    o.world = world;
    o.prefetch = prefetch;
    o.memory_budget = budget_bytes(memory_budget);
    target_ = parse_target(device);
    o.target = target_.target;
    o.device = target_.device;
    py::gil_scoped_release unlocked;
    dataset_ = Dataset::open(paths, d);
    loader_ = std::make_unique<Loader>(dataset_, std::move(o));
  }

  std::optional<PyBatch> next() {
    std::optional<Batch> b;
    {
      py::gil_scoped_release unlocked;
      const std::lock_guard lock(calls_);
      b = loader_->next();
    }
    if (!b) return std::nullopt;
    return PyBatch(std::make_shared<const BatchRef>(
        BatchRef{std::move(*b), dataset_, target_.name, target_.dlpack_type, target_.dlpack_id}));
  }
  void set_epoch(std::uint64_t e) {
    py::gil_scoped_release unlocked;
    const std::lock_guard lock(calls_);
    loader_->set_epoch(e);
  }
  void restore(const std::string& json) {
    const LoaderState s = LoaderState::from_json(json);
    py::gil_scoped_release unlocked;
    const std::lock_guard lock(calls_);
    loader_->restore(s);
  }
  [[nodiscard]] Loader& loader() { return *loader_; }
  [[nodiscard]] const Dataset& dataset() const { return *dataset_; }
  [[nodiscard]] const std::string& device() const { return target_.name; }

 private:
  Target target_;
  std::shared_ptr<const Dataset> dataset_;
  std::unique_ptr<Loader> loader_;
  std::mutex calls_;  // next(), set_epoch() and restore() one at a time (next() runs without the GIL)
};

py::dict stats_dict(const IngestStats& s) {
  py::dict d;
  d["steps"] = s.steps;
  d["samples"] = s.samples;
  d["bytes"] = s.bytes;
  d["dropped"] = s.dropped;
  d["wall_seconds"] = s.wall_seconds;
  d["wait_seconds"] = s.wait_seconds;
  d["wait_p50_seconds"] = s.wait_p50_seconds;
  d["wait_p99_seconds"] = s.wait_p99_seconds;
  d["stall_fraction"] = s.stall_fraction;
  d["samples_per_second"] = s.samples_per_second;
  d["bytes_per_second"] = s.bytes_per_second;
  d["path"] = std::string(to_string(s.path));
  d["reason"] = s.reason;
  d["stall_cause"] = s.stall_cause;
  return d;
}

void bind_views(py::module_& m) {
  py::class_<View>(m, "_View", "A region of a batch with a type and shape, for DLPack consumers (no copy).")
      .def_property_readonly("shape", &View::shape)
      .def_property_readonly("dtype", &View::dtype)
      .def_property_readonly("data_ptr", &View::data_ptr, "The address of its first byte.")
      .def(
          "__dlpack__",
          [](const View& v, const py::object& /*stream*/, const py::object& /*max_version*/,
             const py::object& dl_device, const py::object& copy) { return v.dlpack(dl_device, copy); },
          py::arg("stream") = py::none(), py::kw_only(), py::arg("max_version") = py::none(),
          py::arg("dl_device") = py::none(), py::arg("copy") = py::none())
      .def("__dlpack_device__", &View::dlpack_device);
  py::class_<PyBatch>(m, "_Batch", "One batch of a sluice.data.Loader: its lease and what it holds.")
      .def_property_readonly("epoch", [](const PyBatch& b) { return b.batch().epoch(); })
      .def_property_readonly("step", [](const PyBatch& b) { return b.batch().step(); })
      .def_property_readonly("rank", [](const PyBatch& b) { return b.batch().rank(); })
      .def_property_readonly("samples", &PyBatch::samples)
      .def("ids", &PyBatch::ids)
      .def_property_readonly("nbytes", [](const PyBatch& b) { return b.batch().bytes(); })
      .def_property_readonly("data_ptr",
                             [](const PyBatch& b) { return reinterpret_cast<std::uintptr_t>(b.batch().data()); })
      .def_property_readonly("dtype", &PyBatch::dtype)
      .def_property_readonly("shape", &PyBatch::shape)
      .def_property_readonly("fields", &PyBatch::fields)
      .def("view", &PyBatch::view, py::arg("offset"), py::arg("shape"), py::arg("dtype"))
      .def("xxh3", [](const PyBatch& b, std::size_t i) { return b.batch().xxh3(i); }, py::arg("i"));
}

}  // namespace

void bind_data(py::module_& m) {
  bind_views(m);
  py::class_<PyLoader>(m, "_Loader", "sluice::Loader over a Dataset (sluice.data.Loader is the public class).")
      .def(py::init<const std::vector<std::string>&, const std::optional<std::string>&, std::uint64_t, std::uint64_t,
                    std::uint64_t, bool, unsigned, unsigned, const py::object&, unsigned, const py::object&, bool>(),
           py::arg("paths"), py::arg("format"), py::arg("batch_size"), py::arg("seq_len"), py::arg("seed"),
           py::arg("shuffle"), py::arg("rank"), py::arg("world"), py::arg("device"), py::arg("prefetch"),
           py::arg("memory_budget"), py::arg("drop_last"))
      .def("next", &PyLoader::next, "The next batch of the epoch, or None at its end (the GIL released meanwhile).")
      .def("set_epoch", &PyLoader::set_epoch, py::arg("epoch"))
      .def("restore", &PyLoader::restore, py::arg("state_json"))
      .def("state", [](PyLoader& l) { return l.loader().state().to_json(); })
      .def_property_readonly("epoch", [](PyLoader& l) { return l.loader().epoch(); })
      .def_property_readonly("steps_per_epoch", [](PyLoader& l) { return l.loader().steps_per_epoch(); })
      .def("stats", [](PyLoader& l) { return stats_dict(l.loader().stats()); })
      .def("memory_in_use", [](PyLoader& l) { return l.loader().memory_in_use(); })
      .def("memory_high_water", [](PyLoader& l) { return l.loader().memory_high_water(); })
      .def("memory_reserved", [](PyLoader& l) { return l.loader().memory_reserved(); })
      .def_property_readonly("device", &PyLoader::device)
      .def_property_readonly("format", [](const PyLoader& l) { return std::string(to_string(l.dataset().format())); })
      .def_property_readonly("samples", [](const PyLoader& l) { return l.dataset().size(); })
      .def("describe", [](const PyLoader& l) { return l.dataset().describe(); });
}

}  // namespace sluice::python
