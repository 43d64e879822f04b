#include "sim_device.hpp"

#include <sys/prctl.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <future>
#include <new>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "core/cuda_codes.hpp"
#include "sluice/error.hpp"
#include "sluice/host_memory.hpp"
#include "sluice/units.hpp"

namespace sluice::detail {

using Clock = std::chrono::steady_clock;

// One copy engine per direction, modelled on a timeline: a copy starts when it was enqueued, its
// stream's previous work finished and the engine finished its previous copy, whichever is last,
// and takes latency + bytes / bandwidth. The times are the model's, not the moments the host
// threads happened to wake: a real DMA engine runs queued copies back to back, whereas timing
// each copy from its thread's wake-up lost ~10% of the modelled bandwidth to sleep overshoot
// (4 MiB copies at 3 GB/s delivered 2.68).
struct SimDevice::Engine {
  std::mutex busy;
  Clock::time_point free_at{};  // under busy: when the engine's last copy ends
};

struct SimDevice::Stream {
  explicit Stream() : worker([this] { run(); }) {}
  ~Stream() {
    {
      std::lock_guard lock(mutex);
      stopping = true;
    }
    cv.notify_all();
    worker.join();
  }

  void push(std::function<void()> op) {
    {
      std::lock_guard lock(mutex);
      ops.push_back(std::move(op));
      ++enqueued;
    }
    cv.notify_all();
  }

  void wait_for(std::uint64_t target) {
    std::unique_lock lock(mutex);
    done_cv.wait(lock, [&] { return completed >= target; });
  }

  void run() {
    // A copy ends at its modelled time, not 50 us later: Linux lets a sleeping thread's timer fire
    // up to its timer slack late (50 us by default), which made a lone 10 us copy take 60 us or
    // more. 1 us here: 4 KiB reads into the sim at 32 in flight went from 35K to 48K a second.
    (void)prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
    for (;;) {
      std::function<void()> op;
      {
        std::unique_lock lock(mutex);
        cv.wait(lock, [this] { return stopping || !ops.empty(); });
        if (ops.empty()) return;
        op = std::move(ops.front());
        ops.pop_front();
      }
      op();
      // When the next op may start: a copy's modelled end, or now for anything else.
      ready_at = modelled_end.value_or(Clock::now());
      modelled_end.reset();
      {
        std::lock_guard lock(mutex);
        ++completed;
      }
      done_cv.notify_all();
    }
  }

  std::mutex mutex;
  std::condition_variable cv;       // work arrived
  std::condition_variable done_cv;  // work completed
  std::deque<std::function<void()>> ops;
  std::uint64_t enqueued = 0;
  std::uint64_t completed = 0;
  bool stopping = false;
  // Touched only by the worker thread, inside run() and the ops it runs.
  Clock::time_point ready_at{};                  // the previous op's (modelled) end
  std::optional<Clock::time_point> modelled_end;  // set by a copy op
  std::thread worker;  // last: starts after the members it uses exist
};

// The device-wide host-function thread: a stream hands it fn and waits until fn has returned.
struct SimDevice::Callbacks {
  Callbacks() : worker([this] { run(); }) {}
  ~Callbacks() {
    {
      std::lock_guard lock(mutex);
      stopping = true;
    }
    cv.notify_all();
    worker.join();
  }

  void run_and_wait(void (*fn)(void*), void* arg) {
    std::promise<void> done;
    auto finished = done.get_future();
    {
      std::lock_guard lock(mutex);
      queue.emplace_back([fn, arg, &done] {
        fn(arg);
        done.set_value();
      });
    }
    cv.notify_all();
    finished.wait();
  }

  void run() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock lock(mutex);
        cv.wait(lock, [this] { return stopping || !queue.empty(); });
        if (queue.empty()) return;
        job = std::move(queue.front());
        queue.pop_front();
      }
      job();
    }
  }

  std::mutex mutex;
  std::condition_variable cv;
  std::deque<std::function<void()>> queue;
  bool stopping = false;
  std::thread worker;  // last: starts after the members it uses exist
};

namespace {

struct SimEvent {
  SimDevice::Stream* stream = nullptr;
  std::uint64_t target = 0;
};

}  // namespace

