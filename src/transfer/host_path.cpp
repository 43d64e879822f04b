// The host path executor. One request becomes a ChunkLayout; the calling thread and up to
// `threads - 1` helpers from the pool pull chunk indices from a shared counter and keep up to
// `queue_depth` I/Os each in flight on their thread's engine. The caller never waits for a
// helper that has not started: a helper registers itself under the job's mutex and gives up if
// the work is gone, so a request always finishes even when every pool thread is busy.
//
// Completion rules for one chunk: a short transfer is continued on the buffered descriptor (an
// O_DIRECT remainder may be unaligned); EINTR/EAGAIN are resubmitted; EINVAL on O_DIRECT is
// retried buffered (a filesystem that reported alignments it does not honour); a read that
// returns 0 before the bytes the file had when the request started means the file was
// truncated under us, which is an error, never a silently short result.
#include "host_path.hpp"

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <mutex>
#include <vector>

#include <fmt/format.h>

#include "chunk_layout.hpp"
#include "sluice/error.hpp"
#include "sluice/io_engine.hpp"
#include "sluice/staging_pool.hpp"
#include "sluice/stats.hpp"
#include "sluice/thread_pool.hpp"

namespace sluice::detail {
namespace {

constexpr int max_retries = 64;

struct Job {
  Job(IoOp o, const File& f, std::byte* u, std::uint64_t off, std::uint64_t n, ChunkLayout l)
      : op(o), file(f), user(u), start(off), size(n), layout(l) {}

  IoOp op;
  const File& file;
  std::byte* user;
  std::uint64_t start;
  std::uint64_t size;
  ChunkLayout layout;
  EngineKind engine = EngineKind::psync;
  unsigned depth = 1;
  StagingPool* pool = nullptr;
  bool use_fixed_file = false;

  std::atomic<std::uint64_t> next{0};
  std::atomic<std::uint64_t> ios{0};

  std::mutex mutex;
  std::condition_variable cv;
  unsigned active = 0;
  bool failed = false;
  std::exception_ptr error;

  void fail(std::exception_ptr e) {
    std::lock_guard lock(mutex);
    if (!failed) {
      failed = true;
      error = std::move(e);
    }
  }
  bool has_failed() {
    std::lock_guard lock(mutex);
    return failed;
  }
};

struct Slot {
  Chunk chunk;
  std::optional<StagingPool::Lease> staging;
  std::uint32_t done = 0;  // bytes transferred so far
  int retries = 0;
  bool buffered = false;   // continuing on the buffered descriptor
  bool busy = false;
};

class Worker {
 public:
  explicit Worker(Job& job)
      : job_(job),
        engine_(thread_engine(job.engine, job.depth)),
        slots_(job.depth),
        completions_(job.depth) {
    if (job_.pool != nullptr) {
      fixed_buffers_ = engine_.ensure_buffers(job_.pool->id(), {&job_.pool->region(), 1});
    }
    if (job_.use_fixed_file) {
      const int fd = job_.file.has_direct() ? job_.file.direct_fd() : job_.file.fd();
      file_slot_ = engine_.register_file(fd);
    }
  }
  ~Worker() { engine_.unregister_file(file_slot_); }
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  void run(std::uint64_t first) {
    std::optional<std::uint64_t> pending = first;
    for (;;) {
      while (engine_.in_flight() < job_.depth && !stopping_) {
        if (!pending) {
          const std::uint64_t i = job_.next.fetch_add(1);
          if (i >= job_.layout.count()) break;
          pending = i;
        }
        if (!start_chunk(*pending)) break;  // no staging buffer free: wait for completions
        pending.reset();
      }
      if (engine_.in_flight() == 0) {
        if (pending && !stopping_) {
          continue;  // a staging buffer may only come from another worker: start_chunk blocks
        }
        return;
      }
      const std::size_t n = engine_.submit_and_wait(completions_, 1);
      for (std::size_t k = 0; k < n; ++k) complete(completions_[k]);
      if (!stopping_ && job_.has_failed()) stopping_ = true;
    }
  }

 private:
  bool start_chunk(std::uint64_t index) {
    const Chunk c = job_.layout.chunk(index);
    std::optional<StagingPool::Lease> lease;
    if (c.mode == ChunkMode::direct_staged) {
      if (engine_.in_flight() == 0) {
        lease = job_.pool->try_acquire();
        if (!lease) {
          stats().count_staging_wait();
          lease = job_.pool->acquire();
        }
      } else {
        lease = job_.pool->try_acquire();
        if (!lease) return false;
      }
      if (job_.op == IoOp::write) {
        std::memcpy(lease->data + (c.user_begin - c.offset), user_ptr(c.user_begin),
                    c.user_end - c.user_begin);
      }
    }
    unsigned s = 0;
    while (slots_[s].busy) ++s;
    slots_[s] = Slot{c, lease, 0, 0, c.mode == ChunkMode::buffered_user, true};
    issue(s);
    return true;
  }

