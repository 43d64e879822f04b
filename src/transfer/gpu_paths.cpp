#include "gpu_paths.hpp"

#include <sys/types.h>

#include <cerrno>
#include <chrono>
#include <map>
#include <optional>
#include <mutex>
#include <vector>

#include <fmt/format.h>

#include "../gpu/cufile_api.hpp"
#include "chunk_layout.hpp"
#include "pipeline.hpp"
#include "sluice/error.hpp"
#include "sluice/internal/cufile_errors.hpp"
#include "sluice/io_engine.hpp"
#include "sluice/stats.hpp"
#include "sluice/units.hpp"

namespace sluice::detail {
namespace {

using Clock = std::chrono::steady_clock;

std::uint64_t since_ns(Clock::time_point t0) {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
}

Direction direction(IoOp op) { return op == IoOp::read ? Direction::read : Direction::write; }

ErrorContext range_context(IoOp op, const File& file, std::uint64_t offset, std::uint64_t size) {
  return {.op = op == IoOp::read ? "read" : "write", .path = file.path(), .offset = offset,
          .size = size, .has_range = true};
}

// Moves [at, at + n) between the file and `host` with the calling thread's psync engine (plain
// pread/pwrite, one request at a time), so that FaultyEngine and SLUICE_FAULTS reach the posix
// path as they reach the others. The pipeline's rules: a short transfer is continued, EINTR and
// EAGAIN are resubmitted (up to 64 times), 0 bytes is a truncated file (reads) or no progress
// (writes), any other error fails naming the range. `*ios` counts the requests issued.
void posix_piece(IoOp op, const File& file, std::byte* host, std::uint64_t n, std::uint64_t at,
                 std::uint64_t* ios) {
  constexpr std::uint64_t max_request = 1U << 30;  // IoRequest::len is 32 bits
  IoEngine& engine = thread_engine(EngineKind::psync, 1);
  unsigned retries = 0;
  for (std::uint64_t done = 0; done < n;) {
    const auto len = static_cast<std::uint32_t>(std::min(n - done, max_request));
    engine.prepare({.op = op, .fd = file.fd(), .buf = host + done, .len = len, .offset = at + done});
    IoCompletion c{};
    while (engine.submit_and_wait({&c, 1}, 1) == 0) {
    }
    ++*ios;
    if (c.result < 0) {
      const int err = static_cast<int>(-c.result);
      if ((err == EINTR || err == EAGAIN) && retries++ < max_transient_retries) continue;
      throw_os_error(err, range_context(op, file, at + done, n - done),
                     op == IoOp::read ? "read failed" : "write failed");
    }
    if (c.result == 0) {
      throw Error(op == IoOp::read ? ErrorDomain::data : ErrorDomain::os, op == IoOp::read ? EIO : ENOSPC,
                  range_context(op, file, at + done, n - done),
                  op == IoOp::read ? "the file ended early: truncated during the read"
                                   : "write made no progress");
    }
    done += static_cast<std::uint64_t>(c.result);
  }
}

// A stream with its events, reused across transfers: creating a stream per transfer costs a
// driver call on CUDA and a thread on the sim device, which dominated 1 MiB bounce reads.
struct CopyStream {
  Stream stream;
  std::vector<Event> events;
};

// Per-device free lists of copy streams. Leaked on purpose, like the devices they belong to;
// each stream holds its device, so a device address is never reused while its streams wait here.
class CopyStreams {
 public:
  static CopyStream take(const std::shared_ptr<Device>& dev) {
    {
      std::lock_guard lock(mutex());
      auto& free = lists()[dev.get()];
      if (!free.empty()) {
        CopyStream s = std::move(free.back());
        free.pop_back();
        return s;
      }
    }
    return CopyStream{Stream(dev), {}};
  }
  static void give_back(CopyStream s) {
    std::lock_guard lock(mutex());
    lists()[s.stream.device().get()].push_back(std::move(s));
  }

 private:
  static std::mutex& mutex() {
    static auto* m = new std::mutex();
    return *m;
  }
  static std::map<Device*, std::vector<CopyStream>>& lists() {
    static auto* l = new std::map<Device*, std::vector<CopyStream>>();
    return *l;
  }
};

// A pooled copy stream for synchronous copies. Sluice never copies on the legacy default stream:
// work there waits for every blocking stream, including a caller's stream that is waiting behind
// a stream-ordered transfer's gate for this very copy (docs/paths.md).
class PooledStream {
 public:
  // Each device call makes the device's context current for itself (and gives the caller's back).
  explicit PooledStream(const std::shared_ptr<Device>& dev) : dev_(*dev), cs_(CopyStreams::take(dev)) {}
  ~PooledStream() {
    try {
      cs_.stream.synchronize();
      CopyStreams::give_back(std::move(cs_));
    } catch (...) {
      // A stream that failed to synchronise is not reused (nor destroyed: it may be busy).
      (void)cs_.stream.release();
    }
  }
  PooledStream(const PooledStream&) = delete;
  PooledStream& operator=(const PooledStream&) = delete;

