// The fan-out planner from Python (sluice.distributed.plan_fanout): plain tuples and dicts in and
// out, so that the pure-Python executor (sluice/distributed.py) needs no class of its own.
#include "fanout.hpp"

#include <pybind11/stl.h>

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "sluice/dtype.hpp"
#include "sluice/fanout.hpp"
#include "sluice/load.hpp"

namespace py = pybind11;

namespace sluice::python {
namespace {

using FanoutRanges = std::vector<std::pair<std::uint64_t, std::uint64_t>>;
// (name, file_index, offset, bytes)
using FanoutItemTuple = std::tuple<std::string, std::size_t, std::uint64_t, std::uint64_t>;
// (rank, node, needs): needs None for every item, else {item index: [(offset, size), ...]}
using FanoutRankTuple =
    std::tuple<unsigned, unsigned, std::optional<std::map<std::size_t, FanoutRanges>>>;

FanoutInput fanout_input(const std::vector<FanoutItemTuple>& items,
                         const std::vector<FanoutRankTuple>& ranks, unsigned nodes,
                         const std::string& scope, std::uint64_t budget,
                         std::optional<unsigned> only_node) {
  FanoutInput in{.items = {},
                 .ranks = {},
                 .nodes = nodes,
                 .scope = parse_fanout_scope(scope),
                 .exchange_budget = budget,
                 .only_node = only_node};
  for (const auto& [name, file, offset, bytes] : items)
    in.items.push_back({name, file, offset, bytes});
  for (const auto& [rank, node, needs] : ranks) {
    FanoutRank r{.rank = rank, .node = node, .everything = !needs.has_value(), .needs = {}};
    if (needs) {
      for (const auto& [item, ranges] : *needs) {
        FanoutNeed n{.item = item, .ranges = {}};
        for (const auto& [o, s] : ranges) n.ranges.push_back({o, s});
        r.needs.push_back(std::move(n));
      }
    }
    in.ranks.push_back(std::move(r));
  }
  return in;
}

py::dict fanout_dict(const FanoutPlan& p) {
  py::list reads, moves, ranks;
  for (const FanoutRead& r : p.reads) {
    reads.append(
        py::make_tuple(r.item, r.file_index, r.offset, r.file_offset, r.size, r.reader, r.group));
  }
  for (const FanoutMove& m : p.moves) {
    moves.append(py::make_tuple(m.read, std::string(to_string(m.kind)), m.source, m.receivers));
  }
  for (const FanoutRankBytes& b : p.ranks) ranks.append(py::make_tuple(b.read, b.sent, b.received));
  py::dict d;
  d["reads"] = reads;
  d["moves"] = moves;
  d["ranks"] = ranks;
  d["unique_bytes"] = p.unique_bytes;
  d["read_bytes"] = p.read_bytes;
  d["amplification"] = p.amplification();
  return d;
}

// (name, path, file_index, offset, bytes, safetensors dtype name, shape, fortran_order,
// element_bits) per tensor.
py::list fanout_checkpoint_items(const std::vector<std::string>& paths) {
  const Checkpoint cp = Checkpoint::open(paths);
  py::list out;
  for (const TensorInfo& t : cp.tensors()) {
    const TensorFileLayout& layout = cp.layouts().at(t.file_index);
    out.append(py::make_tuple(t.name, layout.path, t.file_index, t.offset, t.bytes,
                              std::string(safetensors_name(t.dtype)), t.shape, t.fortran_order,
                              t.element_bits));
  }
  return out;
}

}  // namespace

void bind_fanout(py::module_& m) {
  m.def(
      "_plan_fanout",
      [](const std::vector<FanoutItemTuple>& items, const std::vector<FanoutRankTuple>& ranks,
         unsigned nodes, const std::string& scope, std::uint64_t exchange_budget,
         std::optional<unsigned> only_node) {
        const FanoutInput in = fanout_input(items, ranks, nodes, scope, exchange_budget, only_node);
        FanoutPlan plan;
        {
          // Planning touches no Python object; a large plan takes seconds (docs/scale.md).
          py::gil_scoped_release unlocked;
          plan = plan_fanout(in);
        }
        return fanout_dict(plan);
      },
      py::arg("items"), py::arg("ranks"), py::arg("nodes") = 1, py::arg("scope") = "node",
      py::arg("exchange_budget") = FanoutInput{}.exchange_budget,
      py::arg("only_node") = py::none());
  m.def("_fanout_items", &fanout_checkpoint_items, py::arg("paths"));
  m.def(
      "_slice_ranges",
      [](std::uint64_t rows, std::uint64_t cols, std::uint64_t element_bytes, unsigned part,
         unsigned world, bool columns) {
        FanoutRanges out;
        for (const ByteRange& b : columns
                                      ? column_slice_ranges(rows, cols, element_bytes, part, world)
                                      : row_slice_ranges(rows, cols, element_bytes, part, world)) {
          out.emplace_back(b.offset, b.size);
        }
        return out;
      },
      py::arg("rows"), py::arg("cols"), py::arg("element_bytes"), py::arg("part"), py::arg("world"),
      py::arg("columns") = false);
}

}  // namespace sluice::python
