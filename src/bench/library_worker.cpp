// Library threads: every transfer type but aligned cpu-only goes through the public transfer API,
// as an application would. `iodepth` transfers stay in flight per thread: as `iodepth`
// sub-workers each doing one transfer at a time (gpu-direct, cpu-gpu, cpu-async-gpu,
// cpu-cached-gpu, auto, unaligned or --via-library cpu-only), as `iodepth` streams with one
// stream-ordered transfer each (gpu-direct-async), or as batches of `iodepth` entries (gpu-batch).
#include <cerrno>
#include <cstdlib>
#include <deque>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "sluice/error.hpp"
#include "sluice/transfer.hpp"
#include "worker.hpp"

namespace sluice::bench::detail {
namespace {

// One block-sized buffer of the run's memory kind, plus a host mirror for pattern checks and
// for the cpu-cached-gpu staging copy.
class Buffer {
 public:
  Buffer(const ThreadJob& job, std::size_t size) : dev_(job.device) {
    const bool on_dev = job.memory == MemoryKind::device;
    if (on_dev) {
      device_ = DeviceBuffer(dev_, size);
    } else if (job.memory == MemoryKind::pinned_host && dev_) {
      pinned_ = PinnedBuffer(dev_, size);
    } else {
      host_ = host_alloc(size);
    }
    if (on_dev && job.w->xfer == XferType::cpu_cached_gpu) {
      pinned_ = PinnedBuffer(dev_, size);
    } else if (on_dev) {
      host_ = host_alloc(size);
    }
  }
  [[nodiscard]] void* data() const noexcept {
    if (on_device()) return device_.data();
    return pinned_.empty() ? host_.get() : pinned_.data();
  }
  [[nodiscard]] bool on_device() const noexcept { return !device_.empty(); }
  /// Host memory the bytes pass through (device buffers), or the buffer itself (host buffers).
  [[nodiscard]] std::byte* host() const noexcept {
    return static_cast<std::byte*>(pinned_.empty() ? host_.get() : pinned_.data());
  }
  void upload(std::size_t n) const {
    if (on_device()) dev_->copy_to_device(device_.data(), host(), n);
  }
  void download(std::size_t n) const {
    if (on_device()) dev_->copy_to_host(host(), device_.data(), n);
  }