  void copy_to_device(void* dst, const void* src, std::size_t n) {
    dev_.copy_to_device_async(dst, src, n, cs_.stream.get());
    cs_.stream.synchronize();
  }
  void copy_to_host(void* dst, const void* src, std::size_t n) {
    dev_.copy_to_host_async(dst, src, n, cs_.stream.get());
    cs_.stream.synchronize();
  }

  [[nodiscard]] const Stream& stream() const noexcept { return cs_.stream; }
  /// The events kept with this stream for reuse (DeviceMover's tickets).
  [[nodiscard]] std::vector<Event>& events() noexcept { return cs_.events; }

 private:
  Device& dev_;
  CopyStream cs_;
};

// Asynchronous copies on one stream per worker; a ticket is an event recorded after the copy.
// Copies on one stream complete in order, matching the worker's oldest-first bookkeeping.
class DeviceMover final : public Mover {
 public:
  explicit DeviceMover(const std::shared_ptr<Device>& dev) : dev_(*dev), copies_(dev) {
    for (std::size_t i = 0; i < copies_.events().size(); ++i) free_.push_back(static_cast<int>(i));
  }

  int start(void* dst, const void* src, std::size_t n, bool to_user) override {
    if (to_user) {
      dev_.copy_to_device_async(dst, src, n, copies_.stream().get());
    } else {
      dev_.copy_to_host_async(dst, src, n, copies_.stream().get());
    }
    int t = 0;
    if (free_.empty()) {
      copies_.events().emplace_back(copies_.stream().device());
      t = static_cast<int>(copies_.events().size() - 1);
    } else {
      t = free_.back();
      free_.pop_back();
    }
    event(t).record(copies_.stream());
    return t;
  }
  bool done(int t) override { return event(t).done(); }
  void wait(int t) override { event(t).wait(); }
  void release(int t) override { free_.push_back(t); }

 private:
  Event& event(int t) { return copies_.events()[static_cast<std::size_t>(t)]; }

