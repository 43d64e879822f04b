// The async I/O thread. read_async used to run every request on a pool thread as a synchronous
// read: a thread hop, a ring round-trip and a sleep per request, and never more requests in
// flight than the pool had threads (4 KiB random reads at 32 in flight: 0.15x of fio's IOPS at
// 24 us of CPU per read). Small O_DIRECT transfers into host memory now go to one thread that
// owns an io_uring (single issuer, deferred task running, like every engine): callers queue
// requests under a mutex, the thread prepares everything queued, submits, and collects every
// completion that is ready, fulfilling each request's promise.
//
// Wake-ups (docs/tuning.md, "Small random reads", has the measurements):
// - The thread sleeps on a condition variable when it has nothing in flight, and in the kernel
//   (submit_and_wait) when it has. A caller that queues work notifies it in the first case; in
//   the second it wakes it (IoEngine::wake: an eventfd read armed in the ring) only once the
//   requests waiting reach a quarter of those in flight, since the next completion ends the wait
//   anyway. A busy thread takes new requests at its next turn without any wake-up.
// - Completions of one batch are fulfilled newest first: a caller waiting for the oldest is then
//   woken once, with the rest ready, instead of once per request.
// - An engine that cannot be woken (a test double) still works: its thread takes new requests
//   when the next completion ends its wait.
//
// Submission: like the bench loop, prepared requests go to the kernel a sixteenth of what is
// outstanding at a time, the last ones with the wait (a multi-request io_uring_enter is plugged,
// so its first requests would wait for the last to be prepared).
//
// What is not served here: anything the fast path cannot finish in one request. A completion
// that is short (the end of the file, or a partial transfer) or failed hands the rest to the
// synchronous path on the pool (read/write with the caller's options), which continues it
// buffered, clamps it at the end of the file, retries EINVAL buffered, or reports the error with
// its context; EINTR and EAGAIN are resubmitted here. Every request's promise is set exactly
// once: with its result, with the synchronous path's outcome, or with the error that stopped it.
#include "async_io.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "sluice/error.hpp"
#include "sluice/stats.hpp"
#include "sluice/thread_pool.hpp"
#include "transfer_promise.hpp"

namespace sluice::detail {
namespace {

// Ring size of the thread's engine; more requests than this wait in its backlog.
constexpr unsigned ring_depth = 256;
constexpr std::string_view async_reason = "O_DIRECT; async I/O thread";

std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

// Requests in the ring are linked, so that a ring that fails can still fail each of them.
struct Link {
  Link* prev = this;
  Link* next = this;
  void insert_before(Link* at) noexcept {
    prev = at->prev;
    next = at;
    at->prev->next = this;
    at->prev = this;
  }
  void unlink() noexcept {
    prev->next = next;
    next->prev = prev;
    prev = next = this;
  }
};

struct Request : Link {
  AsyncTransfer t;
  std::uint64_t done = 0;  // bytes transferred so far
  unsigned retries = 0;
  std::uint64_t start_ns = 0;
  std::shared_ptr<const TransferOptions> options;
  TransferPromise promise;

  // Each lets go of the file first: once the future is ready the caller's handle may be gone and
  // the process may be exiting, so the last close (and a cuFile deregistration) must not follow
  // it on this thread (see on_pool in transfer.cpp).
  void fulfill(TransferResult res) {
    t.file.close();
    promise.set_value(std::move(res));
  }
  void fail(std::exception_ptr error) {
    t.file.close();
    promise.set_exception(std::move(error));
  }
};

void record(const Request& r, std::uint64_t bytes, std::uint64_t ns) {
  const Direction d = r.t.op == IoOp::read ? Direction::read : Direction::write;
  stats().record(Path::host, d, bytes, 1, ns, false);
  stats().record_target("host", r.t.file.fs_type(), d, bytes, 1, ns, false);
}

// The rest of a request that came back short or failed, through the synchronous path.
void finish_on_pool(std::unique_ptr<Request> r) {
  if (r->done > 0) record(*r, r->done, now_ns() - r->start_ns);
  default_pool().post([r = std::shared_ptr<Request>(std::move(r))] {
    const AsyncTransfer& t = r->t;
    try {
      std::byte* buf = t.buf + r->done;
      const std::uint64_t rest = t.size - r->done;
      TransferResult res = t.op == IoOp::read
                               ? read(t.file, buf, rest, t.offset + r->done, *r->options)
                               : write(t.file, buf, rest, t.offset + r->done, *r->options);
      res.bytes += r->done;
      res.ios += 1;
      res.reason = fmt::format("{}; the rest: {}", async_reason, res.reason);
      res.seconds = static_cast<double>(now_ns() - r->start_ns) / 1e9;
      r->fulfill(std::move(res));
    } catch (...) {
      r->fail(std::current_exception());
    }
  });
}

class AsyncIo {
 public:
  static AsyncIo& instance() {
    // Leaked on purpose, like the default pool: the thread never exits.
    static auto* io = new AsyncIo();
    return *io;
  }