 private:
  struct Free {
    void operator()(void* p) const noexcept { std::free(p); }
  };
  using HostMemory = std::unique_ptr<void, Free>;
  static HostMemory host_alloc(std::size_t size) {
    void* p = nullptr;
    if (posix_memalign(&p, 4096, std::max<std::size_t>(size, 4096)) != 0) {
      throw_os_error(ENOMEM, {.op = "bench"}, "cannot allocate a host buffer");
    }
    return HostMemory(p);
  }
  std::shared_ptr<Device> dev_;
  DeviceBuffer device_;  // the buffer, in device memory
  PinnedBuffer pinned_;  // the buffer in pinned memory, or the staging of cpu-cached-gpu
  HostMemory host_;      // the buffer in pageable memory, or the staging of a device buffer
};

std::unique_ptr<Buffer> make_buffer(const ThreadJob& job) {
  return std::make_unique<Buffer>(job, static_cast<std::size_t>(job.w->block_size));
}

TransferOptions options_for(const ThreadJob& job) {
  const Workload& w = *job.w;
  TransferOptions o;
  o.config = job.cfg;
  if (job.memory != MemoryKind::device) return o;  // host memory takes the host path
  o.device = job.device;
  switch (w.xfer) {
    case XferType::cpu_gpu: o.path = Path::posix; break;
    case XferType::cpu_async_gpu: o.path = Path::bounce; break;
    case XferType::gpu_direct:
    case XferType::gpu_direct_async:
    case XferType::gpu_batch:
      if (w.strict) o.path = Path::direct;
      break;
    default: break;
  }
  return o;
}

// Before the clock starts: the bytes a write will write.
void prepare_write(const ThreadJob& job, const Buffer& b, const OffsetGen::Op& op) {
  if (op.op != IoOp::write || !job.w->verify) return;
  fill_pattern(b.host(), op.offset, op.len, job.w->seed);
  b.upload(op.len);
}

// After the clock stops: checks read data and counts the transfer.
void finish(const ThreadJob& job, ThreadOutcome& out, const Buffer& b, const OffsetGen::Op& op,
            const TransferResult& r, std::uint64_t ns) {
  const ErrorContext ctx{.op = op.op == IoOp::read ? "read" : "write", .path = job.file->path(),
                         .offset = op.offset, .size = op.len, .has_range = true};
  if (r.bytes != op.len) {
    throw Error(ErrorDomain::data, EIO, ctx, fmt::format("short transfer: {} of {} bytes", r.bytes, op.len));
  }
  if (job.w->verify && op.op == IoOp::read) {
    b.download(op.len);
    if (auto bad = check_pattern(b.host(), op.offset, op.len, job.w->seed)) {
      throw Error(ErrorDomain::data, EIO, ctx, mismatch_message(*job.file, *bad, op.offset, job.w->seed));
    }
  }
  out.paths[{std::string(to_string(r.path)), r.reason}] += 1;
  out.count(job, op.op, op.len, ns);
}

// The host-side half of cpu-cached-gpu: a buffered transfer through the page cache into pinned
// memory, and the copy to or from the GPU.
TransferResult cached_transfer(const ThreadJob& job, const Buffer& b, const OffsetGen::Op& op,
                               const TransferOptions& buffered) {
  TransferResult r;
  if (op.op == IoOp::read) {
    r = sluice::read(*job.file, b.host(), op.len, op.offset, buffered);
    b.upload(r.bytes);
  } else {
    b.download(op.len);
    r = sluice::write(*job.file, b.host(), op.len, op.offset, buffered);
  }
  if (b.on_device()) {
    r.path = Path::posix;
    r.reason = "cpu-cached-gpu: page cache -> pinned host -> GPU (two copies); " + r.reason;
  }
  return r;
}

void run_sync_subworker(const ThreadJob& job, OffsetGen& gen, std::mutex& gen_mutex, ThreadOutcome& out) {
  Shared& shared = *job.shared;
  pin_thread(job.cpus);
  if (job.device) job.device->make_current();
  const auto buf = make_buffer(job);
  const TransferOptions opts = options_for(job);
  TransferOptions buffered;
  if (job.w->xfer == XferType::cpu_cached_gpu) {
    auto cfg = std::make_shared<Config>(*job.cfg);
    cfg->direct_io = false;
    buffered.config = std::move(cfg);
  }
  try {
    OffsetGen::Op op;
    while (!shared.stop.load(std::memory_order_relaxed)) {
      {
        std::lock_guard lock(gen_mutex);
        if (!gen.next(op)) break;
      }
      prepare_write(job, *buf, op);
      const std::uint64_t t0 = now_ns();
      TransferResult r;
      if (job.w->xfer == XferType::cpu_cached_gpu) {
        r = cached_transfer(job, *buf, op, buffered);
      } else if (op.op == IoOp::read) {
        r = sluice::read(*job.file, buf->data(), op.len, op.offset, opts);
      } else {
        r = sluice::write(*job.file, buf->data(), op.len, op.offset, opts);
      }
      const std::uint64_t t1 = now_ns();
      finish(job, out, *buf, op, r, t1 - t0);
      if (shared.past_deadline(t1)) shared.stop.store(true, std::memory_order_relaxed);
    }
  } catch (const std::exception& e) {
    shared.fail(e.what());
  }
}

void run_sync_thread(const ThreadJob& job, ThreadOutcome& out) {
  const Workload& w = *job.w;
  OffsetGen gen(job.region, w.block_size, w, w.seed + 0x9E37ULL * (job.index + 1));
  std::mutex gen_mutex;
  std::vector<ThreadOutcome> outs(w.iodepth);
  std::vector<std::thread> subs;
  subs.reserve(w.iodepth);
  for (unsigned i = 0; i < w.iodepth; ++i) {
    subs.emplace_back([&, i] { run_sync_subworker(job, gen, gen_mutex, outs[i]); });
  }
  for (auto& t : subs) t.join();
  for (const auto& o : outs) out.merge(o);
  out.issued = gen.issued();
}

struct InFlight {
  unsigned slot = 0;
  OffsetGen::Op op;
  std::uint64_t start_ns = 0;
  TransferFuture fut;
};

// gpu-direct-async: one stream per slot, the oldest transfer waited for first.
void run_stream_thread(const ThreadJob& job, ThreadOutcome& out) {
  const Workload& w = *job.w;
  Shared& shared = *job.shared;
  pin_thread(job.cpus);
  job.device->make_current();
  OffsetGen gen(job.region, w.block_size, w, w.seed + 0x9E37ULL * (job.index + 1));
  std::vector<std::unique_ptr<Buffer>> bufs;
  std::vector<Stream> streams;
  for (unsigned i = 0; i < w.iodepth; ++i) {
    bufs.push_back(make_buffer(job));
    streams.emplace_back(job.device);
  }
  const TransferOptions opts = options_for(job);
  std::deque<InFlight> q;
  std::vector<unsigned> free_slots;
  for (unsigned i = w.iodepth; i-- > 0;) free_slots.push_back(i);
  bool exhausted = false;
  try {
    for (;;) {
      while (!free_slots.empty() && !exhausted && !shared.stop.load(std::memory_order_relaxed)) {
        InFlight f;
        if (!gen.next(f.op)) {
          exhausted = true;
          break;
        }
        f.slot = free_slots.back();
        free_slots.pop_back();
        const Buffer& b = *bufs[f.slot];
        prepare_write(job, b, f.op);
        f.start_ns = now_ns();
        f.fut = f.op.op == IoOp::read
                    ? read_on_stream(*job.file, b.data(), f.op.len, f.op.offset, streams[f.slot], opts)
                    : write_on_stream(*job.file, b.data(), f.op.len, f.op.offset, streams[f.slot], opts);
        q.push_back(std::move(f));
      }
      if (q.empty()) break;
      InFlight f = std::move(q.front());
      q.pop_front();
      TransferResult r = f.fut.get();
      const std::uint64_t t = now_ns();
      finish(job, out, *bufs[f.slot], f.op, r, t - f.start_ns);
      free_slots.push_back(f.slot);
      if (shared.past_deadline(t)) shared.stop.store(true, std::memory_order_relaxed);
    }
  } catch (const std::exception& e) {
    shared.fail(e.what());
  }
  for (auto& f : q) f.fut.wait();
  for (const Stream& s : streams) s.synchronize();
  out.issued = gen.issued();
}

// gpu-batch: up to iodepth entries submitted at once; each entry's latency runs from the
// batch's submission to the moment its completion is collected (in order).
void run_batch_thread(const ThreadJob& job, ThreadOutcome& out) {
  const Workload& w = *job.w;
  Shared& shared = *job.shared;
  pin_thread(job.cpus);
  if (job.device) job.device->make_current();
  OffsetGen gen(job.region, w.block_size, w, w.seed + 0x9E37ULL * (job.index + 1));
  std::vector<std::unique_ptr<Buffer>> bufs;
  for (unsigned i = 0; i < w.iodepth; ++i) bufs.push_back(make_buffer(job));
  const TransferOptions opts = options_for(job);
  std::vector<OffsetGen::Op> ops;
  std::vector<BatchEntry> entries;
  std::vector<TransferFuture> futs;
  try {
    while (!shared.stop.load(std::memory_order_relaxed)) {
      ops.clear();
      entries.clear();
      OffsetGen::Op op;
      while (ops.size() < w.iodepth && gen.next(op)) {
        prepare_write(job, *bufs[ops.size()], op);
        entries.push_back({op.op, job.file, bufs[ops.size()]->data(), op.len, op.offset});
        ops.push_back(op);
      }
      if (ops.empty()) break;
      const std::uint64_t t0 = now_ns();
      futs = submit_batch(entries, opts);
      for (std::size_t i = 0; i < futs.size(); ++i) {
        TransferResult r = futs[i].get();
        finish(job, out, *bufs[i], ops[i], r, now_ns() - t0);
      }
      futs.clear();
      if (shared.past_deadline(now_ns())) shared.stop.store(true, std::memory_order_relaxed);
    }
  } catch (const std::exception& e) {
    shared.fail(e.what());
  }
  for (auto& f : futs) {
    if (f.valid()) f.wait();
  }
  out.issued = gen.issued();
}

}  // namespace

void run_library_thread(const ThreadJob& job, ThreadOutcome& out) {
  if (job.w->xfer == XferType::gpu_direct_async && job.device) {
    run_stream_thread(job, out);
  } else if (job.w->xfer == XferType::gpu_batch) {
    run_batch_thread(job, out);
  } else {
    run_sync_thread(job, out);
  }
}

}  // namespace sluice::bench::detail
