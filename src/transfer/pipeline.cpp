// Completion rules for one chunk: a short transfer is continued on the buffered descriptor (an
// O_DIRECT remainder may be unaligned); EINTR/EAGAIN are resubmitted; EINVAL on O_DIRECT is
// retried buffered (a filesystem that reported alignments it does not honour); a read that
// returns 0 before the bytes the file had when the request started means the file was
// truncated under us, which is an error, never a silently short result.
//
// The caller never waits for a helper that has not started: a helper registers itself under the
// job's mutex and gives up if the work is gone, so a request always finishes even when every
// pool thread is busy (read_async from a pool thread included).
#include "pipeline.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "sluice/error.hpp"
#include "sluice/stats.hpp"
#include "sluice/thread_pool.hpp"
#include "sluice/units.hpp"

namespace sluice::detail {

int HostMover::start(void* dst, const void* src, std::size_t n, bool) {
  std::memcpy(dst, src, n);
  return -1;
}

namespace {

// Owned by the caller and every helper (shared_ptr): a helper may start after the caller has
// returned, so the job holds copies of everything a late helper looks at.
struct Job {
  explicit Job(const PipelineSpec& s) : spec(s), layout(*s.layout) { spec.layout = &layout; }
  PipelineSpec spec;
  ChunkLayout layout;
  std::atomic<std::uint64_t> next{0};
  std::atomic<std::uint64_t> ios{0};
  std::atomic<bool> failed_flag{false};
  struct {
    std::atomic<std::uint64_t> probes{0}, pages{0}, cached_pages{0}, buffered_bytes{0}, direct_bytes{0};
  } residency;

  std::mutex mutex;
  std::condition_variable cv;
  unsigned active = 0;
  std::exception_ptr error;

  void fail(std::exception_ptr e) {
    std::lock_guard lock(mutex);
    if (!error) error = std::move(e);
    failed_flag = true;
  }
};

enum class Phase : std::uint8_t { free, io, copy_out, copy_in, io_ready };

struct Slot {
  Chunk chunk;
  std::optional<StagingPool::Lease> staging;
  std::uint32_t done = 0;  // bytes of the I/O transferred so far
  unsigned retries = 0;
  int ticket = -1;
  bool buffered = false;   // on the buffered descriptor
  Phase phase = Phase::free;
};

class Worker {
 public:
  explicit Worker(Job& job)
      : job_(job),
        spec_(job.spec),
        engine_(thread_engine(spec_.engine, spec_.depth)),
        completions_(spec_.depth),
        mover_(spec_.make_mover ? spec_.make_mover() : std::make_unique<HostMover>()) {
    if (spec_.pool != nullptr) {
      fixed_buffers_ = engine_.ensure_buffers(spec_.pool->id(), {&spec_.pool->region(), 1});
    }
    if (spec_.layout->count() >= 8) {
      const File& f = *spec_.file;
      file_slot_ = engine_.register_file(f.has_direct() ? f.direct_fd() : f.fd());
    }
  }
  ~Worker() { engine_.unregister_file(file_slot_); }
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  void run(std::uint64_t first) {
    pending_ = place(spec_.layout->chunk(first));
    for (;;) {
      retire_copies();
      start_ready_writes();
      if (!stopping_) start_new_chunks();
      if (engine_.in_flight() > 0) {
        const std::size_t n = engine_.submit_and_wait(completions_, 1);
        for (std::size_t k = 0; k < n; ++k) complete(completions_[k]);
      } else if (!copies_.empty()) {
        wait_oldest_copy();
      } else if (!ready_.empty()) {
        continue;  // writes whose copy-in finished: start them
      } else if (pending_ && !stopping_) {
        block_for_buffer();
      } else {
        return;
      }
      if (!stopping_ && job_.failed_flag.load(std::memory_order_relaxed)) stopping_ = true;
    }
  }

 private:
  std::byte* user_ptr(std::uint64_t file_offset) const { return spec_.user + (file_offset - spec_.start); }

  unsigned new_slot() {
    for (unsigned i = 0; i < slots_.size(); ++i) {
      if (slots_[i].phase == Phase::free) return i;
    }
    slots_.emplace_back();
    return static_cast<unsigned>(slots_.size() - 1);
  }