  void submit(std::vector<std::unique_ptr<Request>>& reqs) {
    IoEngine* wake = nullptr;
    {
      std::lock_guard lock(mutex_);
      for (auto& r : reqs) incoming_.push_back(r.release());
      if (state_ == State::idle) {
        cv_.notify_one();
        state_ = State::running;  // one wake-up is enough until the thread sleeps again
      } else if (state_ == State::in_kernel && incoming_.size() >= wake_after_) {
        state_ = State::running;
        wake = engine_;
        wakers_.fetch_add(1);  // keeps the engine alive until wake() has returned
      }
    }
    if (wake != nullptr) {
      wake->wake();
      wakers_.fetch_sub(1);
    }
  }

 private:
  enum class State : std::uint8_t { running, idle, in_kernel };

  AsyncIo() {
    std::thread([this] { run(); }).detach();
  }

  [[noreturn]] void run() {
    for (;;) {
      take_incoming();
      issue();
      if (engine_->in_flight() == 0) continue;
      const std::size_t n = wait();
      // Newest first: a caller waiting for the oldest is then woken once, with the rest ready,
      // instead of once per request (completions arrive about in submission order).
      for (std::size_t k = n; k-- > 0;) complete(completions_[k]);
    }
  }

  // Moves what callers queued into the backlog; sleeps while there is nothing to do. With
  // nothing in flight, picks up a new engine (a test's factory) before any request uses it.
  void take_incoming() {
    std::unique_lock lock(mutex_);
    if (incoming_.empty() && backlog_.empty() &&
        (engine_ == nullptr || engine_->in_flight() == 0)) {
      state_ = State::idle;
      cv_.wait(lock, [&] { return !incoming_.empty(); });
    }
    state_ = State::running;
    backlog_.insert(backlog_.end(), incoming_.begin(), incoming_.end());
    incoming_.clear();
    if (engine_ == nullptr || engine_->in_flight() == 0) {
      // thread_engine() destroys the old engine when the factory changed: no caller may be
      // waking it. New wakers need state in_kernel, which only this thread sets.
      while (wakers_.load() != 0) std::this_thread::yield();
      IoEngine& e = thread_engine(EngineKind::uring, ring_depth);
      if (&e != engine_) {
        engine_ = &e;
        wakeable_ = e.enable_wake();
        completions_.resize(e.capacity());
      }
    }
  }

  void issue() {
    const std::size_t group =
        std::max<std::size_t>(1, (engine_->in_flight() + backlog_.size()) / 16);
    std::size_t unsent = 0;
    while (!backlog_.empty() && engine_->in_flight() < engine_->capacity()) {
      Request* r = backlog_.front();
      backlog_.pop_front();
      IoRequest q;
      q.op = r->t.op;
      q.fd = r->t.file.direct_fd();
      q.buf = r->t.buf + r->done;
      q.len = static_cast<std::uint32_t>(r->t.size - r->done);
      q.offset = r->t.offset + r->done;
      q.tag = reinterpret_cast<std::uintptr_t>(r);
      try {
        engine_->prepare(q);
      } catch (...) {
        r->fail(std::current_exception());
        delete r;
        continue;
      }
      r->insert_before(&in_ring_);
      if (++unsent == group && !backlog_.empty()) {
        (void)engine_->submit_and_wait({}, 0);  // submit only: the device starts on these
        unsent = 0;
      }
    }
  }

