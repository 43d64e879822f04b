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
//
// Device reads. A small read into device memory on the bounce path used to take the pool too: a
// synchronous bounce pipeline per request, with a staging buffer, a copy, an event and a sleep on
// it (4 KiB random reads into the sim device at 32 in flight: ~9.5K IOPS at ~90 us of CPU per
// read). Reads of at most device_slot_size now come here as well. Each device has a lane: pinned
// slots (device_slots of device_slot_size) and a stream. A read lands in a slot; when it
// completes, its copy to the destination is queued on the lane's stream at once, and ONE host
// function on that stream fulfils the reads whose copies were queued before it and gives their
// slots back. A lane has at most one host function outstanding: work queued after a host
// function waits for it to return, so one per completion batch made the stream alternate copy,
// host function, copy (1 read per host function, ~7K IOPS on the sim); copies queued meanwhile
// wait for the next one, which grows the batches under load. Reads wait for a free slot in the
// lane. A host function wakes the thread only when reads wait for slots or copies for a host
// function. A short or failed read gives its slot back and goes to the pool whole (the
// synchronous bounce path clamps at the end of the file and reports errors with context).
// CUDA does not run host functions once the context has failed, so while batches are pending an
// idle thread wakes every quarter second and synchronizes the lane's stream: an error fails the
// pending requests and the lane, whose later reads go to the pool. A lane whose device nobody
// else holds is released when the thread is idle.
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

#include "core/per_process.hpp"
#include "sluice/error.hpp"
#include "sluice/stats.hpp"
#include "sluice/thread_pool.hpp"
#include "transfer_promise.hpp"

