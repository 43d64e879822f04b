// Mapped loads: tensors that view a private mapping of their file, as safetensors' loader hands
// them out. Where the page cache holds the file this beats any copy into fresh memory: nothing is
// copied, and no fresh page is touched (on a VM that hands freed memory back to its host, the
// first touch of fresh memory was most of a warm load's time: docs/paths.md, "Loads into host
// memory").
#include "mapped.hpp"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "sluice/error.hpp"
#include "sluice/residency.hpp"
#include "sluice/units.hpp"

namespace sluice::detail {
namespace {

// The alignment a framework needs of a tensor's first byte: its element's size, as a power of
// two (a 5-byte .npy string needs none), at most 16.
std::uint64_t element_alignment(const TensorInfo& t) {
  const std::uint64_t bytes = std::max<std::uint64_t>(t.element_bits / 8, 1);
  return std::min<std::uint64_t>(std::uint64_t{1} << std::countr_zero(bytes), 16);
}

constexpr std::uint64_t probe_piece = 64 << 20;

struct Span {
  std::uint64_t begin = UINT64_MAX;
  std::uint64_t end = 0;
};

std::vector<Span> spans_of(const Checkpoint& cp, const LoadPlan& plan) {
  std::vector<Span> spans(cp.layouts().size());
  for (const TensorInfo* t : plan.tensors) {
    Span& s = spans[t->file_index];
    s.begin = std::min(s.begin, t->offset);
    s.end = std::max(s.end, t->offset + t->bytes);
  }
  return spans;
}

// Why the plan cannot be mapped at all, whatever the cache holds; nullopt when it can.
std::optional<std::string> unmappable(const Checkpoint& cp, const LoadPlan& plan,
                                      const LoadOptions& o) {
  if (o.target != LoadTarget::pageable_host)
    return fmt::format("the target is {} memory", to_string(o.target));
  if (o.destination) return std::string("the caller gave the buffers");
  for (const TensorInfo* t : plan.tensors) {
    if (cp.remote(t->file_index) != nullptr || cp.file(t->file_index).fd() < 0)
      return fmt::format("{} is not a local file", cp.layouts()[t->file_index].path);
  }
  return std::nullopt;
}

// Bytes of the tensors that lie misaligned for their type (copied out of the mapping).
std::uint64_t misaligned_bytes(const LoadPlan& plan) {
  std::uint64_t n = 0;
  for (const TensorInfo* t : plan.tensors) {
    if (t->offset % element_alignment(*t) != 0) n += t->bytes;
  }
  return n;
}

std::string copies_note(const LoadPlan& plan) {
  const std::uint64_t n = misaligned_bytes(plan);
  return n == 0 ? std::string(", nothing copied")
                : fmt::format(", except {} of tensors misaligned for their type, copied out of it",
                              format_size(n));
}

}  // namespace

HostLoadChoice choose_host_load(const Checkpoint& cp, const LoadPlan& plan, const LoadOptions& o) {
  if (o.target != LoadTarget::pageable_host || o.host_load == HostLoad::read) return {};
  const std::optional<std::string> why_not = unmappable(cp, plan, o);
  if (o.host_load == HostLoad::mapped) {
    if (why_not) throw_usage_error({.op = "load"}, "host_load mapped: cannot map: " + *why_not);
    return {true, "host_load mapped: tensors view a private (copy-on-write) mapping of the file" +
                      copies_note(plan)};
  }
  if (why_not) return {false, "not mapped: " + *why_not};
  const std::shared_ptr<const Config> cfg = o.config ? o.config : config();
  if (cfg->cache_policy == CachePolicy::bypass) return {false, "not mapped: cache_policy bypass"};
  std::uint64_t cached = 0;
  std::uint64_t pages = 0;
  const std::vector<Span> spans = spans_of(cp, plan);
  for (std::size_t f = 0; f < spans.size(); ++f) {
    if (spans[f].begin >= spans[f].end) continue;
    // The edges of each 64 MiB piece, the whole piece only where they disagree: a probe of
    // every page of a cached GiB cost about as much as the rest of a warm load (~0.3 ms).
    const ResidencyProbe probe(cp.file(f).fd(), spans[f].begin, spans[f].end - spans[f].begin);
    for (std::uint64_t at = spans[f].begin; at < spans[f].end; at += probe_piece) {
      const Residency r = probe.probe_edges(at, std::min(probe_piece, spans[f].end - at));
      cached += r.cached;
      pages += r.pages;
    }
  }
  // As cache_policy auto reads a chunk buffered from half cached: from there the mapping wins
  // (the missing pages are read ahead when mapped, map_plan; fresh memory costs its first touch).
  // Cold, reads (parallel, O_DIRECT) and the mapping measured alike here; reads stay, as on
  // faster storage their parallel O_DIRECT wins (docs/paths.md).
  if (cached * 2 < pages) {
    return {false,
            fmt::format(
                "not mapped: the page cache holds {} of {} pages of the tensors (mapped from half)",
                cached, pages)};
  }
  return {true,
          fmt::format("auto: the page cache holds {}% of the {} of tensors: they view a private "
                      "(copy-on-write) mapping of the file{} (host_load read copies)",
                      pages == 0 ? 100 : cached * 100 / pages, format_size(plan.bytes),
                      copies_note(plan)),
          cached == pages};
}

MappedFiles map_plan(const Checkpoint& cp, const LoadPlan& plan, bool all_cached) {
  MappedFiles out;
  const std::vector<Span> spans = spans_of(cp, plan);
  out.maps.resize(spans.size());
  for (std::size_t f = 0; f < spans.size(); ++f) {
    if (spans[f].begin >= spans[f].end) continue;
    // A mapping past the end of the file raises SIGBUS when touched: refuse as the reads would.
    if (const std::uint64_t now = cp.file(f).size(); now < spans[f].end) {
      throw Error(
          ErrorDomain::data, EIO,
          {.op = "load",
           .path = cp.layouts()[f].path,
           .offset = spans[f].begin,
           .size = spans[f].end - spans[f].begin,
           .has_range = true},
          fmt::format("the file ends at byte {}: it shrank after its header was read", now));
    }
    out.maps[f] = FileMapping(cp.file(f).fd(), spans[f].begin, spans[f].end - spans[f].begin,
                              cp.layouts()[f].path.c_str());
    // Pages missing from the cache are read ahead now (the walk over the range costs about a
    // millisecond per GiB: skipped where the probe found them all). Page tables fill on first
    // touch, as safetensors' do: populating them up front (MADV_POPULATE_READ, 1.9 ms a GiB
    // here) measured 0.93-1.0x of that for a pass over every page, and costs a caller that
    // uses a few tensors for all of them.
    if (!all_cached) out.maps[f].will_need();
    out.mapped_bytes += out.maps[f].mapped_bytes();
  }
  out.data.reserve(plan.tensors.size());
  // A tensor misaligned for its type gets a copy, as frameworks may assume aligned elements.
  std::uint64_t copy_bytes = 0;
  for (const TensorInfo* t : plan.tensors) {
    if (t->offset % element_alignment(*t) != 0) copy_bytes += round_up(t->bytes, 64);
  }
  if (copy_bytes > 0) out.copies.emplace(static_cast<std::size_t>(copy_bytes), true, false);
  alignas(16) static std::byte empty[16];  // where empty tensors of an unmapped file point
  std::uint64_t copied = 0;
  for (const TensorInfo* t : plan.tensors) {
    std::byte* base = out.maps[t->file_index].data();
    std::byte* at = base == nullptr ? empty : base + (t->offset - spans[t->file_index].begin);
    if (t->offset % element_alignment(*t) != 0) {
      std::byte* dst = out.copies->get() + copied;
      std::memcpy(dst, at, t->bytes);
      copied += round_up(t->bytes, 64);
      at = dst;
    }
    out.data.push_back(at);
  }
  out.mapped_bytes += copy_bytes;
  return out;
}

}  // namespace sluice::detail