  // Submits what is prepared and waits for a completion, unless callers queued more meanwhile.
  std::size_t wait() {
    bool block = false;
    {
      std::lock_guard lock(mutex_);
      block = incoming_.empty();
      if (block && wakeable_) {
        state_ = State::in_kernel;
        wake_after_ = std::max<std::size_t>(1, engine_->in_flight() / 4);
      }
    }
    try {
      return engine_->submit_and_wait(completions_, block ? 1 : 0);
    } catch (...) {
      fail_in_flight(std::current_exception());
      return 0;
    }
  }

  // submit_and_wait threw (the ring is unusable): collect what can still be collected, then
  // report the error for the requests whose completions cannot be had.
  void fail_in_flight(const std::exception_ptr& error) {
    try {
      while (engine_->in_flight() > 0) {
        const std::size_t n = engine_->submit_and_wait(completions_, 1);
        for (std::size_t k = 0; k < n; ++k) complete(completions_[k]);
      }
    } catch (...) {
      // Nothing more comes back from this ring. The kernel may still write into these buffers,
      // which is what an exception from a ring with requests in flight means for any caller.
      while (in_ring_.next != &in_ring_) {
        std::unique_ptr<Request> r(static_cast<Request*>(in_ring_.next));
        r->unlink();
        r->fail(error);
      }
    }
  }

  void complete(const IoCompletion& c) {
    std::unique_ptr<Request> r(reinterpret_cast<Request*>(static_cast<std::uintptr_t>(c.tag)));
    r->unlink();
    const std::uint64_t rest = r->t.size - r->done;
    if ((c.result == -EINTR || c.result == -EAGAIN) && r->retries++ < max_transient_retries) {
      backlog_.push_front(r.release());  // the kernel asks to try again
      return;
    }
    if (c.result <= 0 || static_cast<std::uint64_t>(c.result) < rest) {
      if (c.result > 0) r->done += static_cast<std::uint64_t>(c.result);
      finish_on_pool(std::move(r));
      return;
    }
    const std::uint64_t ns = now_ns() - r->start_ns;
    record(*r, r->t.size, ns);
    r->fulfill({r->t.size, Path::host, std::string(async_reason), static_cast<double>(ns) / 1e9, 1});
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<Request*> incoming_;  // queued by callers
  State state_ = State::running;
  IoEngine* engine_ = nullptr;  // the thread's engine; changed only with nothing in flight
  bool wakeable_ = false;
  std::size_t wake_after_ = 1;
  std::atomic<unsigned> wakers_{0};  // callers between deciding to wake the engine and waking it

  // The thread's own.
  std::deque<Request*> backlog_;  // taken from incoming_, waiting for room in the ring
  Link in_ring_;                  // requests prepared in the ring, not yet completed
  std::vector<IoCompletion> completions_;
};

}  // namespace

bool async_eligible(const AsyncTransfer& t, const Config& cfg, SyncMode sync) {
  const File& f = t.file;
  if (t.size == 0 || t.buf == nullptr || sync != SyncMode::none || !cfg.direct_io ||
      !f.has_direct()) {
    return false;
  }
  if (t.op == IoOp::read ? !f.readable() : !f.writable()) return false;
  const std::uint64_t align = std::max<std::uint32_t>(f.offset_align(), 1);
  if (t.size > cfg.io_size || std::max<std::uint64_t>(align, 4096) > cfg.io_size) return false;
  if (t.offset % align != 0 || t.size % align != 0 || t.offset > INT64_MAX - t.size) return false;
  if (reinterpret_cast<std::uintptr_t>(t.buf) % std::max<std::uint32_t>(f.mem_align(), 1) != 0)
    return false;
  return resolve_engine(cfg.engine) == EngineKind::uring;
}

void submit_async(std::span<const AsyncTransfer> transfers, const TransferOptions& options,
                  std::vector<TransferFuture>& out) {
  auto shared = std::make_shared<const TransferOptions>(options);
  std::vector<std::unique_ptr<Request>> reqs;
  reqs.reserve(transfers.size());
  const std::uint64_t t0 = now_ns();
  for (const AsyncTransfer& t : transfers) {
    auto r = std::make_unique<Request>();
    r->t = t;
    r->start_ns = t0;
    r->options = shared;
    out.push_back(r->promise.get_future());
    reqs.push_back(std::move(r));
  }
  AsyncIo::instance().submit(reqs);
}

}  // namespace sluice::detail
