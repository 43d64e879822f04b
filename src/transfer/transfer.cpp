// The public transfer API: picks the path for each request (and says why), then hands it to
// the host, bounce, posix or direct implementation.
#include "sluice/transfer.hpp"

#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <exception>
#include <optional>

#include <fmt/format.h>

#include "../gpu/cufile_api.hpp"
#include "async_io.hpp"
#include "cufile.h"
#include "gpu_paths.hpp"
#include "host_path.hpp"
#include "sluice/error.hpp"
#include "sluice/page_cache.hpp"
#include "sluice/residency.hpp"
#include "sluice/stats.hpp"
#include "sluice/thread_pool.hpp"
#include "sluice/units.hpp"
#include "transfer_promise.hpp"

namespace sluice {
namespace {

std::shared_ptr<const Config> effective(const TransferOptions& o) {
  return o.config ? o.config : config();
}

void sync_file(const File& file, SyncMode mode, std::uint64_t offset, std::uint64_t size) {
  if (mode == SyncMode::none) return;
  const int err = sync_fd(file.fd(), mode == SyncMode::full);
  if (err != 0) {
    throw_os_error(err, {.op = "write", .path = file.path(), .offset = offset, .size = size,
                           .has_range = true},
                   mode == SyncMode::data ? "fdatasync failed" : "fsync failed");
  }
}

// The path the caller or the configuration forces, or nullopt for auto.
std::optional<Path> requested_path(const TransferOptions& o, const Config& cfg) {
  return o.path ? o.path : forced_path(cfg.path);
}

// Why the direct path cannot serve this request, or nullopt when it can (before registration).
struct Obstacle {
  Fallback kind;
  std::string why;
};
std::optional<Obstacle> direct_obstacle(const File& file, const void* buf, std::uint64_t size,
                                        std::uint64_t offset) {
  auto& cufile = detail::CuFile::instance();
  if (!cufile.available()) return Obstacle{Fallback::no_cufile, cufile.reason()};
  if (!file.has_direct()) return Obstacle{Fallback::no_o_direct, file.direct_reason()};
  if (reinterpret_cast<std::uintptr_t>(buf) % 4096 != 0) {
    return Obstacle{Fallback::buffer_unaligned, "buffer not 4 KiB aligned"};
  }
  if (offset % 4096 != 0) return Obstacle{Fallback::offset_unaligned, "file offset not 4 KiB aligned"};
  if (size % 4096 != 0) return Obstacle{Fallback::size_unaligned, "size not a multiple of 4 KiB"};
  return std::nullopt;
}

// Why auto should not take GPUDirect, which always reads the device, for a read: cache_policy
// use says to read through the page cache. Under auto a read the cache holds still goes direct:
// storage behind GDS is typically as fast as a copy out of the cache and through pinned memory,
// and a real GPU to measure that on decides otherwise (docs/paths.md).
std::optional<std::string> cache_obstacle(IoOp op, const Config& cfg) {
  if (op == IoOp::read && cfg.cache_policy == CachePolicy::use) return "cache_policy use: through the page cache";
  return std::nullopt;
}

struct Choice {
  Path path;
  bool strict;                 ///< the path was requested: no fallback
  std::string auto_why = {};   ///< under auto, why not direct ("" when auto took direct)
  std::optional<Fallback> fallback = std::nullopt;  ///< auto fell back from direct, and why