  std::byte* user_ptr(std::uint64_t file_offset) const {
    return job_.user + (file_offset - job_.start);
  }

  void issue(unsigned s) {
    Slot& slot = slots_[s];
    const Chunk& c = slot.chunk;
    IoRequest r;
    r.op = job_.op;
    r.tag = s;
    r.offset = c.offset + slot.done;
    r.len = c.len - slot.done;
    if (slot.staging) {
      r.buf = slot.staging->data + slot.done;
      if (fixed_buffers_) r.buf_index = 0;
    } else {
      r.buf = user_ptr(c.offset) + slot.done;
    }
    const bool direct = !slot.buffered;
    if (direct && file_slot_ >= 0) {
      r.fd = file_slot_;
      r.fixed_file = true;
    } else {
      r.fd = direct ? job_.file.direct_fd() : job_.file.fd();
    }
    engine_.prepare(r);
    job_.ios.fetch_add(1, std::memory_order_relaxed);
  }

  void finish(Slot& slot) {
    if (slot.staging && job_.op == IoOp::read) {
      const Chunk& c = slot.chunk;
      std::memcpy(user_ptr(c.user_begin), slot.staging->data + (c.user_begin - c.offset),
                  c.user_end - c.user_begin);
    }
    release(slot);
  }

  void release(Slot& slot) {
    if (slot.staging) job_.pool->release(*slot.staging);
    slot.staging.reset();
    slot.busy = false;
  }

  void fail(Slot& slot, Error e) {
    job_.fail(std::make_exception_ptr(std::move(e)));
    stopping_ = true;
    release(slot);
  }

  [[nodiscard]] ErrorContext context(const Slot& slot) const {
    return {.op = job_.op == IoOp::read ? "read" : "write",
            .path = job_.file.path(),
            .offset = slot.chunk.offset + slot.done,
            .size = slot.chunk.len - slot.done,
            .has_range = true};
  }

  void complete(const IoCompletion& comp) {
    const auto s = static_cast<unsigned>(comp.tag);
    Slot& slot = slots_[s];
    if (stopping_) {  // draining after a failure: the caller's bytes no longer matter
      release(slot);
      return;
    }
    if (comp.result < 0) {
      const int err = static_cast<int>(-comp.result);
      if ((err == EINTR || err == EAGAIN) && slot.retries++ < max_retries) {
        issue(s);
        return;
      }
      if (err == EINVAL && !slot.buffered) {
        slot.buffered = true;  // the filesystem refused this O_DIRECT request: go buffered
        issue(s);
        return;
      }
      fail(slot, Error(ErrorDomain::os, err, context(slot),
                       job_.op == IoOp::read ? "read failed" : "write failed"));
      return;
    }
    slot.done += static_cast<std::uint32_t>(comp.result);
    // A staged read of the last block may end past EOF; the caller's bytes are all we need.
    const std::uint64_t need = job_.op == IoOp::read ? slot.chunk.user_end - slot.chunk.offset
                                                     : slot.chunk.len;
    if (slot.done >= need) {
      finish(slot);
      return;
    }
    if (comp.result == 0) {
      if (job_.op == IoOp::read) {
        fail(slot, Error(ErrorDomain::data, EIO, context(slot),
                         fmt::format("the file ended at offset {}, before the {} bytes it had "
                                     "when the read started: truncated during the read",
                                     slot.chunk.offset + slot.done, job_.start + job_.size)));
      } else {
        fail(slot, Error(ErrorDomain::os, ENOSPC, context(slot), "write made no progress"));
      }
      return;
    }
    slot.buffered = true;  // continue the remainder, which may be unaligned, buffered
    issue(s);
  }

