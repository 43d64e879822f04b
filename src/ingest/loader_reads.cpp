// Per batch: the plan, its reads (the page cache's on this thread, the rest through the
// engine's async I/O thread), and its completion into a lease (loader.cpp has the design).
#include <cstring>

#include <fmt/format.h>

#include "loader_impl.hpp"
#include "sluice/error.hpp"
#include "sluice/io_engine.hpp"
#include "sluice/residency.hpp"
#include "sluice/units.hpp"

namespace sluice {

// Whether to read `r` on this thread now: buffered reads (no O_DIRECT here, or cache_policy
// use) and, under cache_policy auto, ranges the page cache holds, which the async I/O thread
// would hand to a pool thread anyway.
bool Loader::Impl::read_now(const File& file, std::size_t index, const detail::PlannedRead& r) const {
  if (!cfg->direct_io || !file.has_direct() || cfg->cache_policy == CachePolicy::use) return true;
  if (cfg->cache_policy == CachePolicy::bypass) return false;
  const std::uint64_t size = file_sizes[index];
  if (r.offset >= size) return true;
  const Residency res = page_cache_residency(file.fd(), r.offset, std::min(r.size, size - r.offset));
  return res.pages > 0 && res.cached == res.pages;
}

// Reads of ranges in the page cache (or of files without O_DIRECT), on this thread through its
// own engine, buffered and piece by piece: only the samples' bytes, no aligned cover, and for
// device memory straight to their place in the gathered batch. Every read of the batch goes in
// one submission, where sluice::read() per range costs a residency probe, a size check and a
// pipeline each (2.7x the CPU per sample, measured warm). A piece that comes back short or
// failed has its whole read done again by sluice::read() into staging, which finishes it or
// reports the error with its file and range.
void Loader::Impl::read_cached(InFlight& f, std::byte* base, const std::vector<std::size_t>& which) {
  IoEngine& engine = thread_engine(resolve_engine(cfg->engine), 64);
  std::vector<IoCompletion> out(engine.capacity());
  const bool to_assembly = o.target == LoadTarget::device;
  std::byte* assembly = base + detail::round_up(f.plan.staging_bytes, detail::arena_granule);
  std::vector<bool> failed(f.plan.reads.size());
  std::size_t pending = 0;
  auto flush = [&](std::size_t min) {
    const std::size_t n = engine.submit_and_wait(out, min);
    for (std::size_t c = 0; c < n; ++c) {
      --pending;
      const detail::Piece& p = f.plan.pieces[out[c].tag >> 20];
      const std::size_t read = out[c].tag & 0xfffff;
      if (out[c].result < 0 || static_cast<std::uint64_t>(out[c].result) != p.size) failed[read] = true;
    }
  };
  for (std::size_t i : which) {
    detail::PlannedRead& r = f.plan.reads[i];
    const File& file = ds->file(r.file);
    for (std::size_t k = r.first_piece; k < r.first_piece + r.pieces; ++k) {
      const detail::Piece& p = f.plan.pieces[k];
      if (p.size == 0) continue;
      while (engine.in_flight() >= engine.capacity()) flush(1);
      std::byte* dst = to_assembly ? assembly + p.dest : base + p.staging;
      engine.prepare({IoOp::read, file.cache_fd(), dst, static_cast<std::uint32_t>(p.size),
                      r.offset + (p.staging - r.staging), (std::uint64_t{k} << 20) | i, -1, false});
      ++pending;
    }
  }
  while (pending > 0) flush(pending);
  for (std::size_t i : which) {
    const detail::PlannedRead& r = f.plan.reads[i];
    if (!failed[i]) {
      if (to_assembly) {
        for (std::size_t k = r.first_piece; k < r.first_piece + r.pieces; ++k) f.landed[k] = true;
      }
      f.done[i] = {r.needed, Path::host, "page cache: buffered, on the loader's thread", 0, r.pieces, r.needed};
      continue;
    }
    try {
      f.done[i] = read(ds->file(r.file), base + r.staging, r.size, r.offset, read_opts);
    } catch (...) {
      if (!f.error) f.error = std::current_exception();
    }
  }
}

void Loader::Impl::issue(std::uint64_t step, std::deque<InFlight>& window, bool* stop_issuing) {
  InFlight f;
  const auto [first, last] = span.positions(step);
  const SampleOrder order(span.n, seed, epoch, shuffle);
  std::vector<std::uint64_t> ids;
  ids.reserve(last - first);
  for (std::uint64_t p = first; p < last; ++p) ids.push_back(order[p]);
  planner->plan(ids, f.plan);
  f.plan.epoch = epoch;
  f.plan.step = span.first_step_number() + step;
  const std::uint64_t assembly = o.target == LoadTarget::device ? f.plan.bytes : 0;
  f.staging_len = detail::round_up(f.plan.staging_bytes, detail::arena_granule) + assembly;
  if (f.staging_len > staging->capacity() || f.plan.bytes > buffers->capacity()) {
    throw_usage_error({.op = "ingest"},
                      fmt::format("the batch of epoch {} step {} (rank {}) holds {} and needs {} of staging; the memory "
                                  "budget of {} gives {} of batch buffers and {} of staging: raise memory_budget",
                                  epoch, f.plan.step, o.rank, format_size(f.plan.bytes), format_size(f.staging_len),
                                  format_size(o.memory_budget), format_size(buffers->capacity()),
                                  format_size(staging->capacity())));
  }
  const auto at = staging->try_alloc(f.staging_len);
  if (!at) {  // staging is busy with the batches ahead: complete one first
    *stop_issuing = true;
    return;
  }
  f.staging = *at;
  std::byte* base = staging->base() + f.staging;
  f.pending.resize(f.plan.reads.size());
  f.done.resize(f.plan.reads.size());
  f.landed.assign(f.plan.pieces.size(), false);
  std::vector<BatchEntry> entries;
  std::vector<std::size_t> entry_read;
  std::vector<std::size_t> now;
  for (std::size_t i = 0; i < f.plan.reads.size(); ++i) {
    const detail::PlannedRead& r = f.plan.reads[i];
    const File& file = ds->file(r.file);
    if (read_now(file, r.file, r)) {
      now.push_back(i);
    } else {
      entries.push_back({IoOp::read, &file, base + r.staging, r.size, r.offset});
      entry_read.push_back(i);
    }
  }
  if (!entries.empty()) {  // first, so the device works while this thread reads the cache
    auto futures = submit_batch(entries, async_opts);
    for (std::size_t k = 0; k < futures.size(); ++k) f.pending[entry_read[k]] = std::move(futures[k]);
    f.async_reads = futures.size();
    reads_in_flight += f.async_reads;
  }
  if (!now.empty()) read_cached(f, base, now);
  window.push_back(std::move(f));
  ++window_batches;
}

// A batch buffer of `bytes`, waiting while the consumer holds the region; nullopt once stopped.
// While it waits, buffer_wait says for how much, so next() can tell a wait no drop will end.
std::optional<std::uint64_t> Loader::Impl::alloc_buffer(std::uint64_t bytes) {
  set_state(ProducerState::memory);
  const auto at = buffers->alloc(bytes, [this] { return stop.load(); },
                                 [this, bytes] {
                                   {
                                     const std::lock_guard lock(mu);
                                     buffer_wait = bytes;
                                   }
                                   ready_cv.notify_all();
                                 });
  {
    const std::lock_guard lock(mu);
    buffer_wait = 0;
  }
  set_state(ProducerState::busy);
  return at;
}

Loader::Impl::Ready Loader::Impl::complete(InFlight& f) {
  set_state(ProducerState::reads);
  for (std::size_t i = 0; i < f.pending.size(); ++i) {
    if (!f.pending[i].valid()) continue;
    try {
      f.done[i] = f.pending[i].get();
    } catch (...) {
      if (!f.error) f.error = std::current_exception();
    }
  }
  reads_in_flight -= f.async_reads;
  set_state(ProducerState::busy);
  struct StagingBack {
    detail::Arena& arena;
    InFlight& f;
    ~StagingBack() { arena.release(f.staging, f.staging_len); }
  } back{*staging, f};
  if (f.error) return {std::nullopt, f.error};
  try {
    for (std::size_t i = 0; i < f.plan.reads.size(); ++i) {
      const detail::PlannedRead& r = f.plan.reads[i];
      if (f.done[i].bytes < r.needed) {
        throw Error(ErrorDomain::data, EIO,
                    {.op = "ingest", .path = ds->file(r.file).path(), .offset = r.offset, .size = r.needed, .has_range = true},
                    fmt::format("the file ended after {} of these bytes: it shrank after the dataset was opened", f.done[i].bytes));
      }
    }
    meter.record_reads(f.done);
  } catch (...) {
    return {std::nullopt, std::current_exception()};
  }
  const auto at = alloc_buffer(f.plan.bytes);
  if (!at) return {};
  auto lease = std::make_shared<detail::BatchLease>();
  lease->arena = buffers;
  lease->arena_offset = *at;
  lease->arena_bytes = f.plan.bytes;
  lease->data = buffers->base() + *at;
  const std::byte* st = staging->base() + f.staging;
  try {
    if (o.target == LoadTarget::device) {
      std::byte* assembly = staging->base() + f.staging + detail::round_up(f.plan.staging_bytes, detail::arena_granule);
      for (std::size_t k = 0; k < f.plan.pieces.size(); ++k) {
        const detail::Piece& p = f.plan.pieces[k];
        if (!f.landed[k]) std::memcpy(assembly + p.dest, st + p.staging, p.size);
      }
      if (f.plan.bytes > 0) {
        o.device->copy_to_device_async(lease->data, assembly, f.plan.bytes, stream.get());
        stream.synchronize();
      }
    } else {
      for (const detail::Piece& p : f.plan.pieces) std::memcpy(lease->data + p.dest, st + p.staging, p.size);
    }
  } catch (...) {
    return {std::nullopt, std::current_exception()};
  }
  lease->epoch = f.plan.epoch;
  lease->step = f.plan.step;
  lease->rank = o.rank;
  lease->samples = std::move(f.plan.samples);
  lease->bytes = f.plan.bytes;
  lease->sample_shape = shape;
  lease->fields = std::move(f.plan.fields);
  lease->sample_pieces = std::move(f.plan.sample_pieces);
  lease->target = o.target;
  lease->device = o.device;
  Batch b;
  b.lease_ = std::move(lease);
  return {std::move(b), nullptr};
}

}  // namespace sluice
