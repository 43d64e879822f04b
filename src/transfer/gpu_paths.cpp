#include "gpu_paths.hpp"

#include <unistd.h>

#include <chrono>
#include <map>
#include <mutex>
#include <vector>

#include <fmt/format.h>

#include "../gpu/cufile_api.hpp"
#include "chunk_layout.hpp"
#include "pipeline.hpp"
#include "sluice/error.hpp"
#include "sluice/stats.hpp"
#include "sluice/units.hpp"

namespace sluice::detail {
namespace {

using Clock = std::chrono::steady_clock;

std::uint64_t since_ns(Clock::time_point t0) {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
}

// cuFile errors that say "not this way" rather than "the storage failed": with path=auto the
// bounce path serves the request instead (docs/paths.md lists them). errno failures (-1) and
// CU_FILE_IO_ERROR are I/O errors and are reported, never retried on another path.
bool capability_error(int code) {
  switch (code) {
    case 5001:  // DRIVER_NOT_INITIALIZED
    case 5007:  // PLATFORM_NOT_SUPPORTED
    case 5008:  // IO_NOT_SUPPORTED
    case 5009:  // DEVICE_NOT_SUPPORTED
    case 5010:  // NVFS_DRIVER_ERROR
    case 5012:  // CUDA_POINTER_INVALID
    case 5013:  // CUDA_MEMORY_TYPE_INVALID
    case 5014:  // CUDA_POINTER_RANGE_ERROR
    case 5016:  // INVALID_MAPPING_SIZE
    case 5017:  // INVALID_MAPPING_RANGE
    case 5020:  // DIO_NOT_SET
    case 5034:  // IO_DISABLED
    case 5036:  // GPU_MEMORY_PINNING_FAILED
    case 5043:  // NOMEM_ERROR
      return true;
    default:
      return false;
  }
}

Direction direction(IoOp op) { return op == IoOp::read ? Direction::read : Direction::write; }

ErrorContext range_context(IoOp op, const File& file, std::uint64_t offset, std::uint64_t size) {
  return {.op = op == IoOp::read ? "read" : "write", .path = file.path(), .offset = offset,
          .size = size, .has_range = true};
}

// Asynchronous copies on one stream per worker; a ticket is an event recorded after the copy.
// Copies on one stream complete in order, matching the worker's oldest-first bookkeeping.
class DeviceMover final : public Mover {
 public:
  explicit DeviceMover(Device& dev) : dev_(dev) {
    dev_.make_current();
    stream_ = dev_.create_stream();
  }
  ~DeviceMover() override {
    try {
      dev_.synchronize(stream_);
    } catch (...) {
      // Already failing; the stream is destroyed below either way.
    }
    for (EventHandle e : events_) dev_.destroy_event(e);
    dev_.destroy_stream(stream_);
  }
  DeviceMover(const DeviceMover&) = delete;
  DeviceMover& operator=(const DeviceMover&) = delete;

  int start(void* dst, const void* src, std::size_t n, bool to_user) override {
    if (to_user) {
      dev_.copy_to_device_async(dst, src, n, stream_);
    } else {
      dev_.copy_to_host_async(dst, src, n, stream_);
    }
    int t = 0;
    if (free_.empty()) {
      events_.push_back(dev_.create_event());
      t = static_cast<int>(events_.size() - 1);
    } else {
      t = free_.back();
      free_.pop_back();
    }
    dev_.record_event(events_[static_cast<std::size_t>(t)], stream_);
    return t;
  }
  bool done(int t) override { return dev_.event_done(events_[static_cast<std::size_t>(t)]); }
  void wait(int t) override { dev_.wait_event(events_[static_cast<std::size_t>(t)]); }
  void release(int t) override { free_.push_back(t); }