  // Work this worker holds that counts against its queue depth.
  std::size_t busy() const { return engine_.in_flight() + ready_.size() + (spec_.op == IoOp::write ? copies_.size() : 0); }

  // A read chunk the page cache holds at least half of goes through the buffered descriptor
  // without readahead (File::cache_fd), covering just the caller's bytes: into the caller's
  // memory, or staging for device memory.
  Chunk place(const Chunk& c) {
    if (spec_.residency == nullptr || !is_direct(c.mode)) return c;
    const std::uint64_t n = c.user_end - c.user_begin;
    const Residency r = spec_.residency->probe_edges(c.user_begin, n);
    auto& tally = job_.residency;
    tally.probes.fetch_add(1, std::memory_order_relaxed);
    tally.pages.fetch_add(r.pages, std::memory_order_relaxed);
    tally.cached_pages.fetch_add(r.cached, std::memory_order_relaxed);
    if (2 * r.cached < r.pages) {
      tally.direct_bytes.fetch_add(n, std::memory_order_relaxed);
      return c;
    }
    tally.buffered_bytes.fetch_add(n, std::memory_order_relaxed);
    return {c.user_begin, static_cast<std::uint32_t>(n), c.user_begin, c.user_end,
            spec_.layout->staged_user() ? ChunkMode::buffered_staged : ChunkMode::buffered_user, true};
  }

  void start_new_chunks() {
    while (busy() < spec_.depth) {
      if (!pending_) {
        const std::uint64_t i = job_.next.fetch_add(1);
        if (i >= spec_.layout->count()) return;
        pending_ = place(spec_.layout->chunk(i));
      }
      const Chunk c = *pending_;
      std::optional<StagingPool::Lease> lease;
      if (is_staged(c.mode)) {
        lease = spec_.pool->try_acquire();
        if (!lease) return;  // wait for our own buffers to come back, or block later
      }
      pending_.reset();
      begin(c, lease);
    }
  }

  void block_for_buffer() {
    stats().count_staging_wait();
    const Chunk c = *pending_;
    auto lease = spec_.pool->acquire();
    pending_.reset();
    begin(c, lease);
  }

  void begin(const Chunk& c, std::optional<StagingPool::Lease> lease) {
    const unsigned s = new_slot();
    Slot& slot = slots_[s];
    slot = Slot{c, lease, 0, 0, -1, c.mode == ChunkMode::buffered_user || c.mode == ChunkMode::buffered_staged, Phase::io};
    if (spec_.op == IoOp::write && slot.staging) {
      slot.ticket = mover_->start(slot.staging->data + (c.user_begin - c.offset), user_ptr(c.user_begin),
                                  c.user_end - c.user_begin, false);
      if (slot.ticket >= 0) {
        slot.phase = Phase::copy_in;
        copies_.push_back(s);
        return;
      }
    }
    issue(s);
  }

  void issue(unsigned s) {
    Slot& slot = slots_[s];
    slot.phase = Phase::io;
    const Chunk& c = slot.chunk;
    IoRequest r;
    r.op = spec_.op;
    r.tag = s;
    r.offset = c.offset + slot.done;
    r.len = c.len - slot.done;
    if (slot.staging) {
      r.buf = slot.staging->data + slot.done;
      if (fixed_buffers_) r.buf_index = 0;
    } else {
      r.buf = user_ptr(c.offset) + slot.done;
    }
    if (!slot.buffered && file_slot_ >= 0) {
      r.fd = file_slot_;
      r.fixed_file = true;
    } else if (!slot.buffered) {
      r.fd = spec_.file->direct_fd();
    } else {
      r.fd = slot.chunk.cached ? spec_.file->cache_fd() : spec_.file->fd();
    }
    engine_.prepare(r);
    job_.ios.fetch_add(1, std::memory_order_relaxed);
  }

  void release(unsigned s) {
    Slot& slot = slots_[s];
    if (slot.ticket >= 0) mover_->release(slot.ticket);
    if (slot.staging) spec_.pool->release(*slot.staging);
    slot = Slot{};
  }

  // The I/O of a chunk is complete.
  void io_done(unsigned s) {
    Slot& slot = slots_[s];
    if (spec_.op == IoOp::read && slot.staging) {
      const Chunk& c = slot.chunk;
      slot.ticket = mover_->start(user_ptr(c.user_begin), slot.staging->data + (c.user_begin - c.offset),
                                  c.user_end - c.user_begin, true);
      if (slot.ticket >= 0) {
        slot.phase = Phase::copy_out;
        copies_.push_back(s);
        return;
      }
    }
    release(s);
  }

