#include "batch_plan.hpp"

#include <algorithm>
#include <unordered_map>

#include <fmt/format.h>

#include "arena.hpp"
#include "sluice/error.hpp"

namespace sluice::detail {
namespace {

// Extents that start within this many bytes after a read's end extend it rather than start a
// read of their own: reading a page or two more costs less than another request (WebDataset
// members sit 512-byte headers apart).
constexpr std::uint64_t merge_gap = 4096;

std::uint64_t round_down(std::uint64_t v, std::uint64_t a) noexcept { return v / a * a; }

}  // namespace

std::uint64_t EpochSpan::steps() const noexcept {
  if (start >= n) return 0;
  const std::uint64_t rest = n - start;
  return drop_last ? rest / global() : (rest + global() - 1) / global();
}

std::uint64_t EpochSpan::rank_steps() const noexcept {
  const std::uint64_t s = steps();
  if (s == 0 || drop_last) return s;
  return positions(s - 1).first < n ? s : s - 1;
}

std::pair<std::uint64_t, std::uint64_t> EpochSpan::positions(std::uint64_t s) const noexcept {
  const std::uint64_t first = std::min(n, start + s * global() + rank * batch);
  return {first, std::min(n, first + batch)};
}

std::uint64_t EpochSpan::dropped() const noexcept {
  if (!drop_last || start >= n) return 0;
  return (n - start) % global();
}

std::uint64_t EpochSpan::consumed_after(std::uint64_t taken) const noexcept {
  return std::min(n, start + taken * global());
}

std::uint64_t EpochSpan::first_step_number() const noexcept { return (start + global() - 1) / global(); }

BatchPlanner::BatchPlanner(const Dataset& dataset, std::uint64_t max_read) : ds_(dataset), max_read_(max_read) {
  align_.resize(ds_.file_count());
  for (std::size_t f = 0; f < ds_.file_count(); ++f) {
    const File& file = ds_.file(f);
    align_[f] = file.has_direct() ? std::max<std::uint64_t>({file.offset_align(), file.mem_align(), 1}) : 1;
    max_align_ = std::max(max_align_, align_[f]);
  }
  max_read_ = std::max(round_up(max_read_, max_align_), max_align_);
}

// Covers extent `e` (its bytes going to `dest` on) with reads, extending the last read where the
// extent starts in it or just after it.
void BatchPlanner::cover(const SampleExtent& e, std::uint64_t dest, BatchPlan& out) {
  const std::uint64_t a = align_[e.file];
  std::uint64_t pos = e.offset;
  const std::uint64_t end = e.offset + e.size;
  while (pos < end) {
    PlannedRead* cur = out.reads.empty() ? nullptr : &out.reads.back();
    const bool extends = cur != nullptr && cur->file == e.file && pos >= cur->offset &&
                         pos <= cur->offset + cur->size + merge_gap && pos < cur->offset + max_read_;
    if (!extends) {
      PlannedRead r;
      r.file = e.file;
      r.offset = round_down(pos, a);
      r.staging = round_up(out.staging_bytes, arena_granule);
      r.first_piece = out.pieces.size();
      out.reads.push_back(r);
      cur = &out.reads.back();
    }
    const std::uint64_t limit = cur->offset + max_read_;
    const std::uint64_t want = std::min(round_up(end, a), limit);
    if (want > cur->offset + cur->size) cur->size = want - cur->offset;
    const std::uint64_t take = std::min(end, cur->offset + cur->size) - pos;
    out.pieces.push_back({cur->staging + (pos - cur->offset), take, dest});
    ++cur->pieces;
    pos += take;
    dest += take;
    cur->needed = std::max(cur->needed, pos - cur->offset);
    out.staging_bytes = cur->staging + cur->size;
  }
}

void BatchPlanner::plan(std::span<const std::uint64_t> samples, BatchPlan& out) {
  out.samples.assign(samples.begin(), samples.end());
  out.reads.clear();
  out.pieces.clear();
  out.fields.clear();
  out.sample_pieces.clear();
  out.staging_bytes = 0;
  out.bytes = 0;
  if (ds_.sample_shape()) {
    plan_fixed(samples, out);
  } else {
    plan_fields(samples, out);
  }
}

void BatchPlanner::plan_fixed(std::span<const std::uint64_t> samples, BatchPlan& out) {
  const std::size_t count = samples.size();
  {
    const std::uint64_t each = count == 0 ? 0 : ds_.sample_bytes(samples[0]);
    for (std::size_t i = 0; i < count; ++i) {
      extents_.clear();
      ds_.extents(samples[i], extents_);
      std::uint64_t dest = i * each;
      for (const SampleExtent& e : extents_) {
        cover(e, dest, out);
        dest += e.size;
      }
      if (dest != (i + 1) * each) {
        throw Error(ErrorDomain::data, EIO, {.op = "ingest"},
                    fmt::format("sample {} has {} bytes, not the {} of every sample", samples[i], dest - i * each, each));
      }
    }
    out.bytes = count * each;
    BatchField f{ds_.format() == DatasetFormat::megatron ? "tokens" : "data", 0, {}};
    f.offsets.resize(count + 1);
    for (std::size_t i = 0; i <= count; ++i) f.offsets[i] = i * each;
    out.fields.push_back(std::move(f));
  }
}

void BatchPlanner::plan_fields(std::span<const std::uint64_t> samples, BatchPlan& out) {
  const std::size_t count = samples.size();
  // WebDataset: every field packed on its own, samples back to back within it. First each
  // member's field and size, then the layout, then the reads.
  struct Member {
    SampleExtent extent;
    std::size_t field;
  };
  std::vector<Member> members;
  std::vector<std::size_t> first(count + 1);
  std::unordered_map<std::string, std::size_t> field_of;
  std::vector<std::vector<std::uint64_t>> sizes;  // [field][sample]
  for (std::size_t i = 0; i < count; ++i) {
    first[i] = members.size();
    extents_.clear();
    names_.clear();
    ds_.extents(samples[i], extents_);
    ds_.fields(samples[i], names_);
    if (names_.size() != extents_.size()) {
      throw Error(ErrorDomain::data, EIO, {.op = "ingest"},
                  fmt::format("sample {} has {} extents but {} field names", ds_.sample_id(samples[i]), extents_.size(), names_.size()));
    }
    for (std::size_t m = 0; m < extents_.size(); ++m) {
      auto [it, added] = field_of.try_emplace(names_[m], out.fields.size());
      if (added) {
        out.fields.push_back({names_[m], 0, {}});
        sizes.emplace_back(count, 0);
      }
      sizes[it->second][i] += extents_[m].size;
      members.push_back({extents_[m], it->second});
    }
  }
  first[count] = members.size();
  std::uint64_t at = 0;
  for (std::size_t f = 0; f < out.fields.size(); ++f) {
    BatchField& field = out.fields[f];
    field.offset = at;
    field.offsets.resize(count + 1);
    field.offsets[0] = 0;
    for (std::size_t i = 0; i < count; ++i) field.offsets[i + 1] = field.offsets[i] + sizes[f][i];
    at += field.offsets[count];
  }
  out.bytes = at;
  out.sample_pieces.resize(count);
  std::vector<std::uint64_t> filled(out.fields.size());
  for (std::size_t i = 0; i < count; ++i) {
    std::fill(filled.begin(), filled.end(), 0);
    for (std::size_t m = first[i]; m < first[i + 1]; ++m) {
      const Member& mem = members[m];
      const BatchField& field = out.fields[mem.field];
      const std::uint64_t dest = field.offset + field.offsets[i] + filled[mem.field];
      filled[mem.field] += mem.extent.size;
      out.sample_pieces[i].emplace_back(dest, mem.extent.size);
      cover(mem.extent, dest, out);
    }
  }
}

}  // namespace sluice::detail