  /// "requested", "auto" or "auto: <why>" (choose_path reports it; empty for host memory).
  [[nodiscard]] std::string reason() const {
    if (path == Path::host) return {};
    if (strict) return "requested";
    return auto_why.empty() ? "auto" : "auto: " + auto_why;
  }
};

Choice choose(IoOp op, const File& file, const void* buf, std::uint64_t size, std::uint64_t offset,
              const TransferOptions& o, const Config& cfg) {
  // Made only for an error: its path is a string, which every call would otherwise copy.
  const auto ctx = [&] {
    return ErrorContext{.op = op == IoOp::read ? "read" : "write", .path = file.path(), .offset = offset, .size = size, .has_range = true};
  };
  const std::optional<Path> requested = requested_path(o, cfg);
  const bool strict = requested.has_value();
  const Path want = requested.value_or(Path::direct);  // auto tries direct first
  const MemoryKind kind = o.device ? o.device->pointer_kind(buf) : MemoryKind::pageable_host;
  if (kind != MemoryKind::device) {
    if (strict && want != Path::host) {
      throw_usage_error(ctx(), fmt::format("path {} moves data to GPU memory, but the buffer is {} memory",
                                         to_string(want), to_string(kind)));
    }
    return {Path::host, strict};
  }
  if (want == Path::host) throw_usage_error(ctx(), "path host needs host memory, but the buffer is device memory");
  if (want == Path::bounce || want == Path::posix) return {want, true};
  const auto obstacle = direct_obstacle(file, buf, size, offset);
  if (!obstacle) {
    if (strict) return {Path::direct, true};
    if (auto why = cache_obstacle(op, cfg)) return {Path::bounce, false, *why};
    return {Path::direct, false};
  }
  if (strict) {
    throw Error(ErrorDomain::cufile, CU_FILE_IO_NOT_SUPPORTED, ctx(), fmt::format("path direct unavailable: {}", obstacle->why));
  }
  return {Path::bounce, false, "direct unavailable: " + obstacle->why, obstacle->kind};
}

TransferResult run_chosen(IoOp op, const File& file, std::byte* buf, std::uint64_t size,
                          std::uint64_t offset, const TransferOptions& o, const Config& cfg,
                          const Choice& c, std::chrono::steady_clock::time_point t0,
                          std::uint64_t* timed_ns) {
  if (c.path == Path::host) {
    return op == IoOp::read ? detail::host_read(file, buf, size, offset, cfg, t0, timed_ns)
                            : detail::host_write(file, buf, size, offset, cfg);
  }
  // GPU paths: the same checks and EOF clamping as the host path.
  const std::uint64_t n = detail::validate_request(op, file, buf, size, offset);
  if (n == 0) return {0, c.path, op == IoOp::read ? "end of file" : "nothing to write", 0, 0};
  const std::shared_ptr<Device>& dev = o.device;
  if (c.fallback) stats().count_fallback(*c.fallback);
  auto tag = [&](TransferResult r) {
    if (!c.strict) r.reason = c.auto_why.empty() ? "auto: " + r.reason : c.reason() + "; " + r.reason;
    return r;
  };
  switch (c.path) {
    case Path::posix: return tag(detail::posix_transfer(op, file, buf, n, offset, dev, cfg));
    case Path::bounce: return tag(detail::bounce_transfer(op, file, buf, n, offset, dev, cfg));
    case Path::direct: {
      detail::DirectRefusal refusal;
      if (auto r = detail::direct_transfer(op, file, buf, n, offset, cfg, &refusal)) {
        return tag(std::move(*r));
      }
      if (c.strict) {
        throw Error(ErrorDomain::cufile, refusal.code != 0 ? refusal.code : CU_FILE_IO_NOT_SUPPORTED,
                    {.op = op == IoOp::read ? "read" : "write", .path = file.path(), .offset = offset,
                     .size = n, .has_range = true},
                    "path direct unavailable: " + refusal.why);
      }
      stats().count_fallback(refusal.kind);
      TransferResult r = detail::bounce_transfer(op, file, buf, n, offset, dev, cfg);
      r.reason = "auto: direct unavailable: " + refusal.why + "; " + r.reason;
      return r;
    }
    case Path::host:
    case Path::mapped: break;  // never chosen for a transfer
  }
  return {};
}

// "host" for host memory, else the device's spec ("sim", "cuda:N"), for the per-device counters.
std::string_view device_key(const Choice& c, const TransferOptions& o, std::array<char, 24>& buf) {
  if (c.path == Path::host || !o.device) return "host";
  const DeviceInfo& info = o.device->info();
  if (info.kind != DeviceKind::cuda) return to_string(info.kind);
  const auto end = fmt::format_to_n(buf.data(), buf.size(), "cuda:{}", info.ordinal).out;
  return {buf.data(), static_cast<std::size_t>(end - buf.data())};
}

TransferResult run(IoOp op, const File& file, std::byte* buf, std::uint64_t size, std::uint64_t offset,
                   const TransferOptions& o) {
  auto cfg = effective(o);
  const Choice c = choose(op, file, buf, size, offset, o, *cfg);
  const auto t0 = std::chrono::steady_clock::now();
  std::array<char, 24> key_buf{};
  auto record = [&](std::uint64_t bytes, std::uint64_t ios, bool error, std::uint64_t ns) {
    stats().record_target(device_key(c, o, key_buf), file.fs_type(),
                          op == IoOp::read ? Direction::read : Direction::write, bytes, ios, ns,
                          error);
  };
  auto since_t0 = [&t0] {
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                          std::chrono::steady_clock::now() - t0)
                                          .count());
  };
  try {
    // A small host read times itself from t0 (host_read's `started`): the same time, without a
    // second clock read per call.
    std::uint64_t timed_ns = 0;
    TransferResult r = run_chosen(op, file, buf, size, offset, o, *cfg, c, t0, &timed_ns);
    record(r.bytes, r.ios, false, timed_ns != 0 ? timed_ns : since_t0());
    return r;
  } catch (...) {
    record(0, 0, true, since_t0());
    throw;
  }
}

}  // namespace