 private:
  Device& dev_;
  StreamHandle stream_ = nullptr;
  std::vector<EventHandle> events_;
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
                               std::uint64_t offset, Device& device, const Config& cfg) {
  const auto t0 = Clock::now();
  StagingPool& pool = pinned_pool(device);
  const bool direct = cfg.direct_io && file.has_direct() &&
                      std::max<std::uint64_t>(file.offset_align(), 4096) <= pool.buffer_size();
  const ChunkLayout layout(op, offset, size, reinterpret_cast<std::uintptr_t>(dev), direct,
                           file.offset_align(), file.mem_align(), pool.buffer_size(),
                           /*staged_user=*/true);
  PipelineSpec spec;
  spec.op = op;
  spec.file = &file;
  spec.user = dev;
  spec.start = offset;
  spec.size = size;
  spec.layout = &layout;
  spec.engine = resolve_engine(cfg.engine);
  spec.depth = cfg.queue_depth;
  spec.workers = cfg.effective_threads();
  spec.pool = &pool;
  spec.make_mover = [&device] { return std::make_unique<DeviceMover>(device); };
  PipelineResult pr;
  try {
    pr = run_pipeline(spec);
  } catch (...) {
    stats().record(Path::bounce, direction(op), 0, 0, since_ns(t0), true);
    throw;
  }
  const std::uint64_t ns = since_ns(t0);
  stats().record(Path::bounce, direction(op), size, pr.ios, ns, false);
  std::string how = direct ? fmt::format("O_DIRECT via {} pinned buffers of {}", pool.count(),
                                         format_size(pool.buffer_size()))
                           : "buffered: " + (cfg.direct_io ? file.direct_reason()
                                                           : std::string("direct I/O disabled by configuration"));
  return {size, Path::bounce, std::move(how), static_cast<double>(ns) / 1e9, pr.ios};
}

TransferResult posix_transfer(IoOp op, const File& file, std::byte* dev, std::uint64_t size,
                              std::uint64_t offset, Device& device, const Config& cfg) {
  const auto t0 = Clock::now();
  const std::uint64_t piece = std::min<std::uint64_t>(cfg.bounce_buffer_size, size);
  std::vector<std::byte> host(static_cast<std::size_t>(piece));  // pageable, as naive code has it
  std::uint64_t ios = 0;
  device.make_current();
  try {
    for (std::uint64_t pos = 0; pos < size;) {
      const std::uint64_t n = std::min(piece, size - pos);
      if (op == IoOp::write) device.copy_to_host(host.data(), dev + pos, n);
      std::uint64_t done = 0;
      while (done < n) {
        const auto at = static_cast<off_t>(offset + pos + done);
        const ssize_t r = op == IoOp::read ? ::pread(file.fd(), host.data() + done, n - done, at)
                                           : ::pwrite(file.fd(), host.data() + done, n - done, at);
        ++ios;
        if (r < 0) {
          if (errno == EINTR) continue;
          throw_os_error(errno, range_context(op, file, offset + pos + done, n - done),
                         op == IoOp::read ? "read failed" : "write failed");
        }
        if (r == 0) {
          throw Error(op == IoOp::read ? ErrorDomain::data : ErrorDomain::os,
                      op == IoOp::read ? EIO : ENOSPC, range_context(op, file, offset + pos + done, n - done),
                      op == IoOp::read ? "the file ended early: truncated during the read"
                                       : "write made no progress");
        }
        done += static_cast<std::uint64_t>(r);
      }
      if (op == IoOp::read) device.copy_to_device(dev + pos, host.data(), n);
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
                                              const Config& cfg, std::string* refusal) {
  (void)cfg;
  const auto t0 = Clock::now();
  CuFile& cufile = CuFile::instance();
  auto handle = std::static_pointer_cast<CuFile::Handle>(file.attachment());
  if (!handle) {
    std::string why;
    int code = 0;
    handle = cufile.register_handle(file.has_direct() ? file.direct_fd() : file.fd(), &why, &code);
    if (!handle) {
      *refusal = why;
      return std::nullopt;
    }
    file.attachment() = handle;
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
      stats().record(Path::direct, direction(op), done, ios, since_ns(t0), true);
      throw_os_error(errno, range_context(op, file, offset + done, n),
                     op == IoOp::read ? "cuFileRead failed" : "cuFileWrite failed");
    }
    if (r < 0) {
      const int code = static_cast<int>(-r);
      if (done == 0 && capability_error(code)) {
        *refusal = fmt::format("{}: {} ({}): {}", op == IoOp::read ? "cuFileRead" : "cuFileWrite",
                               CuFile::error_name(code), code, CuFile::error_text(code));
        return std::nullopt;
      }
      stats().record(Path::direct, direction(op), done, ios, since_ns(t0), true);
      throw Error(ErrorDomain::cufile, code, range_context(op, file, offset + done, n),
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