namespace sluice::detail {
namespace {

// Ring size of the thread's engine; more requests than this wait in its backlog.
constexpr unsigned ring_depth = 256;
constexpr std::string_view async_reason = "O_DIRECT; async I/O thread";
// Pinned slots per device lane (device_slots x device_slot_size: 8 MiB of pinned memory).
constexpr std::size_t device_slots = 128;
// How long an idle thread with copies pending waits before it asks the device (see above).
constexpr auto copy_check_interval = std::chrono::milliseconds(250);

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

struct Lane;

struct Request : Link {
  AsyncTransfer t;
  std::uint64_t done = 0;  // bytes transferred so far (host memory only: a device read is whole)
  unsigned retries = 0;
  std::uint64_t start_ns = 0;
  std::shared_ptr<const TransferOptions> options;
  TransferPromise promise;
  Lane* lane = nullptr;      // a device read's lane, once it has one
  std::byte* slot = nullptr;  // and its pinned slot while it holds one

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

// A device's pinned slots and copy stream (see "Device reads" above). The thread's own, except
// `returned` and `pending`, which the host functions reach under AsyncIo's mutex.
struct CopyBatch;
struct Lane {
  std::shared_ptr<Device> device;
  std::string key;  // the per-device counters' name: "sim", "cuda:N"
  StreamHandle stream{};
  std::byte* pinned = nullptr;
  std::vector<std::byte*> free;     // slots no request holds
  std::deque<Request*> waiting;     // reads waiting for a slot
  std::vector<Request*> copying;    // reads whose copy was queued after the last host function
  bool broken = false;              // the device failed: kept for late host functions, never used
  std::vector<std::byte*> returned;  // under the mutex: slots the host functions gave back
  std::vector<CopyBatch*> pending;   // under the mutex: batches whose host function has not run
};

// One host function's reads. Claimed once: by the host function, or by the thread failing the
// batch after the device reported an error (it then stays allocated: a late host function may
// still look at `claimed`).
class AsyncIo;
struct CopyBatch {
  AsyncIo* io = nullptr;
  Lane* lane = nullptr;
  std::vector<Request*> reqs;
  std::atomic<bool> claimed{false};
};

std::string device_key(const Device& device) {
  const DeviceInfo& info = device.info();
  if (info.kind != DeviceKind::cuda) return std::string(to_string(info.kind));
  return fmt::format("cuda:{}", info.ordinal);
}

void record(const Request& r, std::uint64_t bytes, std::uint64_t ns) {
  const Direction d = r.t.op == IoOp::read ? Direction::read : Direction::write;
  const bool dev = r.lane != nullptr;
  stats().record(dev ? Path::bounce : Path::host, d, bytes, 1, ns, false);
  stats().record_target(dev ? std::string_view(r.lane->key) : "host", r.t.file.fs_type(), d, bytes, 1, ns, false);
}

// Why a device read went to the pool (its result's reason says so).
constexpr std::string_view came_back_short =
    "read again on a pool thread: the async I/O thread's O_DIRECT read came back short or failed";
constexpr std::string_view lane_failed = "on a pool thread: the device failed the async I/O thread's copies";

// The rest of a request that came back short or failed, through the synchronous path. A device
// read goes whole (its bytes in the slot are not kept), and `why` says why it went.
void finish_on_pool(std::unique_ptr<Request> r, std::string_view why = came_back_short) {
  if (r->done > 0) record(*r, r->done, now_ns() - r->start_ns);
  default_pool().post([r = std::shared_ptr<Request>(std::move(r)), why] {
    const AsyncTransfer& t = r->t;
    try {
      std::byte* buf = t.buf + r->done;
      const std::uint64_t rest = t.size - r->done;
      TransferResult res = t.op == IoOp::read
                               ? read(t.file, buf, rest, t.offset + r->done, *r->options)
                               : write(t.file, buf, rest, t.offset + r->done, *r->options);
      res.bytes += r->done;
      res.ios += 1;
      res.reason = t.device ? fmt::format("{} ({})", res.reason, why)
                            : fmt::format("{}; the rest: {}", async_reason, res.reason);
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
    // Leaked on purpose, like the default pool: the thread never exits. One per process: a forked
    // child's parent's thread does not exist in it, and its ring is the parent's (per_process.hpp).
    return PerProcess<AsyncIo>::get([] { return new AsyncIo(); });
  }

  void submit(std::vector<std::unique_ptr<Request>>& reqs) {
    IoEngine* wake = nullptr;
    {
      std::lock_guard lock(mutex_);
      for (auto& r : reqs) incoming_.push_back(r.release());
      // In the kernel the next completion ends the wait anyway: wake it only for many requests.
      if (state_ == State::idle || (state_ == State::in_kernel && incoming_.size() >= wake_after_)) {
        wake = poke_locked();
      }
    }
    finish_poke(wake);
  }

  // The host function after a batch's copies: fulfils its reads and gives their slots back.
  static void copies_done(void* arg) {
    auto* batch = static_cast<CopyBatch*>(arg);
    batch->io->finish_batch(batch);
  }

 private:
  enum class State : std::uint8_t { running, idle, in_kernel };

  AsyncIo() {
    std::thread([this] { run(); }).detach();
  }

  // Under mutex_: gets the thread going. One that sleeps on the condition variable is notified;
  // for one that sleeps in the kernel, returns the engine the caller must wake (finish_poke, after
  // unlocking). One wake-up is enough until the thread sleeps again.
  IoEngine* poke_locked() {
    if (state_ == State::idle) {
      woken_ = true;
      state_ = State::running;
      cv_.notify_one();
    } else if (state_ == State::in_kernel) {
      state_ = State::running;
      wakers_.fetch_add(1);  // keeps the engine alive until wake() has returned
      return engine_;
    }
    return nullptr;
  }
  void finish_poke(IoEngine* wake) {
    if (wake == nullptr) return;
    wake->wake();
    wakers_.fetch_sub(1);
  }

  [[noreturn]] void run() {
    for (;;) {
      take_incoming();
      issue();
      if (engine_->in_flight() > 0) {
        const std::size_t n = wait();
        // Newest first: a caller waiting for the oldest is then woken once, with the rest ready,
        // instead of once per request (completions arrive about in submission order).
        for (std::size_t k = n; k-- > 0;) complete(completions_[k]);
      }
      start_host_functions();
    }
  }

  // Under mutex_ (each lane's `pending`).
  [[nodiscard]] bool nothing_to_do() const {
    return incoming_.empty() && backlog_.empty() && (engine_ == nullptr || engine_->in_flight() == 0) &&
           !host_function_due();
  }
  [[nodiscard]] bool host_function_due() const {
    return std::any_of(lanes_.begin(), lanes_.end(),
                       [](const auto& l) { return !l->copying.empty() && l->pending.empty(); });
  }
  // Under mutex_: whether a host function that finishes should wake the thread.
  [[nodiscard]] bool wants_host_functions() const {
    return waiting_ > 0 || std::any_of(lanes_.begin(), lanes_.end(), [](const auto& l) { return !l->copying.empty(); });
  }

  // Moves what callers queued into the backlog; sleeps while there is nothing to do. With
  // nothing in flight, picks up a new engine (a test's factory) before any request uses it.
  void take_incoming() {
    std::unique_lock lock(mutex_);
    take_returned();
    while (nothing_to_do()) {
      release_idle_lanes(lock);
      state_ = State::idle;
      starving_ = wants_host_functions();
      woken_ = false;
      const auto woken = [&] { return woken_ || !incoming_.empty(); };
      if (!copies_pending()) {
        cv_.wait(lock, woken);
      } else if (!cv_.wait_for(lock, copy_check_interval, woken)) {
        lock.unlock();
        check_lanes();
        lock.lock();
      }
      state_ = State::running;
      take_returned();
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

  // Under mutex_: slots the host functions gave back become free, and the reads waiting for one
  // go back to the front of the backlog, in order.
  void take_returned() {
    returned_any_ = false;
    for (auto it = lanes_.rbegin(); it != lanes_.rend(); ++it) {
      Lane& lane = **it;
      lane.free.insert(lane.free.end(), lane.returned.begin(), lane.returned.end());
      lane.returned.clear();
      if (lane.free.empty() || lane.waiting.empty()) continue;
      waiting_ -= lane.waiting.size();
      backlog_.insert(backlog_.begin(), lane.waiting.begin(), lane.waiting.end());
      lane.waiting.clear();
    }
  }

  [[nodiscard]] bool copies_pending() const {
    return std::any_of(lanes_.begin(), lanes_.end(), [](const auto& l) { return !l->pending.empty(); });
  }

  void issue() {
    const std::size_t group =
        std::max<std::size_t>(1, (engine_->in_flight() + backlog_.size()) / 16);
    std::size_t unsent = 0;
    while (!backlog_.empty() && engine_->in_flight() < engine_->capacity()) {
      Request* r = backlog_.front();
      backlog_.pop_front();
      if (r->t.device && !take_slot(r)) continue;
      IoRequest q;
      q.op = r->t.op;
      q.fd = r->t.file.direct_fd();
      q.buf = r->slot != nullptr ? r->slot : r->t.buf + r->done;
      q.len = static_cast<std::uint32_t>(r->t.size - r->done);
      q.offset = r->t.offset + r->done;
      q.tag = reinterpret_cast<std::uintptr_t>(r);
      try {
        engine_->prepare(q);
      } catch (...) {
        give_slot(*r);
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

  // A device read's pinned slot. False when the read was parked (no free slot: it waits in its
  // lane) or handed on (a failed lane, or none could be made: the pool reads it, or says why).
  bool take_slot(Request* r) {
    if (r->slot != nullptr) return true;  // resubmitted after EINTR or EAGAIN
    if (r->lane == nullptr) {
      try {
        r->lane = &lane_for(r->t.device);
      } catch (...) {
        r->fail(std::current_exception());
        delete r;
        return false;
      }
    }
    Lane& lane = *r->lane;
    if (lane.broken) {
      finish_on_pool(std::unique_ptr<Request>(r), lane_failed);
      return false;
    }
    if (lane.free.empty()) {
      lane.waiting.push_back(r);
      ++waiting_;
      return false;
    }
    r->slot = lane.free.back();
    lane.free.pop_back();
    return true;
  }

  void give_slot(Request& r) {
    if (r.slot == nullptr) return;
    r.lane->free.push_back(r.slot);
    r.slot = nullptr;
  }

  Lane& lane_for(const std::shared_ptr<Device>& device) {
    for (auto& l : lanes_) {
      if (l->device == device) return *l;
    }
    auto lane = std::make_unique<Lane>();
    lane->device = device;
    lane->key = device_key(*device);
    lane->pinned = static_cast<std::byte*>(device->alloc_pinned(device_slots * device_slot_size));
    try {
      lane->stream = device->create_stream();
    } catch (...) {
      device->free_pinned(lane->pinned);
      throw;
    }
    for (std::size_t k = device_slots; k-- > 0;) lane->free.push_back(lane->pinned + k * device_slot_size);
    lanes_.push_back(std::move(lane));
    return *lanes_.back();
  }

  // With the thread idle: lanes whose device only the lane still holds go, with their memory.
  void release_idle_lanes(std::unique_lock<std::mutex>& lock) {
    std::vector<std::unique_ptr<Lane>> gone;
    for (auto it = lanes_.begin(); it != lanes_.end();) {
      Lane& l = **it;
      if (!l.broken && l.pending.empty() && l.free.size() == device_slots && l.device.use_count() == 1) {
        gone.push_back(std::move(*it));
        it = lanes_.erase(it);
      } else {
        ++it;
      }
    }
    if (gone.empty()) return;
    lock.unlock();  // a sim stream's worker may be finishing a host function that takes the lock
    for (auto& l : gone) {
      l->device->destroy_stream(l->stream);
      l->device->free_pinned(l->pinned);
    }
    lock.lock();
  }

  // Submits what is prepared and waits for a completion, unless callers queued more meanwhile.
  std::size_t wait() {
    bool block = false;
    {
      std::lock_guard lock(mutex_);
      // Reads waiting for slots that came back, and copies waiting for a host function that
      // may now be launched, go out at once rather than after a completion.
      block = incoming_.empty() && !(waiting_ > 0 && returned_any_) && !host_function_due();
      if (block && wakeable_) {
        state_ = State::in_kernel;
        starving_ = wants_host_functions();
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
      // (Their pinned slots stay out of use for the same reason.)
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
      if (r->slot != nullptr) {
        give_slot(*r);  // a device read goes to the pool whole
      } else if (c.result > 0) {
        r->done += static_cast<std::uint64_t>(c.result);
      }
      finish_on_pool(std::move(r));
      return;
    }
    if (r->slot != nullptr) {
      start_copy(std::move(r));
      return;
    }
    const std::uint64_t ns = now_ns() - r->start_ns;
    record(*r, r->t.size, ns);
    r->fulfill({r->t.size, Path::host, std::string(async_reason), static_cast<double>(ns) / 1e9, 1});
  }

  // A device read's bytes are in its slot: the copy to the destination goes on the lane's stream
  // now; the request waits in the lane for the batch's host function.
  void start_copy(std::unique_ptr<Request> r) {
    r->t.file.close();  // the copy needs no file (and a close must not happen on CUDA's thread)
    Lane& lane = *r->lane;
    try {
      lane.device->copy_to_device_async(r->t.buf, r->slot, r->t.size, lane.stream);
    } catch (...) {
      give_slot(*r);
      r->fail(std::current_exception());
      return;
    }
    lane.copying.push_back(r.release());
  }

  // A host function for the copies queued since the last, in each lane that has none outstanding.
  void start_host_functions() {
    for (auto& l : lanes_) {
      Lane& lane = *l;
      if (lane.copying.empty()) continue;
      CopyBatch* batch = nullptr;
      {
        const std::lock_guard lock(mutex_);
        if (!lane.pending.empty()) continue;  // its copies wait for the outstanding one
        batch = new CopyBatch;
        lane.pending.push_back(batch);
      }
      batch->io = this;
      batch->lane = &lane;
      batch->reqs.swap(lane.copying);
      try {
        lane.device->launch_host_func(lane.stream, &AsyncIo::copies_done, batch);
      } catch (...) {
        fail_lane(lane, std::current_exception());
      }
    }
  }

  void finish_batch(CopyBatch* batch) {
    if (batch->claimed.exchange(true)) return;  // the thread failed it (fail_lane)
    Lane& lane = *batch->lane;
    const std::uint64_t now = now_ns();
    std::vector<std::byte*> slots;
    slots.reserve(batch->reqs.size());
    for (Request* raw : batch->reqs) {
      const std::unique_ptr<Request> r(raw);
      const std::uint64_t ns = now - r->start_ns;
      record(*r, r->t.size, ns);
      slots.push_back(r->slot);
      r->fulfill({r->t.size, Path::bounce, std::move(r->t.reason), static_cast<double>(ns) / 1e9, 1});
    }
    IoEngine* wake = nullptr;
    {
      const std::lock_guard lock(mutex_);
      lane.returned.insert(lane.returned.end(), slots.begin(), slots.end());
      returned_any_ = true;
      std::erase(lane.pending, batch);
      if (starving_) wake = poke_locked();
    }
    finish_poke(wake);
    delete batch;
  }

  // An idle thread with copies pending for a while: a device that failed runs no more host
  // functions, and says so when its stream is synchronized.
  void check_lanes() {
    for (auto& l : lanes_) {
      {
        const std::lock_guard lock(mutex_);
        if (l->pending.empty()) continue;
      }
      try {
        l->device->synchronize(l->stream);
      } catch (...) {
        fail_lane(*l, std::current_exception());
      }
    }
  }

  // The device failed a lane's copies or host function: the requests of its unclaimed batches
  // get the error, and the lane is used no more (its later reads go to the pool, which reports
  // the device's error in context). Its slots are not reused: copies may still be reading them.
  void fail_lane(Lane& lane, const std::exception_ptr& error) {
    std::vector<CopyBatch*> mine;
    {
      const std::lock_guard lock(mutex_);
      for (CopyBatch* b : lane.pending) {
        if (!b->claimed.exchange(true)) mine.push_back(b);
      }
      for (CopyBatch* b : mine) std::erase(lane.pending, b);
    }
    lane.broken = true;
    waiting_ -= lane.waiting.size();  // to the pool (take_slot)
    backlog_.insert(backlog_.begin(), lane.waiting.begin(), lane.waiting.end());
    lane.waiting.clear();
    for (CopyBatch* b : mine) {
      for (Request* raw : b->reqs) {
        const std::unique_ptr<Request> r(raw);
        r->fail(error);
      }
      b->reqs.clear();  // the batch itself stays: a late host function still reads `claimed`
    }
    for (Request* raw : lane.copying) {  // queued on the failed stream, no host function yet
      const std::unique_ptr<Request> r(raw);
      r->fail(error);
    }
    lane.copying.clear();
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<Request*> incoming_;  // queued by callers
  State state_ = State::running;
  IoEngine* engine_ = nullptr;  // the thread's engine; changed only with nothing in flight
  bool wakeable_ = false;
  std::size_t wake_after_ = 1;
  bool woken_ = false;     // poked while idle
  bool starving_ = false;  // reads wait for slots or copies for a host function: wake us
  std::atomic<unsigned> wakers_{0};  // callers between deciding to wake the engine and waking it
  bool returned_any_ = false;  // host functions gave slots back since take_returned()

  // The thread's own.
  std::deque<Request*> backlog_;  // taken from incoming_, waiting for room in the ring
  Link in_ring_;                  // requests prepared in the ring, not yet completed
  std::vector<IoCompletion> completions_;
  std::size_t waiting_ = 0;  // reads waiting in lanes for a slot
  // Added and removed by the thread (removed under the mutex); each lane's `returned` and
  // `pending` are under the mutex.
  std::vector<std::unique_ptr<Lane>> lanes_;
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
  const std::uint64_t most = t.device ? std::min(cfg.io_size, device_slot_size) : cfg.io_size;
  if (t.device && t.op != IoOp::read) return false;
  if (t.size > most || std::max<std::uint64_t>(align, 4096) > most) return false;
  if (t.offset % align != 0 || t.size % align != 0 || t.offset > INT64_MAX - t.size) return false;
  // A device read lands in a pinned slot (4 KiB aligned), not in `buf`.
  const std::uintptr_t at = t.device ? 4096 : reinterpret_cast<std::uintptr_t>(t.buf);
  if (at % std::max<std::uint32_t>(f.mem_align(), 1) != 0) return false;
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