TransferResult read(const File& file, void* buf, std::uint64_t size, std::uint64_t offset,
                    const TransferOptions& options) {
  return run(IoOp::read, file, static_cast<std::byte*>(buf), size, offset, options);
}

TransferResult write(const File& file, const void* buf, std::uint64_t size, std::uint64_t offset,
                     const TransferOptions& options) {
  // The executor never writes through the pointer for writes; the cast only shares one code path.
  TransferResult r = run(IoOp::write, file, static_cast<std::byte*>(const_cast<void*>(buf)), size, offset, options);
  sync_file(file, options.sync, offset, size);
  return r;
}

namespace {

// What the host path would do with a read of this range.
std::string host_choice(const File& file, std::uint64_t size, std::uint64_t offset, const Config& cfg) {
  if (!cfg.direct_io) return "buffered: direct I/O disabled by configuration";
  if (!file.has_direct()) return "buffered: " + file.direct_reason();
  if (cfg.cache_policy == CachePolicy::use) return "buffered: cache_policy use";
  if (cfg.cache_policy == CachePolicy::bypass) return "O_DIRECT";
  const std::uint64_t file_size = file.size();
  if (offset >= file_size || size == 0) return "O_DIRECT";
  const Residency r = page_cache_residency(file.fd(), offset, std::min(size, file_size - offset));
  const std::uint64_t pct = r.cached * 100 / std::max<std::uint64_t>(r.pages, 1);
  if (r.cached == r.pages) return "page cache holds 100% of the range: buffered";
  if (r.cached == 0) return "page cache holds 0% of the range: O_DIRECT";
  return fmt::format("page cache holds {}% of the range: chunks it holds buffered, the rest O_DIRECT", pct);
}

}  // namespace

PathChoice choose_path(const File& file, const void* buf, std::uint64_t size, std::uint64_t offset,
                       const TransferOptions& options) {
  auto cfg = effective(options);
  Choice c = choose(IoOp::read, file, buf, size, offset, options, *cfg);
  if (c.path == Path::host) return {c.path, "host memory: " + host_choice(file, size, offset, *cfg)};
  return {c.path, c.reason()};
}

