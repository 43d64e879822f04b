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
#include <future>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "arena.hpp"
#include "batch_lease.hpp"
#include "batch_plan.hpp"
#include "ingest_stats.hpp"
#include "loader_memory.hpp"
#include "sluice/error.hpp"
#include "sluice/ingest.hpp"
#include "sluice/io_engine.hpp"
#include "sluice/residency.hpp"
#include "sluice/transfer.hpp"

namespace sluice {
namespace {

using detail::ProducerState;

std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

// How long next() waits with the producer blocked on the batch region before it calls that a
// consumer holding every buffer (which no wait can end).
constexpr auto held_check = std::chrono::milliseconds(50);
constexpr unsigned held_checks = 20;

}  // namespace

struct Loader::Impl {
  struct Ready {
    std::optional<Batch> batch;
    std::exception_ptr error;
  };
  struct InFlight {
    detail::BatchPlan plan;
    std::uint64_t staging = 0;  // offset in the staging region
    std::uint64_t staging_len = 0;
    std::vector<std::future<TransferResult>> pending;  // per read; invalid for reads done at once
    std::vector<TransferResult> done;
    std::exception_ptr error;
    std::uint64_t async_reads = 0;
    std::vector<bool> landed;  // per piece: read straight to its place in the gathered batch
  };

  std::shared_ptr<const Dataset> ds;
  IngestOptions o;
  std::shared_ptr<const Config> cfg;
  std::optional<SampleShape> shape;
  detail::MemoryPlan mem;
  std::shared_ptr<detail::Arena> staging;
  std::shared_ptr<detail::Arena> buffers;
  std::unique_ptr<detail::BatchPlanner> planner;  // the producer's
  TransferOptions read_opts;   // reads on this thread's slow path (and their errors)
  TransferOptions async_opts;  // reads for the engine's async I/O thread
  Stream stream;
  std::vector<std::uint64_t> file_sizes;

  // The run: changed only while no producer runs.
  std::uint64_t seed = 0;
  bool shuffle = true;
  std::uint64_t epoch = 0;
  detail::EpochSpan span;

  mutable std::mutex mu;
  std::condition_variable ready_cv;
  std::condition_variable space_cv;
  std::deque<Ready> ready;
  std::uint64_t handed = 0;
  bool epoch_over = false;
  bool first_after_start = true;
  std::exception_ptr failure;
  std::thread producer;
  bool running = false;
  std::atomic<bool> stop{false};
  std::atomic<ProducerState> pstate{ProducerState::idle};
  // Nanoseconds the producer spent in each state, and when it entered the current one: the
  // consumer's wait is attributed by the difference of two snapshots.
  std::array<std::atomic<std::uint64_t>, detail::producer_states> state_ns{};
  std::atomic<std::uint64_t> state_since{now_ns()};
  std::atomic<std::uint64_t> reads_in_flight{0};
  std::atomic<unsigned> window_batches{0};
  detail::IngestMeter meter;

  Impl(std::shared_ptr<const Dataset> dataset, IngestOptions options);
  void produce();
  void issue(std::uint64_t step, std::deque<InFlight>& window, bool* stop_issuing);
  Ready complete(InFlight& f);
  bool read_now(const File& file, std::size_t index, const detail::PlannedRead& r) const;
  void read_cached(InFlight& f, std::byte* base, const std::vector<std::size_t>& which);
  void set_state(ProducerState s);
  [[nodiscard]] std::array<std::uint64_t, detail::producer_states> state_snapshot() const;
  void start_run();
  void stop_producer();
  [[nodiscard]] LoaderState state_locked() const;
};

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
  staging = std::make_shared<detail::Arena>(staging_kind, o.device, mem.staging_bytes);
  buffers = std::make_shared<detail::Arena>(o.target, o.device, mem.buffer_bytes);
  if (o.target == LoadTarget::device) stream = Stream(o.device);
  seed = o.seed;
  shuffle = o.shuffle;
  epoch = o.epoch;
  span = {ds->size(), o.batch_size, o.world, o.rank, 0, o.drop_last};
}

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
  set_state(ProducerState::memory);
  const auto at = buffers->alloc(f.plan.bytes, [this] { return stop.load(); });
  set_state(ProducerState::busy);
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
  unsigned blocked = 0;
  bool waited = false;
  while (m.ready.empty()) {
    if (!waited) {
      before = m.state_snapshot();
      reads = m.reads_in_flight.load();
      ahead = m.window_batches.load();
      waited = true;
    }
    if (m.ready_cv.wait_for(lock, held_check) == std::cv_status::no_timeout) continue;
    blocked = m.pstate.load() == ProducerState::memory ? blocked + 1 : 0;
    if (blocked >= held_checks && m.ready.empty()) {
      throw_usage_error({.op = "ingest"},
                        fmt::format("next() cannot go on: the batches handed out and still held ({}) fill the batch "
                                    "buffers the memory budget of {} allows ({}); drop a batch before asking for the "
                                    "next, or raise memory_budget",
                                    format_size(m.buffers->used()), format_size(m.o.memory_budget),
                                    format_size(m.buffers->capacity())));
    }
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

std::uint64_t Loader::memory_in_use() const noexcept {
  return impl_->staging->capacity() + impl_->buffers->capacity();
}

std::uint64_t Loader::memory_high_water() const noexcept { return memory_in_use(); }

const Dataset& Loader::dataset() const noexcept { return *impl_->ds; }

}  // namespace sluice