  Job& job_;
  IoEngine& engine_;
  std::vector<Slot> slots_;
  std::vector<IoCompletion> completions_;
  bool fixed_buffers_ = false;
  int file_slot_ = -1;
  bool stopping_ = false;
};

// Runs the worker loop on this thread if there is work; the job's bookkeeping decides.
void participate(const std::shared_ptr<Job>& job) {
  std::uint64_t first = 0;
  {
    std::lock_guard lock(job->mutex);
    if (job->failed) return;
    first = job->next.fetch_add(1);
    if (first >= job->layout.count()) return;
    ++job->active;
  }
  try {
    Worker w(*job);
    w.run(first);
  } catch (...) {
    job->fail(std::current_exception());
  }
  {
    std::lock_guard lock(job->mutex);
    --job->active;
  }
  job->cv.notify_all();
}

TransferResult execute(IoOp op, const File& file, std::byte* user, std::uint64_t size,
                       std::uint64_t offset, const Config& cfg) {
  const auto t0 = std::chrono::steady_clock::now();
  const bool direct = cfg.direct_io && file.has_direct();
  StagingPool* pool = direct ? &host_staging_pool() : nullptr;
  const std::uint64_t io_size =
      pool != nullptr ? std::min<std::uint64_t>(cfg.io_size, pool->buffer_size()) : cfg.io_size;
  const bool use_direct =
      direct && std::max<std::uint64_t>(file.offset_align(), 4096) <= io_size;
  auto job = std::make_shared<Job>(
      op, file, user, offset, size,
      ChunkLayout(op, offset, size, reinterpret_cast<std::uintptr_t>(user), use_direct,
                  file.offset_align(), file.mem_align(), io_size));
  job->engine = resolve_engine(cfg.engine);
  job->depth = cfg.queue_depth;
  job->pool = pool;
  job->use_fixed_file = job->layout.count() >= 8;

  const std::uint64_t chunks = job->layout.count();
  const auto helpers = static_cast<unsigned>(std::min<std::uint64_t>(
      cfg.effective_threads(), (chunks + job->depth - 1) / job->depth)) - 1;
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
  const auto ns = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
          .count());
  const Direction dir = op == IoOp::read ? Direction::read : Direction::write;
  const std::uint64_t ios = job->ios.load();
  if (job->error) {
    stats().record(Path::host, dir, 0, ios, ns, true);
    std::rethrow_exception(job->error);
  }
  stats().record(Path::host, dir, size, ios, ns, false);

  TransferResult r;
  r.bytes = size;
  r.path = Path::host;
  r.seconds = static_cast<double>(ns) / 1e9;
  r.ios = ios;
  if (!use_direct) {
    r.reason = "buffered: " + (cfg.direct_io ? (file.has_direct()
                                                    ? std::string("offset alignment larger than io_size")
                                                    : file.direct_reason())
                                             : std::string("direct I/O disabled by configuration"));
  } else if (const auto staged = job->layout.staged_count(); staged == 0) {
    r.reason = "O_DIRECT";
  } else if (!job->layout.middle_aligned()) {
    r.reason = fmt::format(
        "O_DIRECT through staging buffers: buffer address not aligned like the file offset "
        "(mod {})", file.mem_align());
  } else {
    r.reason = "O_DIRECT; unaligned head/tail through staging";
  }
  return r;
}

void check_common(const File& file, const void* buf, std::uint64_t size, std::uint64_t offset,
                  std::string_view op) {
  if (!file.is_open()) throw_os_error(EBADF, {.op = op, .path = file.path()}, "file is not open");
  const ErrorContext ctx{.op = op, .path = file.path(), .offset = offset, .size = size,
                         .has_range = true};
  if (buf == nullptr && size > 0) throw_usage_error(ctx, "null buffer");
  constexpr auto max_off = static_cast<std::uint64_t>(INT64_MAX);
  if (offset > max_off || size > max_off - offset) throw_usage_error(ctx, "range overflows");
}

}  // namespace

TransferResult host_read(const File& file, void* buf, std::uint64_t size, std::uint64_t offset,
                         const Config& cfg) {
  check_common(file, buf, size, offset, "read");
  if (!file.readable()) {
    throw_usage_error({.op = "read", .path = file.path()}, "file was opened for writing only");
  }
  const std::uint64_t file_size = file.size();
  const std::uint64_t n = offset >= file_size ? 0 : std::min(size, file_size - offset);
  if (n == 0) return {0, Path::host, "end of file", 0, 0};
  return execute(IoOp::read, file, static_cast<std::byte*>(buf), n, offset, cfg);
}

TransferResult host_write(const File& file, const void* buf, std::uint64_t size,
                          std::uint64_t offset, const Config& cfg) {
  check_common(file, buf, size, offset, "write");
  if (!file.writable()) {
    throw_usage_error({.op = "write", .path = file.path()}, "file was opened read-only");
  }
  if (size == 0) return {0, Path::host, "nothing to write", 0, 0};
  // The executor never writes through the pointer for writes; the cast only shares one job type.
  return execute(IoOp::write, file, static_cast<std::byte*>(const_cast<void*>(buf)), size, offset,
                 cfg);
}

}  // namespace sluice::detail
