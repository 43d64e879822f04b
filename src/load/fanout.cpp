// The fan-out planner: one reader per needed byte range and scope group, and the moves after.
//
// Steps, per scope group (a node, or the whole job): (1) each item's needs, over the group's
// ranks, are cut at every range boundary into segments that one fixed set of ranks needs; (2)
// the segments are cut into chunks of at most exchange_budget; (3) the chunks go
// to readers by a greedy rule on a fixed order (largest first), so every rank that runs this
// computes the same plan with no communication. Nothing here depends on the order of the ranks
// in the input: ranks are indexed by id, and every tie is broken by ids and offsets.
#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "sluice/error.hpp"
#include "sluice/fanout.hpp"
#include "sluice/load.hpp"

namespace sluice {
namespace {

__extension__ typedef unsigned __int128 fanout_u128;  // byte sums times rank counts cannot wrap

const ErrorContext kFanoutCtx{.op = "plan_fanout"};

/// A piece of one item that one fixed, ascending set of ranks needs.
struct FanoutSegment {
  std::size_t item = 0;
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  std::vector<unsigned> needers;
};

/// A chunk of a segment for one scope group, with the group's needers only.
struct FanoutUnit {
  std::size_t item = 0;
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  unsigned group = 0;
  std::vector<unsigned> needers;
  unsigned reader = 0;
};

/// Checks ids, nodes, items and ranges; returns the ranks indexed by id.
std::vector<const FanoutRank*> fanout_check(const FanoutInput& in) {
  if (in.ranks.empty()) throw_usage_error(kFanoutCtx, "no ranks");
  if (in.exchange_budget == 0)
    throw_usage_error(kFanoutCtx, "exchange_budget must be larger than 0");
  if (in.only_node && (in.scope != FanoutScope::node || *in.only_node >= in.nodes)) {
    throw_usage_error(kFanoutCtx, fmt::format("only_node {} needs scope node and a node below {}",
                                              *in.only_node, in.nodes));
  }
  std::vector<const FanoutRank*> by_id(in.ranks.size(), nullptr);
  for (const FanoutRank& r : in.ranks) {
    if (r.rank >= in.ranks.size()) {
      throw_usage_error(kFanoutCtx, fmt::format("rank id {} is out of range (world {})", r.rank,
                                                in.ranks.size()));
    }
    if (by_id[r.rank] != nullptr)
      throw_usage_error(kFanoutCtx, fmt::format("rank id {} given twice", r.rank));
    by_id[r.rank] = &r;
    if (r.node >= in.nodes) {
      throw_usage_error(
          kFanoutCtx, fmt::format("rank {}: unknown node {} (nodes {})", r.rank, r.node, in.nodes));
    }
    if (r.everything && !r.needs.empty()) {
      throw_usage_error(kFanoutCtx,
                        fmt::format("rank {} needs everything and also lists parts", r.rank));
    }
    for (const FanoutNeed& n : r.needs) {
      if (n.item >= in.items.size()) {
        throw_usage_error(kFanoutCtx, fmt::format("rank {}: unknown item {}", r.rank, n.item));
      }
      const std::uint64_t bytes = in.items[n.item].bytes;
      for (const ByteRange& b : n.ranges) {
        if (b.offset > bytes || b.size > bytes - b.offset) {
          throw_usage_error(kFanoutCtx,
                            fmt::format("rank {}: range [{}, +{}) is past the end of {} ({} bytes)",
                                        r.rank, b.offset, b.size, in.items[n.item].name, bytes));
        }
      }
    }
  }
  return by_id;
}

/// Per item, every (rank, range) wanted by the ranks of `node` (all ranks when unset), in rank-id
/// order (so independent of the input order).
std::vector<std::vector<std::pair<unsigned, ByteRange>>> fanout_wants(
    const FanoutInput& in, const std::vector<const FanoutRank*>& by_id,
    std::optional<unsigned> node) {
  std::vector<std::vector<std::pair<unsigned, ByteRange>>> wants(in.items.size());
  for (const FanoutRank* r : by_id) {
    if (node && r->node != *node) continue;
    if (r->everything) {
      for (std::size_t i = 0; i < in.items.size(); ++i) {
        if (in.items[i].bytes > 0) wants[i].emplace_back(r->rank, ByteRange{0, in.items[i].bytes});
      }
      continue;
    }
    for (const FanoutNeed& n : r->needs) {
      for (const ByteRange& b : n.ranges) {
        if (b.size > 0) wants[n.item].emplace_back(r->rank, b);
      }
    }
  }
  return wants;
}

/// Cuts one item's wants at every boundary: a sweep that counts, per rank, how many of its
/// (possibly overlapping) ranges cover the current position.
void fanout_segments_of(std::size_t item, const std::vector<std::pair<unsigned, ByteRange>>& wants,
                        std::vector<FanoutSegment>& out) {
  std::map<std::uint64_t, std::vector<std::pair<unsigned, int>>> events;
  for (const auto& [rank, b] : wants) {
    events[b.offset].emplace_back(rank, +1);
    events[b.offset + b.size].emplace_back(rank, -1);
  }
  std::map<unsigned, int> active;  // ordered: needers come out ascending
  std::uint64_t at = 0;
  for (const auto& [pos, changes] : events) {
    if (!active.empty() && pos > at) {
      FanoutSegment s{.item = item, .offset = at, .size = pos - at, .needers = {}};
      for (const auto& [rank, count] : active) s.needers.push_back(rank);
      out.push_back(std::move(s));
    }
    for (const auto& [rank, delta] : changes) {
      if ((active[rank] += delta) == 0) active.erase(rank);
    }
    at = pos;
  }
}

/// Cuts the segments of group `group` (their needers are all in it) at exchange_budget from each
/// segment's start. Segments are made per group, so one node's chunks never depend on what
/// ranks of other nodes need.
void fanout_units(const FanoutInput& in, unsigned group, const std::vector<FanoutSegment>& segments,
                  std::vector<FanoutUnit>& units) {
  for (const FanoutSegment& s : segments) {
    for (std::uint64_t o = 0; o < s.size; o += in.exchange_budget) {
      units.push_back(FanoutUnit{.item = s.item,
                                 .offset = s.offset + o,
                                 .size = std::min(in.exchange_budget, s.size - o),
                                 .group = group,
                                 .needers = s.needers,
                                 .reader = 0});
    }
  }
}

/// The segments of the needs of the ranks of `node` (all ranks when unset), and their bytes.
std::uint64_t fanout_segments(const FanoutInput& in, const std::vector<const FanoutRank*>& by_id,
                              std::optional<unsigned> node, std::vector<FanoutSegment>& out) {
  const auto wants = fanout_wants(in, by_id, node);
  out.clear();
  for (std::size_t i = 0; i < wants.size(); ++i) fanout_segments_of(i, wants[i], out);
  std::uint64_t bytes = 0;
  for (const FanoutSegment& s : out) bytes += s.size;
  return bytes;
}

/// Greedy assignment inside one group (members ascending, units of this group only).
void fanout_assign_group(const std::vector<unsigned>& members, std::vector<FanoutUnit*> units,
                         std::vector<FanoutRankBytes>& bytes) {
  if (units.empty()) return;
  std::sort(units.begin(), units.end(), [](const FanoutUnit* a, const FanoutUnit* b) {
    return std::tuple(b->size, a->item, a->offset) < std::tuple(a->size, b->item, b->offset);
  });
  fanout_u128 total = 0;
  for (const FanoutUnit* u : units) total += u->size;
  const fanout_u128 n = members.size();
  const fanout_u128 largest = units.front()->size;
  std::set<std::pair<std::uint64_t, unsigned>> by_load;
  for (unsigned m : members) by_load.emplace(bytes[m].read, m);
  for (FanoutUnit* u : units) {
    unsigned reader = by_load.begin()->second;
    // The least-loaded needer (ties: lowest id) reads it itself while that keeps its bytes within
    // the ideal share plus one chunk: load + size <= total / n + largest, in integers.
    const unsigned* best = nullptr;
    for (const unsigned& r : u->needers) {
      if (best == nullptr || bytes[r].read < bytes[*best].read) best = &r;
    }
    if (best != nullptr && (fanout_u128{bytes[*best].read} + u->size) * n <= total + largest * n) {
      reader = *best;
    }
    by_load.erase({bytes[reader].read, reader});
    bytes[reader].read += u->size;
    by_load.emplace(bytes[reader].read, reader);
    u->reader = reader;
  }
}

FanoutPlan fanout_emit(const FanoutInput& in, std::vector<FanoutUnit>& units,
                       std::vector<FanoutRankBytes> bytes) {
  std::sort(units.begin(), units.end(), [](const FanoutUnit& a, const FanoutUnit& b) {
    return std::tuple(a.item, a.offset, a.group) < std::tuple(b.item, b.offset, b.group);
  });
  FanoutPlan plan;
  for (const FanoutUnit& u : units) {
    const FanoutItem& item = in.items[u.item];
    plan.reads.push_back(FanoutRead{.item = u.item,
                                    .file_index = item.file_index,
                                    .offset = u.offset,
                                    .file_offset = item.offset + u.offset,
                                    .size = u.size,
                                    .reader = u.reader,
                                    .group = u.group});
    plan.read_bytes += u.size;
    FanoutMove m{.read = plan.reads.size() - 1,
                 .kind = FanoutMoveKind::send,
                 .source = u.reader,
                 .receivers = {}};
    for (unsigned r : u.needers) {
      if (r != u.reader) m.receivers.push_back(r);
    }
    if (m.receivers.empty()) continue;
    if (m.receivers.size() > 1) m.kind = FanoutMoveKind::broadcast;
    bytes[u.reader].sent += u.size * m.receivers.size();
    for (unsigned r : m.receivers) bytes[r].received += u.size;
    plan.moves.push_back(std::move(m));
  }
  plan.ranks = std::move(bytes);
  return plan;
}

}  // namespace

std::string_view to_string(FanoutScope s) noexcept {
  return s == FanoutScope::job ? "job" : "node";
}

FanoutScope parse_fanout_scope(std::string_view text) {
  if (text == "node") return FanoutScope::node;
  if (text == "job") return FanoutScope::job;
  throw_usage_error(kFanoutCtx, fmt::format("scope must be node or job, not '{}'", text));
}

std::string_view to_string(FanoutMoveKind k) noexcept {
  return k == FanoutMoveKind::broadcast ? "broadcast" : "send";
}

std::vector<FanoutItem> fanout_items(const Checkpoint& checkpoint) {
  std::vector<FanoutItem> items;
  items.reserve(checkpoint.tensors().size());
  for (const TensorInfo& t : checkpoint.tensors()) {
    items.push_back(FanoutItem{
        .name = t.name, .file_index = t.file_index, .offset = t.offset, .bytes = t.bytes});
  }
  return items;
}

FanoutPlan plan_fanout(const FanoutInput& in) {
  const std::vector<const FanoutRank*> by_id = fanout_check(in);
  const bool per_node = in.scope == FanoutScope::node;
  const unsigned groups = per_node ? in.nodes : 1;
  std::vector<FanoutSegment> segments;
  std::vector<FanoutUnit> units;
  std::uint64_t unique = 0;
  for (unsigned g = 0; g < groups; ++g) {
    if (in.only_node && g != *in.only_node) continue;
    unique =
        fanout_segments(in, by_id, per_node ? std::optional<unsigned>(g) : std::nullopt, segments);
    fanout_units(in, g, segments, units);
  }
  // Bytes needed anywhere, each once: per node plans saw one node's needs at a time.
  if (per_node && !in.only_node) unique = fanout_segments(in, by_id, std::nullopt, segments);

  std::vector<std::vector<unsigned>> members(groups);
  for (const FanoutRank* r : by_id)
    members[in.scope == FanoutScope::node ? r->node : 0].push_back(r->rank);
  std::vector<std::vector<FanoutUnit*>> of_group(groups);
  for (FanoutUnit& u : units) of_group[u.group].push_back(&u);
  std::vector<FanoutRankBytes> bytes(by_id.size());
  for (unsigned g = 0; g < groups; ++g) fanout_assign_group(members[g], of_group[g], bytes);

  FanoutPlan plan = fanout_emit(in, units, std::move(bytes));
  plan.unique_bytes = unique;
  return plan;
}

namespace {

void fanout_check_split(unsigned part, unsigned world) {
  if (world == 0) throw_usage_error(kFanoutCtx, "world must be at least 1");
  if (part >= world)
    throw_usage_error(kFanoutCtx, fmt::format("part {} is not below world {}", part, world));
}

std::pair<std::uint64_t, std::uint64_t> fanout_split(std::uint64_t n, unsigned part,
                                                     unsigned world) {
  const auto at = [&](unsigned p) {
    return static_cast<std::uint64_t>(fanout_u128{n} * p / world);
  };
  return {at(part), at(part + 1)};
}

void fanout_check_2d(const TensorInfo& t) {
  const ErrorContext& ctx = kFanoutCtx;
  if (t.shape.size() != 2)
    throw_usage_error(
        ctx, fmt::format("{}: a slice needs a 2-d tensor, not {}-d", t.name, t.shape.size()));
  if (t.fortran_order)
    throw_usage_error(ctx,
                      fmt::format("{}: column-major (Fortran order) is not supported", t.name));
  if (t.element_bits == 0 || t.element_bits % 8 != 0) {
    throw_usage_error(
        ctx, fmt::format("{}: elements of {} bits do not start on a byte", t.name, t.element_bits));
  }
}

}  // namespace

std::vector<ByteRange> row_slice_ranges(std::uint64_t rows, std::uint64_t cols,
                                        std::uint64_t element_bytes, unsigned part,
                                        unsigned world) {
  fanout_check_split(part, world);
  const auto [first, last] = fanout_split(rows, part, world);
  const std::uint64_t row_bytes = cols * element_bytes;
  if (last == first || row_bytes == 0) return {};
  return {ByteRange{first * row_bytes, (last - first) * row_bytes}};
}

std::vector<ByteRange> column_slice_ranges(std::uint64_t rows, std::uint64_t cols,
                                           std::uint64_t element_bytes, unsigned part,
                                           unsigned world) {
  fanout_check_split(part, world);
  const auto [first, last] = fanout_split(cols, part, world);
  if (last == first || element_bytes == 0) return {};
  std::vector<ByteRange> out;
  out.reserve(rows);
  for (std::uint64_t r = 0; r < rows; ++r) {
    out.push_back(ByteRange{(r * cols + first) * element_bytes, (last - first) * element_bytes});
  }
  return out;
}

std::vector<ByteRange> row_slice_ranges(const TensorInfo& t, unsigned part, unsigned world) {
  fanout_check_2d(t);
  return row_slice_ranges(t.shape[0], t.shape[1], t.element_bits / 8, part, world);
}

std::vector<ByteRange> column_slice_ranges(const TensorInfo& t, unsigned part, unsigned world) {
  fanout_check_2d(t);
  return column_slice_ranges(t.shape[0], t.shape[1], t.element_bits / 8, part, world);
}

}  // namespace sluice
