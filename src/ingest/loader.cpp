// The Loader: one producer thread keeps the reads of the next `prefetch` batches in flight and
// turns each completed batch into a lease the consumer's next() hands out.
//
// Per batch: the plan (batch_plan.hpp) covers its samples with aligned reads into a piece of the
// staging region; reads of ranges the page cache holds run at once on the producer thread
// (buffered, no thread hop), the rest go to the engine together (submit_batch: O_DIRECT
// requests of one io_uring on the async I/O thread), so `prefetch` x B small random reads are in
// flight at once. When the oldest batch's reads are done its samples are gathered: for device
// memory into pinned staging and then ONE host-to-device copy into a piece of the batch region,
// for host memory straight into it. Both regions are allocated once, sized to the memory budget
// (docs/ingest.md, "The pipeline"). docs/ingest.md, "Order and resume", has the arithmetic.
#include <algorithm>
#include <array>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "loader_impl.hpp"
#include "sluice/error.hpp"
#include "sluice/ingest.hpp"
#include "sluice/io_engine.hpp"
#include "sluice/residency.hpp"
#include "sluice/transfer.hpp"

namespace sluice {
Loader::Impl::Impl(std::shared_ptr<const Dataset> dataset, IngestOptions options)
    : ds(std::move(dataset)), o(std::move(options)) {
  const ErrorContext ctx{.op = "ingest"};
  if (!ds) throw_usage_error(ctx, "no dataset");
  if (o.batch_size == 0) throw_usage_error(ctx, "batch_size must be at least 1");
  if (o.world == 0 || o.rank >= o.world) throw_usage_error(ctx, fmt::format("rank {} of world {}", o.rank, o.world));
  if (o.target != LoadTarget::pageable_host && !o.device) {
    throw_usage_error(ctx, fmt::format("target {} needs a device (IngestOptions::device)", to_string(o.target)));
  }
  if (o.path) {
    if (o.target == LoadTarget::device && (*o.path == Path::direct || *o.path == Path::host)) {
      throw_usage_error(ctx, fmt::format("path {}: the Loader reads device batches through its own pinned staging "
                                         "(bounce); GPUDirect reads of batches are not implemented yet",
                                         to_string(*o.path)));
    }
    if (o.target != LoadTarget::device && *o.path != Path::host) {
      throw_usage_error(ctx, fmt::format("path {} moves data to GPU memory, but the target is {} memory",
                                         to_string(*o.path), to_string(o.target)));
    }
  }
  cfg = o.config ? o.config : config();
  read_opts.config = cfg;  // staging is host memory: the host path, with the configuration's cache policy
  async_opts.config = cfg;
  if (cfg->cache_policy == CachePolicy::automatic) {
    // read_now() has asked the page cache already: the engine need not ask again per read.
    auto probed = std::make_shared<Config>(*cfg);
    probed->cache_policy = CachePolicy::bypass;
    async_opts.config = std::move(probed);
  }
  shape = ds->sample_shape();
  planner = std::make_unique<detail::BatchPlanner>(*ds, cfg->io_size);
  for (std::size_t f = 0; f < ds->file_count(); ++f) file_sizes.push_back(ds->file(f).size());
  mem = detail::plan_memory(*ds, o, *planner);
  const LoadTarget staging_kind = o.target == LoadTarget::device ? LoadTarget::pinned_host : LoadTarget::pageable_host;
  staging = std::make_shared<detail::Arena>(staging_kind, o.device, mem.staging_bytes, use);
  buffers = std::make_shared<detail::Arena>(o.target, o.device, mem.buffer_bytes, use);
  if (o.target == LoadTarget::device) stream = Stream(o.device);
  seed = o.seed;
  shuffle = o.shuffle;
  epoch = o.epoch;
  span = {ds->size(), o.batch_size, o.world, o.rank, 0, o.drop_last};
}

void Loader::Impl::produce() {
  std::deque<InFlight> window;
  const std::uint64_t total = span.rank_steps();
  std::uint64_t next_step = 0;
  bool failed = false;
  while (!stop) {
    set_state(ProducerState::busy);
    bool full = false;
    while (!failed && !full && !stop && next_step < total) {
      {
        const std::lock_guard lock(mu);
        if (window.size() + ready.size() >= mem.prefetch) break;
      }
      try {
        const std::size_t before = window.size();
        issue(next_step, window, &full);
        if (window.size() > before) ++next_step;
      } catch (...) {
        failed = true;
        const std::lock_guard lock(mu);
        ready.push_back({std::nullopt, std::current_exception()});
        ready_cv.notify_all();
      }
    }
    if (window.empty()) {
      std::unique_lock lock(mu);
      set_state(ProducerState::idle);
      space_cv.wait(lock, [&] { return stop || (!failed && next_step < total && ready.size() < mem.prefetch); });
      continue;
    }
    Ready r = complete(window.front());
    window.pop_front();
    --window_batches;
    if (!r.batch && !r.error) break;  // stopped while waiting for a buffer
    if (r.error) failed = true;
    const std::lock_guard lock(mu);
    ready.push_back(std::move(r));
    ready_cv.notify_all();
  }
  // Stopped: every read in flight finishes into staging before it goes back.
  for (InFlight& f : window) {
    for (auto& p : f.pending) {
      if (p.valid()) p.wait();
    }
    reads_in_flight -= f.async_reads;
    staging->release(f.staging, f.staging_len);
  }
  window_batches = 0;
  set_state(ProducerState::idle);
}

void Loader::Impl::set_state(ProducerState s) {
  const std::uint64_t now = now_ns();
  const std::uint64_t since = state_since.exchange(now);
  state_ns[static_cast<std::size_t>(pstate.load())] += now - since;
  pstate = s;
}

std::array<std::uint64_t, detail::producer_states> Loader::Impl::state_snapshot() const {
  std::array<std::uint64_t, detail::producer_states> out{};
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = state_ns[i].load();
  out[static_cast<std::size_t>(pstate.load())] += now_ns() - state_since.load();
  return out;
}

void Loader::Impl::stop_producer() {
  if (!running) return;
  {
    const std::lock_guard lock(mu);
    stop = true;
  }
  space_cv.notify_all();
  buffers->wake();
  producer.join();
  stop = false;
  running = false;
}

// A fresh run of the current epoch from span.start; no producer runs.
void Loader::Impl::start_run() {
  ready.clear();
  handed = 0;
  epoch_over = false;
  first_after_start = true;
  failure = nullptr;
}

LoaderState Loader::Impl::state_locked() const {
  LoaderState s;
  s.seed = seed;
  s.shuffle = shuffle;
  s.epoch = epoch;
  s.consumed = span.consumed_after(epoch_over ? span.steps() : handed);
  s.fingerprint = ds->fingerprint();
  return s;
}

Loader::Loader(std::shared_ptr<const Dataset> dataset, IngestOptions options)
    : impl_(std::make_unique<Impl>(std::move(dataset), std::move(options))) {}

Loader::~Loader() { impl_->stop_producer(); }

std::optional<Batch> Loader::next() {
  Impl& m = *impl_;
  const std::uint64_t enter = now_ns();
  std::unique_lock lock(m.mu);
  if (m.failure) std::rethrow_exception(m.failure);
  if (m.epoch_over) return std::nullopt;
  if (m.handed >= m.span.rank_steps()) {
    m.epoch_over = true;
    m.meter.set_dropped(m.span.dropped());
    return std::nullopt;
  }
  if (!m.running) {
    m.running = true;
    m.producer = std::thread([&m] { m.produce(); });
  }
  std::array<std::uint64_t, detail::producer_states> before{};
  std::uint64_t reads = 0;
  unsigned ahead = 0;
  bool waited = false;
  while (m.ready.empty()) {
    if (!waited) {
      before = m.state_snapshot();
      reads = m.reads_in_flight.load();
      ahead = m.window_batches.load();
      waited = true;
    }
    // Nothing ready and the producer waits for a batch buffer that is not free: every buffer
    // byte belongs to batches the consumer holds (none is queued, and batches in flight hold
    // only staging), so only the consumer's dropping one could end the wait. Decided from the
    // arena, not from how long the wait lasted.
    if (m.buffer_wait != 0 && !m.buffers->fits(m.buffer_wait)) {
      const std::size_t held = m.buffers->pieces();
      throw_usage_error({.op = "ingest"},
                        fmt::format("next() cannot go on: the consumer holds {} batch{} ({}), all the batch buffers "
                                    "the memory budget of {} allows ({}), and the next batch needs {}; drop a batch "
                                    "before asking for the next, or raise memory_budget",
                                    held, held == 1 ? "" : "es", format_size(m.buffers->used()),
                                    format_size(m.o.memory_budget), format_size(m.buffers->capacity()),
                                    format_size(m.buffer_wait)));
    }
    m.ready_cv.wait(lock);
  }
  Impl::Ready r = std::move(m.ready.front());
  m.ready.pop_front();
  m.space_cv.notify_all();
  if (r.error) {
    m.failure = r.error;
    std::rethrow_exception(r.error);
  }
  std::array<std::uint64_t, detail::producer_states> during{};
  if (waited) {
    during = m.state_snapshot();
    for (std::size_t i = 0; i < during.size(); ++i) during[i] -= std::min(during[i], before[i]);
  }
  ++m.handed;
  const bool first = std::exchange(m.first_after_start, false);
  lock.unlock();
  m.meter.record_step(enter, now_ns(), during, reads, ahead, r.batch->samples().size(), r.batch->bytes(), first);
  return std::move(r.batch);
}

LoaderState Loader::state() const {
  const std::lock_guard lock(impl_->mu);
  return impl_->state_locked();
}

void Loader::restore(const LoaderState& s) {
  Impl& m = *impl_;
  const ErrorContext ctx{.op = "ingest restore"};
  if (s.fingerprint != m.ds->fingerprint()) {
    throw_usage_error(ctx, fmt::format("the state was saved for other data (fingerprint {:016x}; this dataset's is "
                                       "{:016x}: {})",
                                       s.fingerprint, m.ds->fingerprint(), m.ds->describe()));
  }
  if (s.consumed > m.ds->size()) {
    throw_usage_error(ctx, fmt::format("the state has consumed {} positions of an epoch of {} samples", s.consumed,
                                       m.ds->size()));
  }
  m.stop_producer();
  const std::lock_guard lock(m.mu);
  m.seed = s.seed;
  m.shuffle = s.shuffle;
  m.epoch = s.epoch;
  m.span.start = s.consumed;
  m.start_run();
  m.meter.reset();
}

void Loader::set_epoch(std::uint64_t epoch) {
  Impl& m = *impl_;
  m.stop_producer();
  const std::lock_guard lock(m.mu);
  m.epoch = epoch;
  m.span.start = 0;
  m.start_run();
}

std::uint64_t Loader::epoch() const noexcept {
  const std::lock_guard lock(impl_->mu);
  return impl_->epoch;
}

std::uint64_t Loader::steps_per_epoch() const noexcept {
  detail::EpochSpan s = impl_->span;
  s.start = 0;
  return s.rank_steps();
}

IngestStats Loader::stats() const { return impl_->meter.stats(impl_->mem, impl_->o.target); }

std::uint64_t Loader::memory_in_use() const noexcept { return impl_->use->now.load(); }

std::uint64_t Loader::memory_high_water() const noexcept { return impl_->use->high.load(); }

std::uint64_t Loader::memory_reserved() const noexcept {
  return impl_->staging->capacity() + impl_->buffers->capacity();
}

const Dataset& Loader::dataset() const noexcept { return *impl_->ds; }

}  // namespace sluice