  void retire_copies() {
    while (!copies_.empty() && mover_->done(slots_[copies_.front()].ticket)) {
      copy_done(copies_.front());
      copies_.pop_front();
    }
  }

  void wait_oldest_copy() {
    const unsigned s = copies_.front();
    mover_->wait(slots_[s].ticket);
    copies_.pop_front();
    copy_done(s);
  }

  void copy_done(unsigned s) {
    Slot& slot = slots_[s];
    if (slot.phase == Phase::copy_in && !stopping_) {
      mover_->release(slot.ticket);
      slot.ticket = -1;
      slot.phase = Phase::io_ready;
      ready_.push_back(s);
      return;
    }
    release(s);  // copy_out finished, or a copy_in after a failure
  }

  void start_ready_writes() {
    while (!ready_.empty() && engine_.in_flight() < engine_.capacity()) {
      const unsigned s = ready_.front();
      ready_.pop_front();
      if (stopping_) {
        release(s);
      } else {
        issue(s);
      }
    }
  }

  [[nodiscard]] ErrorContext context(const Slot& slot) const {
    return {.op = spec_.op == IoOp::read ? "read" : "write",
            .path = spec_.file->path(),
            .offset = slot.chunk.offset + slot.done,
            .size = slot.chunk.len - slot.done,
            .has_range = true};
  }

  void fail(unsigned s, Error e) {
    job_.fail(std::make_exception_ptr(std::move(e)));
    stopping_ = true;
    release(s);
  }

  void complete(const IoCompletion& comp) {
    const auto s = static_cast<unsigned>(comp.tag);
    Slot& slot = slots_[s];
    if (stopping_) {  // draining after a failure: the caller's bytes no longer matter
      release(s);
      return;
    }
    if (comp.result < 0) {
      const int err = static_cast<int>(-comp.result);
      if ((err == EINTR || err == EAGAIN) && slot.retries++ < max_transient_retries) {
        issue(s);
        return;
      }
      if (err == EINVAL && !slot.buffered) {
        slot.buffered = true;  // the filesystem refused this O_DIRECT request: go buffered
        issue(s);
        return;
      }
      fail(s, Error(ErrorDomain::os, err, context(slot), spec_.op == IoOp::read ? "read failed" : "write failed"));
      return;
    }
    slot.done += static_cast<std::uint32_t>(comp.result);
    // A staged read of the last block may end past EOF; the caller's bytes are all we need.
    const std::uint64_t need =
        spec_.op == IoOp::read ? slot.chunk.user_end - slot.chunk.offset : slot.chunk.len;
    if (slot.done >= need) {
      io_done(s);
      return;
    }
    if (comp.result == 0) {
      if (spec_.op == IoOp::read) {
        fail(s, Error(ErrorDomain::data, EIO, context(slot),
                      fmt::format("the file ended at offset {}, before the {} bytes it had when the "
                                  "read started: truncated during the read",
                                  slot.chunk.offset + slot.done, spec_.start + spec_.size)));
      } else {
        fail(s, Error(ErrorDomain::os, ENOSPC, context(slot), "write made no progress"));
      }
      return;
    }
    slot.buffered = true;  // continue the remainder, which may be unaligned, buffered
    issue(s);
  }

 public:
  // Stops cleanly after an exception: no I/O or copy may still target the caller's memory or a
  // staging buffer when the worker returns.
  void drain() noexcept {
    stopping_ = true;
    try {
      while (engine_.in_flight() > 0) {
        const std::size_t n = engine_.submit_and_wait(completions_, 1);
        for (std::size_t k = 0; k < n; ++k) release(static_cast<unsigned>(completions_[k].tag));
      }
      while (!copies_.empty()) wait_oldest_copy();
      while (!ready_.empty()) {
        release(ready_.front());
        ready_.pop_front();
      }
    } catch (...) {
      // Nothing more can be done; the engine destructor will drain what remains.
    }
  }