SimDevice::SimDevice(SimModel model) : model_(model) {
  info_.kind = DeviceKind::sim;
  info_.ordinal = 0;
  info_.name = model_.gbps > 0
                   ? fmt::format("sim ({:g} GB/s per direction, {:g} us per copy)", model_.gbps, model_.latency_us)
                   : fmt::format("sim (unlimited bandwidth, {:g} us per copy)", model_.latency_us);
  info_.total_memory = 0;
  engines_[0] = std::make_unique<Engine>();
  engines_[1] = std::make_unique<Engine>();
  callbacks_ = std::make_unique<Callbacks>();
  default_stream_ = std::make_unique<Stream>();
}

SimDevice::~SimDevice() {
  default_stream_.reset();
  callbacks_.reset();
  for (auto& [start, range] : ranges_) {
    if (range.owned) unmap_host_memory(reinterpret_cast<void*>(start), range.size);
  }
}

// Device and pinned memory come populated (and on huge pages where possible), as cuMemAlloc and
// cuMemHostAlloc memory does: page faults on first touch would otherwise land inside the
// modelled copies and the O_DIRECT reads.
void* SimDevice::allocate(std::size_t bytes, MemoryKind kind) {
  void* p = nullptr;
  try {
    p = map_host_memory(bytes);
  } catch (const Error& e) {
    throw Error(ErrorDomain::cuda, detail::cu::error_out_of_memory, {.op = kind == MemoryKind::device ? "sim alloc" : "sim alloc_pinned"},
                fmt::format("out of memory allocating {} bytes: {}", bytes, e.what()));
  }
  std::lock_guard lock(mutex_);
  ranges_[reinterpret_cast<std::uintptr_t>(p)] = {bytes, kind};
  return p;
}

void SimDevice::release(void* p, MemoryKind kind) noexcept {
  if (p == nullptr) return;
  std::lock_guard lock(mutex_);
  auto it = ranges_.find(reinterpret_cast<std::uintptr_t>(p));
  if (it == ranges_.end() || it->second.kind != kind || !it->second.owned) return;  // not ours
  unmap_host_memory(p, it->second.size);
  ranges_.erase(it);
}

void* SimDevice::alloc(std::size_t bytes) { return allocate(bytes, MemoryKind::device); }
void SimDevice::free(void* p) noexcept { release(p, MemoryKind::device); }
void* SimDevice::alloc_pinned(std::size_t bytes) { return allocate(bytes, MemoryKind::pinned_host); }
void SimDevice::free_pinned(void* p) noexcept { release(p, MemoryKind::pinned_host); }

void SimDevice::register_host(void* p, std::size_t bytes) {
  std::lock_guard lock(mutex_);
  ranges_[reinterpret_cast<std::uintptr_t>(p)] = {bytes, MemoryKind::pinned_host, false};
}

void SimDevice::unregister_host(void* p) noexcept {
  std::lock_guard lock(mutex_);
  ranges_.erase(reinterpret_cast<std::uintptr_t>(p));  // memory belongs to the caller
}

MemoryKind SimDevice::pointer_kind(const void* p) const {
  const auto addr = reinterpret_cast<std::uintptr_t>(p);
  std::lock_guard lock(mutex_);
  auto it = ranges_.upper_bound(addr);
  if (it == ranges_.begin()) return MemoryKind::pageable_host;
  --it;
  if (addr < it->first + std::max<std::size_t>(it->second.size, 1)) return it->second.kind;
  return MemoryKind::pageable_host;
}

std::size_t SimDevice::device_bytes() const {
  std::lock_guard lock(mutex_);
  std::size_t n = 0;
  for (const auto& [start, r] : ranges_) n += r.kind == MemoryKind::device ? r.size : 0;
  return n;
}

std::size_t SimDevice::pinned_bytes() const {
  std::lock_guard lock(mutex_);
  std::size_t n = 0;
  for (const auto& [start, r] : ranges_) n += r.kind == MemoryKind::pinned_host ? r.size : 0;
  return n;
}

void SimDevice::check_device_range(const void* p, std::size_t bytes, const char* op) const {
  const auto addr = reinterpret_cast<std::uintptr_t>(p);
  std::lock_guard lock(mutex_);
  auto it = ranges_.upper_bound(addr);
  if (it != ranges_.begin()) {
    --it;
    if (it->second.kind == MemoryKind::device && addr + bytes <= it->first + it->second.size) return;
  }
  throw Error(ErrorDomain::cuda, detail::cu::error_invalid_value, {.op = op},
              fmt::format("{} bytes at {} are not inside one device allocation", bytes, p));
}