namespace {

// Whether a transfer can go to the async I/O thread (async_io.hpp): the host path, or a read on
// the bounce path (through a pinned slot); one O_DIRECT request. A path choice that throws says
// no: the pool then reports the error through the future.
bool async_fits(IoOp op, const File& file, const void* buf, std::uint64_t size,
                std::uint64_t offset, const TransferOptions& o, detail::AsyncTransfer* t) {
  if (!file.is_open()) return false;
  try {
    const auto cfg = effective(o);
    const Choice c = choose(op, file, buf, size, offset, o, *cfg);
    const bool bounce = c.path == Path::bounce && op == IoOp::read;
    if (c.path != Path::host && !bounce) return false;
    *t = {op, file, static_cast<std::byte*>(const_cast<void*>(buf)), size, offset};
    if (bounce) {
      t->device = o.device;
      static const std::string how =
          fmt::format("O_DIRECT; async I/O thread, a pinned slot of {}", format_size(detail::device_slot_size));
      t->reason = c.strict ? how : c.reason() + "; " + how;
    }
    if (!detail::async_eligible(*t, *cfg, o.sync)) return false;
    // The async thread reads O_DIRECT only. cache_policy use reads buffered; auto reads what the
    // page cache holds through it (one residency probe, as the synchronous path makes), so a
    // read of cached pages goes to the pool, which does that.
    bool fits = op != IoOp::read || cfg->cache_policy == CachePolicy::bypass;
    if (!fits && cfg->cache_policy == CachePolicy::automatic) {
      fits = page_cache_residency(file.fd(), offset, size).cached == 0;
    }
    if (fits && c.fallback) stats().count_fallback(*c.fallback);  // as run_chosen counts it
    return fits;
  } catch (const std::exception&) {
    return false;
  }
}

// The work holds its own handle on the file (a copy), so the caller's may go at once. It lets go
// of it before the future is ready (a local of the task, gone when it returns or throws): the
// caller's handle may already be gone, and once the future is ready the caller may close the
// library, or the process may exit and take the libraries' statics with it, while a pool thread
// would still be closing the file (deregistering it from cuFile; ASan caught that at exit).
TransferFuture on_pool(IoOp op, const File& file, const void* buf, std::uint64_t size,
                       std::uint64_t offset, const TransferOptions& options) {
  auto promise = std::make_shared<detail::TransferPromise>();
  TransferFuture fut = promise->get_future();
  default_pool().post([promise, op, file = File(file), buf, size, offset, options]() mutable {
    std::optional<TransferResult> result;
    std::exception_ptr error;
    {
      const File held = std::exchange(file, File());  // gone before the future is ready
      try {
        result = op == IoOp::read ? read(held, const_cast<void*>(buf), size, offset, options)
                                  : write(held, buf, size, offset, options);
      } catch (...) {
        error = std::current_exception();
      }
    }
    if (error) {
      promise->set_exception(std::move(error));
    } else {
      promise->set_value(std::move(*result));
    }
  });
  return fut;
}

TransferFuture start_async(IoOp op, const File& file, const void* buf, std::uint64_t size,
                           std::uint64_t offset, const TransferOptions& options) {
  detail::AsyncTransfer t;
  if (!async_fits(op, file, buf, size, offset, options, &t))
    return on_pool(op, file, buf, size, offset, options);
  std::vector<TransferFuture> out;
  detail::submit_async({&t, 1}, options, out);
  return std::move(out.front());
}

}  // namespace

TransferFuture read_async(const File& file, void* buf, std::uint64_t size, std::uint64_t offset,
                          TransferOptions options) {
  return start_async(IoOp::read, file, buf, size, offset, options);
}

TransferFuture write_async(const File& file, const void* buf, std::uint64_t size,
                           std::uint64_t offset, TransferOptions options) {
  return start_async(IoOp::write, file, buf, size, offset, options);
}

namespace {

// One stream-ordered call. A host function on the caller's stream only hands the work to the
// pool (CUDA forbids host functions that call the device or wait for device work), and the stream
// is held behind a gate the device polls (cuStreamWaitValue32), opened when the work is done.
// Where the driver has no stream memory operations, a second host function holds the stream
// instead, saying so in the result's reason.
//
// The result is delivered when both the work has finished and the caller has finished
// enqueueing (`pending` counts them down), so the reason names how the stream was really held.
struct StreamTask {
  std::function<TransferResult()> work;
  StreamGate gate;
  detail::TransferPromise promise;
  std::promise<void> work_done;  // for the host function that holds the stream in the fallback
  std::shared_future<void> work_done_future = work_done.get_future().share();
  std::optional<TransferResult> result;
  std::exception_ptr error;
  std::string held_by;  // written by the caller before its countdown
  std::atomic<int> pending{2};

