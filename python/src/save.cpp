// Saving from Python: the framework modules (sluice/torch.py, sluice/numpy.py) hand over each
// tensor as (name, safetensors dtype, shape, buffer), the buffer being the tensor's bytes in any
// form Buffer takes (a NumPy byte view, a PyTorch uint8 view, CUDA memory through
// __cuda_array_interface__). The GIL is released while bytes move. A sharded save's plan is
// recomputed from the same entries by each call, so every step and every rank agree on it.
#include "save.hpp"

#include <pybind11/stl.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "buffers.hpp"
#include "sluice/device.hpp"
#include "sluice/save.hpp"

namespace py = pybind11;

namespace sluice::python {
namespace {

// The report of this thread's last save (sluice.last_save_report()).
thread_local std::optional<TransferResult> t_last_save_report;

// The tensors to save, with the memory they were taken from (kept until the save returns).
struct Held {
  std::vector<Buffer> buffers;
  std::vector<SaveTensor> tensors;
  std::shared_ptr<Device> device;
};

Held hold(const py::iterable& items, const std::optional<std::string>& device) {
  Held h;
  std::optional<int> cuda;
  for (const py::handle item : items) {
    const auto entry = item.cast<py::tuple>();
    if (entry.size() != 4) throw py::value_error("a tensor entry is (name, dtype, shape, buffer)");
    SaveTensor t;
    t.name = entry[0].cast<std::string>();
    const auto dtype = parse_safetensors_dtype(entry[1].cast<std::string>());
    if (!dtype) throw py::value_error("tensor '" + t.name + "': unknown safetensors dtype '" + entry[1].cast<std::string>() + "'");
    t.dtype = *dtype;
    t.shape = entry[2].cast<std::vector<std::uint64_t>>();
    h.buffers.push_back(Buffer::acquire(entry[3], Access::source));
    const Buffer& b = h.buffers.back();
    if (const auto ord = b.cuda_device()) {
      if (cuda && *cuda != *ord) throw py::value_error("tensors on different GPUs (cuda:" + std::to_string(*cuda) + " and cuda:" + std::to_string(*ord) + "): save each GPU's separately");
      cuda = ord;
    }
    t.data = b.data();
    t.bytes = b.nbytes();
    h.tensors.push_back(std::move(t));
  }
  const std::string asked = device.value_or("");
  py::gil_scoped_release unlocked;
  if (cuda) {
    h.device = open_device("cuda:" + std::to_string(*cuda));
  } else if (!asked.empty() && asked != "cpu") {
    h.device = open_device(asked);
  }
  return h;
}

SaveOptions options_for(const Held& h, const std::optional<std::map<std::string, std::string>>& metadata) {
  SaveOptions o;
  o.device = h.device;
  if (metadata) o.metadata = SaveMetadata(metadata->begin(), metadata->end());
  return o;
}

using Entries = std::vector<std::tuple<std::string, std::uint64_t, unsigned>>;

// The plan, with `tag` (8 hex digits, or empty) before ".safetensors" of every shard of a sharded
// plan: the shards of a save into a folder that holds a checkpoint get names no index there uses.
ShardPlan plan_of(const Entries& entries, std::uint64_t max_shard_bytes, const std::string& tag = {}) {
  std::vector<ShardEntry> e;
  e.reserve(entries.size());
  for (const auto& [name, bytes, rank] : entries) e.push_back({name, bytes, rank});
  ShardPlan p = plan_shards(e, max_shard_bytes);
  if (!tag.empty() && !p.index_file.empty()) {
    constexpr std::string_view suffix = ".safetensors";
    for (auto& s : p.shards) s.file = s.file.substr(0, s.file.size() - suffix.size()) + "-" + tag + std::string(suffix);
  }
  return p;
}

TransferResult merged(const std::vector<SaveResult>& results) {
  TransferResult r;
  for (const SaveResult& s : results) {
    r.bytes += s.transfer.bytes;
    r.ios += s.transfer.ios;
    r.seconds += s.transfer.seconds;
    if (r.reason.empty() || s.transfer.bytes > 0) {
      r.path = s.transfer.path;
      r.reason = s.transfer.reason;
    }
  }
  return r;
}

}  // namespace

void bind_save(py::module_& m) {
  m.def(
      "_save_safetensors",
      [](const std::string& path, const py::iterable& tensors,
         const std::optional<std::map<std::string, std::string>>& metadata, const std::optional<std::string>& device) {
        const Held h = hold(tensors, device);
        const SaveOptions o = options_for(h, metadata);
        SaveResult r;
        {
          py::gil_scoped_release unlocked;
          r = save_safetensors(path, h.tensors, o);
        }
        t_last_save_report = r.transfer;
        return r.transfer;
      },
      py::arg("path"), py::arg("tensors"), py::arg("metadata") = py::none(), py::arg("device") = py::none(),
      "Saves [(name, dtype, shape, buffer)] as a safetensors file, atomically and durably.");
  m.def(
      "_plan_shards",
      [](const Entries& entries, std::uint64_t max_shard_bytes, const std::string& tag) {
        const ShardPlan p = plan_of(entries, max_shard_bytes, tag);
        py::list shards;
        for (const auto& s : p.shards) shards.append(py::make_tuple(s.file, s.rank, s.tensors, s.bytes));
        return py::make_tuple(shards, p.index_file, p.total_bytes);
      },
      py::arg("entries"), py::arg("max_shard_bytes"), py::arg("tag") = "",
      "The shard plan of [(name, bytes, rank)]: ([(file, rank, names, bytes)], index_file, total_bytes).");
  m.def(
      "_begin_checkpoint",
      [](const std::string& directory, const Entries& entries, std::uint64_t max_shard_bytes) {
        const ShardPlan p = plan_of(entries, max_shard_bytes);
        py::gil_scoped_release unlocked;
        return begin_checkpoint(directory, p);
      },
      py::arg("directory"), py::arg("entries"), py::arg("max_shard_bytes"));
  m.def(
      "_save_shards",
      [](const std::string& directory, const Entries& entries, std::uint64_t max_shard_bytes, unsigned rank,
         const py::iterable& tensors, const std::optional<std::map<std::string, std::string>>& metadata,
         const std::optional<std::string>& device, const std::string& tag) {
        const ShardPlan p = plan_of(entries, max_shard_bytes, tag);
        const Held h = hold(tensors, device);
        const SaveOptions o = options_for(h, metadata);
        std::vector<SaveResult> r;
        {
          py::gil_scoped_release unlocked;
          r = save_shards(directory, p, rank, h.tensors, o);
        }
        t_last_save_report = merged(r);
        std::vector<std::string> files;
        for (const auto& s : r) files.push_back(s.path);
        return files;
      },
      py::arg("directory"), py::arg("entries"), py::arg("max_shard_bytes"), py::arg("rank"), py::arg("tensors"),
      py::arg("metadata") = py::none(), py::arg("device") = py::none(), py::arg("tag") = "");
  m.def(
      "_finish_checkpoint",
      [](const std::string& directory, const Entries& entries, std::uint64_t max_shard_bytes, const std::string& tag) {
        const ShardPlan p = plan_of(entries, max_shard_bytes, tag);
        py::gil_scoped_release unlocked;
        finish_checkpoint(directory, p);
      },
      py::arg("directory"), py::arg("entries"), py::arg("max_shard_bytes"), py::arg("tag") = "");
  m.def(
      "last_save_report", []() -> std::optional<TransferResult> { return t_last_save_report; },
      "The Result of this thread's last successful save (bytes written, path, reason, seconds, ios), or None "
      "before the first.");
}

}  // namespace sluice::python