SimDevice::Stream& SimDevice::stream_of(StreamHandle s) {
  return s == nullptr ? *default_stream_ : *static_cast<Stream*>(s);
}

StreamHandle SimDevice::create_stream() { return new Stream(); }

void SimDevice::destroy_stream(StreamHandle s) noexcept {
  delete static_cast<Stream*>(s);  // the destructor runs what is queued, then joins
}

// Runs on `stream`'s worker thread (see Engine for the timeline).
void SimDevice::modelled_copy(Engine& engine, Stream& stream, Clock::time_point enqueued, void* dst,
                              const void* src, std::size_t n) const {
  std::lock_guard lock(engine.busy);
  const Clock::time_point start = std::max({enqueued, stream.ready_at, engine.free_at});
  std::memcpy(dst, src, n);
  double ns = model_.latency_us * 1e3;
  if (model_.gbps > 0) ns += static_cast<double>(n) / model_.gbps;  // GB/s == bytes per ns
  const Clock::time_point end = start + std::chrono::nanoseconds(static_cast<std::int64_t>(ns));
  engine.free_at = end;
  stream.modelled_end = end;
  std::this_thread::sleep_until(end);
}

void SimDevice::copy_to_device_async(void* dst, const void* src, std::size_t bytes, StreamHandle s) {
  check_device_range(dst, bytes, "sim copy_to_device");
  Stream& st = stream_of(s);
  st.push([this, &st, t = Clock::now(), dst, src, bytes] { modelled_copy(*engines_[0], st, t, dst, src, bytes); });
}

void SimDevice::copy_to_host_async(void* dst, const void* src, std::size_t bytes, StreamHandle s) {
  check_device_range(src, bytes, "sim copy_to_host");
  Stream& st = stream_of(s);
  st.push([this, &st, t = Clock::now(), dst, src, bytes] { modelled_copy(*engines_[1], st, t, dst, src, bytes); });
}

void SimDevice::launch_host_func(StreamHandle s, void (*fn)(void*), void* arg) {
  stream_of(s).push([this, fn, arg] { callbacks_->run_and_wait(fn, arg); });
}

StreamGate SimDevice::make_gate() {
  std::shared_ptr<GateSlots> slots;
  {
    std::lock_guard lock(mutex_);
    if (!gates_) {
      // Plain memory: the sim's streams are host threads, which wait on the slots' condition.
      gates_ = std::make_shared<GateSlots>(
          [](std::size_t bytes) {
            return GateSlots::Page{static_cast<std::uint32_t*>(::operator new(bytes, std::align_val_t{64})),
                                   0};
          },
          [](const GateSlots::Page& page) { ::operator delete(page.host, std::align_val_t{64}); });
    }
    slots = gates_;
  }
  return claim_gate(std::move(slots));
}

void SimDevice::wait_gate(StreamHandle s, const StreamGate& gate) {
  std::shared_ptr<GateSlots> slots;
  {
    std::lock_guard lock(mutex_);
    slots = gates_;
  }
  if (!slots) {
    throw_usage_error({.op = "sim wait_gate"}, "the gate was not made by this device");
  }
  stream_of(s).push([slots, index = gate.index(), target = gate.target()] { slots->wait(index, target); });
}

void SimDevice::synchronize(StreamHandle s) {
  Stream& st = stream_of(s);
  std::uint64_t target = 0;
  {
    std::lock_guard lock(st.mutex);
    target = st.enqueued;
  }
  st.wait_for(target);
}

EventHandle SimDevice::create_event() { return new SimEvent(); }
void SimDevice::destroy_event(EventHandle e) noexcept { delete static_cast<SimEvent*>(e); }

void SimDevice::record_event(EventHandle e, StreamHandle s) {
  auto* ev = static_cast<SimEvent*>(e);
  Stream& st = stream_of(s);
  std::lock_guard lock(st.mutex);
  ev->stream = &st;
  ev->target = st.enqueued;
}

bool SimDevice::event_done(EventHandle e) {
  auto* ev = static_cast<SimEvent*>(e);
  if (ev->stream == nullptr) return true;
  std::lock_guard lock(ev->stream->mutex);
  return ev->stream->completed >= ev->target;
}

void SimDevice::wait_event(EventHandle e) {
  auto* ev = static_cast<SimEvent*>(e);
  if (ev->stream != nullptr) ev->stream->wait_for(ev->target);
}

}  // namespace sluice::detail