  Device& dev_;
  PooledStream copies_;  // synchronised and returned to the pool when the mover goes
  std::vector<int> free_;
};

}  // namespace

StagingPool& pinned_pool(Device& device) {
  // Leaked on purpose, like the devices: pinned memory must not be freed from static destructors.
  static auto* pools = new std::map<Device*, std::unique_ptr<StagingPool>>();
  static std::mutex mutex;
  std::lock_guard lock(mutex);
  auto& pool = (*pools)[&device];
  if (!pool) {
    auto cfg = config();
    PoolMemory mem{[&device](std::size_t n) { return device.alloc_pinned(n); },
                   [&device](void* p, std::size_t) { device.free_pinned(p); }};
    pool = std::make_unique<StagingPool>(cfg->bounce_buffers, cfg->bounce_buffer_size, std::move(mem));
  }
  return *pool;
}

TransferResult bounce_transfer(IoOp op, const File& file, std::byte* dev, std::uint64_t size,
                               std::uint64_t offset, const std::shared_ptr<Device>& device,
                               const Config& cfg) {
  StagingPool& pool = pinned_pool(*device);
  const bool use_cache = op == IoOp::read && cfg.cache_policy == CachePolicy::use;
  const bool direct = cfg.direct_io && file.has_direct() && !use_cache &&
                      std::max<std::uint64_t>(file.offset_align(), 4096) <= pool.buffer_size();
  const ChunkLayout layout(op, offset, size, reinterpret_cast<std::uintptr_t>(dev), direct,
                           file.offset_align(), file.mem_align(), pool.buffer_size(),
                           /*staged_user=*/true);
  PipelineSpec spec = make_spec(op, file, dev, offset, size, layout, cfg);
  spec.pool = &pool;
  spec.make_mover = [&device] { return std::make_unique<DeviceMover>(device); };
  // Chunks the page cache holds are read buffered into the same pinned buffers (pipeline.hpp).
  std::optional<ResidencyProbe> probe;
  if (op == IoOp::read && direct && cfg.cache_policy == CachePolicy::automatic) {
    spec.residency = &probe.emplace(file.fd(), offset, size);
  }
  const PipelineResult pr = run_and_record(Path::bounce, spec);
  const std::string via = fmt::format("via {} pinned buffers of {}", pool.count(), format_size(pool.buffer_size()));
  std::string how;
  if (direct) {
    how = residency_reason(pr.residency, "O_DIRECT " + via);
    if (pr.residency.direct_bytes == 0 && pr.residency.probes > 0) how += " " + via;
  } else if (!cfg.direct_io) {
    how = "buffered: direct I/O disabled by configuration";
  } else if (use_cache && file.has_direct()) {
    how = "buffered: cache_policy use " + via;
  } else {
    how = "buffered: " + file.direct_reason();
  }
  return {size, Path::bounce, std::move(how), static_cast<double>(pr.nanoseconds) / 1e9, pr.ios,
          pr.residency.buffered_bytes};
}

TransferResult posix_transfer(IoOp op, const File& file, std::byte* dev, std::uint64_t size,
                              std::uint64_t offset, const std::shared_ptr<Device>& device,
                              const Config& cfg) {
  const auto t0 = Clock::now();
  const std::uint64_t piece = std::min<std::uint64_t>(cfg.bounce_buffer_size, size);
  std::vector<std::byte> host(static_cast<std::size_t>(piece));  // pageable, as naive code has it
  std::uint64_t ios = 0;
  try {
    PooledStream copies(device);
    for (std::uint64_t pos = 0; pos < size;) {
      const std::uint64_t n = std::min(piece, size - pos);
      if (op == IoOp::write) copies.copy_to_host(host.data(), dev + pos, n);
      posix_piece(op, file, host.data(), n, offset + pos, &ios);
      if (op == IoOp::read) copies.copy_to_device(dev + pos, host.data(), n);
      pos += n;
    }
  } catch (...) {
    stats().record(Path::posix, direction(op), 0, ios, since_ns(t0), true);
    throw;
  }
  const std::uint64_t ns = since_ns(t0);
  stats().record(Path::posix, direction(op), size, ios, ns, false);
  return {size, Path::posix, "pageable buffer, synchronous copy (no overlap)", static_cast<double>(ns) / 1e9, ios};
}

std::optional<TransferResult> direct_transfer(IoOp op, const File& file, std::byte* dev,
                                              std::uint64_t size, std::uint64_t offset,
                                              const Config& cfg, DirectRefusal* refusal) {
  (void)cfg;
  const auto t0 = Clock::now();
  CuFile& cufile = CuFile::instance();
  // Transfers on one File run at once (read_async, batches): the first registers its cuFile
  // handle, the others wait in attachment() and share it. A second registration of the fd would
  // be refused (CU_FILE_HANDLE_ALREADY_REGISTERED).
  std::string refused_why;
  int refused_code = 0;
  const auto handle = std::static_pointer_cast<CuFile::Handle>(file.attachment([&]() -> std::shared_ptr<void> {
    return cufile.register_handle(file.has_direct() ? file.direct_fd() : file.fd(), &refused_why, &refused_code);
  }));
  if (!handle) {
    *refusal = {std::move(refused_why), refused_code, Fallback::handle_refused};
    return std::nullopt;
  }
  std::uint64_t done = 0;
  std::uint64_t ios = 0;
  while (done < size) {
    const std::size_t n = static_cast<std::size_t>(size - done);
    const auto at = static_cast<off_t>(offset + done);
    const auto buf_off = static_cast<off_t>(done);
    const ssize_t r = op == IoOp::read ? cufile.read(*handle, dev, n, at, buf_off)
                                       : cufile.write(*handle, dev, n, at, buf_off);
    ++ios;
    if (r == -1) {
      const int err_no = errno;
      stats().record(Path::direct, direction(op), done, ios, since_ns(t0), true);
      throw from_cufile_result(r, err_no, range_context(op, file, offset + done, n),
                               op == IoOp::read ? "cuFileRead failed" : "cuFileWrite failed");
    }
    if (r < 0) {
      // Capability errors ("not this way") before any byte moved: bounce serves with path auto.
      const int code = static_cast<int>(-r);
      if (done == 0 && is_cufile_capability_error(code)) {
        *refusal = {fmt::format("{}: {} ({}): {}", op == IoOp::read ? "cuFileRead" : "cuFileWrite",
                                CuFile::error_name(code), code, CuFile::error_text(code)),
                    code, Fallback::io_refused};
        return std::nullopt;
      }
      stats().record(Path::direct, direction(op), done, ios, since_ns(t0), true);
      throw from_cufile_result(r, 0, range_context(op, file, offset + done, n),
                               fmt::format("{} failed: {}: {}", op == IoOp::read ? "cuFileRead" : "cuFileWrite",
                                           CuFile::error_name(code), CuFile::error_text(code)));
    }
    if (r == 0) {
      stats().record(Path::direct, direction(op), done, ios, since_ns(t0), true);
      throw Error(op == IoOp::read ? ErrorDomain::data : ErrorDomain::os, op == IoOp::read ? EIO : ENOSPC,
                  range_context(op, file, offset + done, n),
                  op == IoOp::read ? "the file ended early: truncated during the read"
                                   : "write made no progress");
    }
    done += static_cast<std::uint64_t>(r);
  }
  const std::uint64_t ns = since_ns(t0);
  stats().record(Path::direct, direction(op), size, ios, ns, false);
  return TransferResult{size, Path::direct, fmt::format("GPUDirect Storage via {}", cufile.library()),
                        static_cast<double>(ns) / 1e9, ios};
}

}  // namespace sluice::detail
