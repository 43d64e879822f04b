// Planning a load: which tensors this rank takes, where each goes, and which reads bring them in.
//
// Tensors that lie back to back in a file form a group read as one range, so a checkpoint of
// thousands of tensors takes a few large reads. A group keeps the file's layout in memory
// (tensor i sits at group start + its distance from the group's first tensor in the file), so a
// tensor joins a group only when that distance is a multiple of `alignment`; otherwise it starts
// a new group at the next aligned address. Every tensor thus starts at an aligned address, and
// no bytes move after they land (the cause of the fastsafetensors weight corruption, #38).
#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "sluice/error.hpp"
#include "sluice/load.hpp"

namespace sluice {
namespace {

__extension__ typedef unsigned __int128 u128;  // byte sums times world cannot wrap

void check_options(const LoadOptions& o) {
  const ErrorContext ctx{.op = "load"};
  if (o.world == 0) throw_usage_error(ctx, "world must be at least 1");
  if (o.rank >= o.world) throw_usage_error(ctx, fmt::format("rank {} is not below world {}", o.rank, o.world));
  if (o.alignment == 0 || (o.alignment & (o.alignment - 1)) != 0) {
    throw_usage_error(ctx, fmt::format("alignment {} is not a power of two", o.alignment));
  }
  if (o.max_read == 0) throw_usage_error(ctx, "max_read must be larger than 0");
  if (o.inflight_bytes == 0) throw_usage_error(ctx, "inflight_bytes must be larger than 0");
}

std::vector<const TensorInfo*> select(const Checkpoint& cp, const LoadOptions& o) {
  std::vector<const TensorInfo*> chosen;
  if (o.tensors.empty()) {
    for (const TensorInfo& t : cp.tensors()) chosen.push_back(&t);
    return chosen;
  }
  std::set<const TensorInfo*> wanted;
  for (const std::string& name : o.tensors) wanted.insert(&cp.at(name));
  for (const TensorInfo& t : cp.tensors()) {
    if (wanted.contains(&t)) chosen.push_back(&t);
  }
  return chosen;
}

// The contiguous run of `all` (by cumulative bytes) that belongs to `rank`: a tensor belongs to
// the rank whose share holds the middle of its bytes.
std::vector<const TensorInfo*> share(const std::vector<const TensorInfo*>& all, unsigned rank, unsigned world) {
  if (world == 1) return all;
  u128 total = 0;
  for (const auto* t : all) total += t->bytes;
  std::vector<const TensorInfo*> mine;
  u128 before = 0;
  for (std::size_t i = 0; i < all.size(); ++i) {
    unsigned owner = 0;
    if (total == 0) {
      owner = static_cast<unsigned>(i * world / all.size());
    } else {
      const u128 mid = before + all[i]->bytes / 2;
      owner = static_cast<unsigned>(std::min<u128>(mid * world / total, world - 1));
    }
    before += all[i]->bytes;
    if (owner == rank) mine.push_back(all[i]);
  }
  return mine;
}

}  // namespace

LoadPlan plan_load(const Checkpoint& cp, const LoadOptions& o) {
  check_options(o);
  LoadPlan plan;
  plan.tensors = share(select(cp, o), o.rank, o.world);
  plan.placement.resize(plan.tensors.size());
  const bool own_buffers = static_cast<bool>(o.destination);

  std::uint64_t cursor = 0;  // end of the allocation so far
  std::size_t i = 0;
  while (i < plan.tensors.size()) {
    // A group [i, j): back to back in one file, each at an aligned distance from the first.
    const TensorInfo* first = plan.tensors[i];
    const std::uint64_t group_start = first->offset;
    std::uint64_t group_end = first->offset + first->bytes;
    std::size_t j = i + 1;
    while (!own_buffers && j < plan.tensors.size()) {
      const TensorInfo* t = plan.tensors[j];
      if (t->file_index != first->file_index || t->offset != group_end) break;
      if ((t->offset - group_start) % o.alignment != 0) break;
      if (t->bytes > 0 && group_end + t->bytes - group_start > o.max_read) break;
      group_end += t->bytes;
      ++j;
    }
    const std::uint64_t dest = own_buffers ? 0 : round_up(cursor, o.alignment);
    for (std::size_t k = i; k < j; ++k) plan.placement[k] = dest + (plan.tensors[k]->offset - group_start);
    if (!own_buffers) cursor = dest + (group_end - group_start);

    // The group's reads, at most max_read each; a tensor completes with the read holding its
    // last byte (an empty one with the group's first read).
    std::size_t next = i;
    std::uint64_t pos = group_start;
    do {
      LoadRead r;
      r.file_index = first->file_index;
      r.group = i;
      r.offset = pos;
      r.size = std::min(o.max_read, group_end - pos);
      r.dest_offset = dest + (pos - group_start);
      pos += r.size;
      while (next < j && plan.tensors[next]->offset + plan.tensors[next]->bytes <= pos) {
        r.completes.push_back(next++);
      }
      plan.reads.push_back(std::move(r));
    } while (pos < group_end);
    i = j;
  }
  for (const auto* t : plan.tensors) plan.bytes += t->bytes;
  plan.allocation_bytes = own_buffers ? 0 : cursor;
  return plan;
}

}  // namespace sluice