  void count_down() {
    if (pending.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    if (error) {
      promise.set_exception(error);
    } else {
      result->reason += fmt::format("; stream held by {}", held_by);
      promise.set_value(std::move(*result));
    }
  }
};

using TaskRef = std::shared_ptr<StreamTask>;

// Host function: returns at once.
void start_stream_task(void* arg) {
  const std::unique_ptr<TaskRef> ref(static_cast<TaskRef*>(arg));
  default_pool().post([task = *ref] {
    try {
      task->result = task->work();
    } catch (...) {
      task->error = std::current_exception();
    }
    task->work = nullptr;  // its file handle goes before anyone sees the result (see on_pool)
    task->gate.open();
    task->work_done.set_value();
    task->count_down();
  });
}

// Host function of the fallback: blocks the stream (and this driver's host-function thread)
// until the work is done.
void hold_stream_until_done(void* arg) {
  const std::unique_ptr<TaskRef> ref(static_cast<TaskRef*>(arg));
  (*ref)->work_done_future.wait();
}

void launch(Device& device, StreamHandle stream, void (*fn)(void*), const TaskRef& task) {
  auto ref = std::make_unique<TaskRef>(task);
  device.launch_host_func(stream, fn, ref.get());
  (void)ref.release();  // the host function owns it from here on
}

}  // namespace

TransferFuture run_on_stream(const std::shared_ptr<Device>& device, StreamHandle stream,
                             std::function<TransferResult()> work) {
  if (!device) throw_usage_error({.op = "stream transfer"}, "a stream-ordered transfer needs a device (options.device)");
  auto task = std::make_shared<StreamTask>();
  task->work = std::move(work);
  auto fut = task->promise.get_future();

  std::string no_gate;
  try {
    task->gate = device->make_gate();
  } catch (const Error& e) {
    no_gate = e.what();
  }
  launch(*device, stream, &start_stream_task, task);
  // From here on the work may run (and finish) at any moment; only the gate's index and target,
  // fixed at make_gate, are read.
  if (no_gate.empty()) {
    try {
      device->wait_gate(stream, task->gate);
      task->held_by = "a device-side wait on a pinned flag";
    } catch (const Error& e) {
      no_gate = e.what();
    }
  }
  if (!no_gate.empty()) {
    launch(*device, stream, &hold_stream_until_done, task);
    task->held_by = fmt::format("a waiting host function ({})", no_gate);
  }
  task->count_down();
  return fut;
}

TransferFuture read_on_stream(const File& file, void* buf, std::uint64_t size, std::uint64_t offset,
                              StreamHandle stream, TransferOptions options) {
  return run_on_stream(options.device, stream, [file, buf, size, offset, options] {
    return read(file, buf, size, offset, options);
  });
}

TransferFuture write_on_stream(const File& file, const void* buf, std::uint64_t size,
                               std::uint64_t offset, StreamHandle stream, TransferOptions options) {
  return run_on_stream(options.device, stream, [file, buf, size, offset, options] {
    return write(file, buf, size, offset, options);
  });
}

namespace {

// A Stream's device is the transfer's: fill it in, or refuse a different one.
TransferOptions on_device_of(const Stream& stream, TransferOptions options, const char* op) {
  if (!stream) throw_usage_error({.op = op}, "an empty Stream");
  if (!options.device) {
    options.device = stream.device();
  } else if (options.device != stream.device()) {
    throw_usage_error({.op = op}, "options.device is not the device of the stream");
  }
  return options;
}

}  // namespace

TransferFuture read_on_stream(const File& file, void* buf, std::uint64_t size, std::uint64_t offset,
                              const Stream& stream, TransferOptions options) {
  return read_on_stream(file, buf, size, offset, stream.get(),
                        on_device_of(stream, std::move(options), "read"));
}

TransferFuture write_on_stream(const File& file, const void* buf, std::uint64_t size,
                               std::uint64_t offset, const Stream& stream,
                               TransferOptions options) {
  return write_on_stream(file, buf, size, offset, stream.get(),
                         on_device_of(stream, std::move(options), "write"));
}

std::vector<TransferFuture> submit_batch(std::span<const BatchEntry> entries,
                                         const TransferOptions& options) {
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].file == nullptr) {
      throw_usage_error({.op = "batch"}, fmt::format("entry {} has no file", i));
    }
  }
  // Entries the async I/O thread takes go to it together: one lock, at most one wake-up.
  std::vector<TransferFuture> out(entries.size());
  std::vector<detail::AsyncTransfer> fast;
  std::vector<std::size_t> fast_at;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const BatchEntry& e = entries[i];
    detail::AsyncTransfer t;
    if (async_fits(e.op, *e.file, e.buf, e.size, e.offset, options, &t)) {
      fast.push_back(std::move(t));
      fast_at.push_back(i);
    } else {
      out[i] = on_pool(e.op, *e.file, e.buf, e.size, e.offset, options);
    }
  }
  if (fast.empty()) return out;
  std::vector<TransferFuture> queued;
  queued.reserve(fast.size());
  detail::submit_async(fast, options, queued);
  for (std::size_t k = 0; k < fast.size(); ++k) out[fast_at[k]] = std::move(queued[k]);
  return out;
}

}  // namespace sluice