 private:
  Job& job_;
  const PipelineSpec& spec_;
  IoEngine& engine_;
  std::vector<IoCompletion> completions_;
  std::unique_ptr<Mover> mover_;
  std::vector<Slot> slots_;
  std::deque<unsigned> copies_;  // slots with a copy in flight, oldest first
  std::deque<unsigned> ready_;   // writes whose staging copy is done, waiting for the engine
  std::optional<Chunk> pending_;  // claimed, placed, waiting for a staging buffer or a slot
  bool fixed_buffers_ = false;
  int file_slot_ = -1;
  bool stopping_ = false;
};

void participate(const std::shared_ptr<Job>& job) {
  std::uint64_t first = 0;
  {
    std::lock_guard lock(job->mutex);
    if (job->error) return;
    first = job->next.fetch_add(1);
    if (first >= job->spec.layout->count()) return;
    ++job->active;
  }
  std::optional<Worker> w;
  try {
    w.emplace(*job);
    w->run(first);
  } catch (...) {
    job->fail(std::current_exception());
    if (w) w->drain();
  }
  w.reset();
  {
    std::lock_guard lock(job->mutex);
    --job->active;
  }
  job->cv.notify_all();
}

}  // namespace

PipelineSpec make_spec(IoOp op, const File& file, std::byte* user, std::uint64_t offset,
                       std::uint64_t size, const ChunkLayout& layout, const Config& cfg) {
  PipelineSpec spec;
  spec.op = op;
  spec.file = &file;
  spec.user = user;
  spec.start = offset;
  spec.size = size;
  spec.layout = &layout;
  spec.engine = resolve_engine(cfg.engine);
  spec.depth = cfg.queue_depth;
  spec.workers = cfg.effective_threads();
  return spec;
}

PipelineResult run_and_record(Path path, const PipelineSpec& spec) {
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
  };
  const Direction dir = spec.op == IoOp::read ? Direction::read : Direction::write;
  PipelineResult r;
  try {
    r = run_pipeline(spec);
  } catch (...) {
    stats().record(path, dir, 0, 0, elapsed(), true);
    throw;
  }
  r.nanoseconds = elapsed();
  r.ios += spec.ios_before;
  stats().record(path, dir, spec.size, r.ios, r.nanoseconds, false);
  return r;
}

PipelineResult run_pipeline(const PipelineSpec& spec) {
  auto job = std::make_shared<Job>(spec);
  const std::uint64_t chunks = spec.layout->count();
  // One worker keeps `depth` O_DIRECT I/Os in flight; a buffered read of cached pages is a copy
  // done in the submitting thread, so reads that may go buffered share out chunk by chunk.
  const bool copies = spec.op == IoOp::read && (spec.residency != nullptr || !spec.layout->direct());
  const std::uint64_t per_worker = copies ? 1 : spec.depth;
  const auto helpers = static_cast<unsigned>(std::min<std::uint64_t>(
      spec.workers, (chunks + per_worker - 1) / per_worker)) - 1;
  if (helpers > 0) {
    ThreadPool& tp = default_pool();
    tp.ensure_threads(helpers);
    for (unsigned h = 0; h < helpers; ++h) tp.post([job] { participate(job); });
  }
  participate(job);
  {
    std::unique_lock lock(job->mutex);
    job->cv.wait(lock, [&] { return job->active == 0; });
  }
  if (job->error) std::rethrow_exception(job->error);
  const auto& t = job->residency;
  return {job->ios.load(), 0,
          {t.probes.load(), t.pages.load(), t.cached_pages.load(), t.buffered_bytes.load(), t.direct_bytes.load()}};
}

std::string residency_reason(const ResidencyTally& t, const std::string& direct_how) {
  if (t.probes == 0) return direct_how;
  // Whole percent, never rounded up to 100 nor down to 0 when that would not be true.
  std::uint64_t pct = t.pages == 0 ? 0 : t.cached_pages * 100 / t.pages;
  if (pct == 0 && t.cached_pages > 0) pct = 1;
  if (pct == 100 && t.cached_pages < t.pages) pct = 99;
  const std::string held = fmt::format("page cache held {}% of the range", pct);
  if (t.direct_bytes == 0) return held + ": buffered";
  if (t.buffered_bytes == 0) return held + ": " + direct_how;
  return fmt::format("{}: mixed: {} buffered, {} {}", held, format_size(t.buffered_bytes),
                     format_size(t.direct_bytes), direct_how);
}

}  // namespace sluice::detail
