// The public transfer API: picks the path for each request (and says why), then hands it to
// the host, bounce, posix or direct implementation.
#include "sluice/transfer.hpp"

#include <unistd.h>

#include <fmt/format.h>

#include "../gpu/cufile_api.hpp"
#include "gpu_paths.hpp"
#include "host_path.hpp"
#include "sluice/error.hpp"
#include "sluice/thread_pool.hpp"

namespace sluice {
namespace {

std::shared_ptr<const Config> effective(const TransferOptions& o) {
  return o.config ? o.config : config();
}

void sync_file(const File& file, SyncMode mode, std::uint64_t offset, std::uint64_t size) {
  if (mode == SyncMode::none) return;
  const int rc = mode == SyncMode::data ? ::fdatasync(file.fd()) : ::fsync(file.fd());
  if (rc != 0) {
    throw_os_error(errno, {.op = "write", .path = file.path(), .offset = offset, .size = size,
                           .has_range = true},
                   mode == SyncMode::data ? "fdatasync failed" : "fsync failed");
  }
}

Path requested_path(const TransferOptions& o, const Config& cfg, bool* strict) {
  if (o.path) {
    *strict = true;
    return *o.path;
  }
  if (cfg.path == "auto") {
    *strict = false;
    return Path::direct;  // auto tries direct first
  }
  *strict = true;
  return *parse_path(cfg.path);
}

// Why the direct path cannot serve this request, or empty when it can (before registration).
std::string direct_obstacle(const File& file, const void* buf, std::uint64_t size, std::uint64_t offset) {
  auto& cufile = detail::CuFile::instance();
  if (!cufile.available()) return cufile.reason();
  if (!file.has_direct()) return file.direct_reason();
  if (reinterpret_cast<std::uintptr_t>(buf) % 4096 != 0) return "buffer not 4 KiB aligned";
  if (offset % 4096 != 0) return "file offset not 4 KiB aligned";
  if (size % 4096 != 0) return "size not a multiple of 4 KiB";
  return {};
}

struct Choice {
  Path path;
  std::string reason;
  bool strict;
};

Choice choose(IoOp op, const File& file, const void* buf, std::uint64_t size, std::uint64_t offset,
              const TransferOptions& o, const Config& cfg) {
  const ErrorContext ctx{.op = op == IoOp::read ? "read" : "write", .path = file.path(), .offset = offset, .size = size, .has_range = true};
  bool strict = false;
  const Path want = requested_path(o, cfg, &strict);
  const MemoryKind kind = o.device ? o.device->pointer_kind(buf) : MemoryKind::pageable_host;
  if (kind != MemoryKind::device) {
    if (strict && want != Path::host) {
      throw_usage_error(ctx, fmt::format("path {} moves data to GPU memory, but the buffer is {} memory",
                                         to_string(want), to_string(kind)));
    }
    return {Path::host, {}, strict};
  }
  if (want == Path::host) throw_usage_error(ctx, "path host needs host memory, but the buffer is device memory");
  if (want == Path::bounce || want == Path::posix) return {want, "requested", true};
  std::string why = direct_obstacle(file, buf, size, offset);
  if (why.empty()) return {Path::direct, strict ? "requested" : "auto", strict};
  if (strict) throw Error(ErrorDomain::cufile, 5008, ctx, fmt::format("path direct unavailable: {}", why));
  return {Path::bounce, "auto: direct unavailable: " + why, false};
}

TransferResult run(IoOp op, const File& file, std::byte* buf, std::uint64_t size, std::uint64_t offset,
                   const TransferOptions& o) {
  auto cfg = effective(o);
  const Choice c = choose(op, file, buf, size, offset, o, *cfg);
  if (c.path == Path::host) {
    return op == IoOp::read ? detail::host_read(file, buf, size, offset, *cfg)
                            : detail::host_write(file, buf, size, offset, *cfg);
  }
  // GPU paths: the same checks and EOF clamping as the host path.
  const std::uint64_t n = detail::validate_request(op, file, buf, size, offset);
  if (n == 0) return {0, c.path, op == IoOp::read ? "end of file" : "nothing to write", 0, 0};
  Device& dev = *o.device;
  auto tag = [&](TransferResult r) {
    if (c.reason == "auto") {
      r.reason = "auto: " + r.reason;
    } else if (!c.reason.empty() && c.reason != "requested") {
      r.reason = c.reason + "; " + r.reason;
    }
    return r;
  };
  switch (c.path) {
    case Path::posix: return tag(detail::posix_transfer(op, file, buf, n, offset, dev, *cfg));
    case Path::bounce: return tag(detail::bounce_transfer(op, file, buf, n, offset, dev, *cfg));
    case Path::direct: {
      std::string refusal;
      int refusal_code = 0;
      if (auto r = detail::direct_transfer(op, file, buf, n, offset, *cfg, &refusal, &refusal_code)) {
        return tag(std::move(*r));
      }
      if (c.strict) {
        throw Error(ErrorDomain::cufile, refusal_code != 0 ? refusal_code : 5008,
                    {.op = op == IoOp::read ? "read" : "write", .path = file.path(), .offset = offset,
                     .size = n, .has_range = true},
                    "path direct unavailable: " + refusal);
      }
      TransferResult r = detail::bounce_transfer(op, file, buf, n, offset, dev, *cfg);
      r.reason = "auto: direct unavailable: " + refusal + "; " + r.reason;
      return r;
    }
    case Path::host: break;
  }
  return {};
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

PathChoice choose_path(const File& file, const void* buf, std::uint64_t size, std::uint64_t offset,
                       const TransferOptions& options) {
  auto cfg = effective(options);
  Choice c = choose(IoOp::read, file, buf, size, offset, options, *cfg);
  if (c.path == Path::host) {
    c.reason = file.has_direct() && cfg->direct_io ? "host memory: O_DIRECT"
                                                    : "host memory: buffered: " + file.direct_reason();
  }
  return {c.path, c.reason};
}

std::future<TransferResult> read_async(const File& file, void* buf, std::uint64_t size,
                                       std::uint64_t offset, TransferOptions options) {
  return default_pool().submit(
      [&file, buf, size, offset, options] { return read(file, buf, size, offset, options); });
}

std::future<TransferResult> write_async(const File& file, const void* buf, std::uint64_t size,
                                        std::uint64_t offset, TransferOptions options) {
  return default_pool().submit(
      [&file, buf, size, offset, options] { return write(file, buf, size, offset, options); });
}

namespace {

// Runs on the device's host-function thread, in stream order: starts the transfer on the pool
// (host functions must not call the device themselves) and holds the stream until it is done.
struct StreamTask {
  std::function<TransferResult()> work;
  std::promise<TransferResult> promise;
};

void run_stream_task(void* arg) {
  std::unique_ptr<StreamTask> task(static_cast<StreamTask*>(arg));
  auto fut = default_pool().submit(std::move(task->work));
  try {
    task->promise.set_value(fut.get());
  } catch (...) {
    task->promise.set_exception(std::current_exception());
  }
}

std::future<TransferResult> on_stream(StreamHandle stream, const TransferOptions& options,
                                      std::function<TransferResult()> work) {
  if (!options.device) throw_usage_error({.op = "stream transfer"}, "a stream-ordered transfer needs options.device");
  auto task = std::make_unique<StreamTask>();
  task->work = std::move(work);
  auto fut = task->promise.get_future();
  options.device->launch_host_func(stream, &run_stream_task, task.get());
  (void)task.release();  // owned by run_stream_task from here on
  return fut;
}

}  // namespace

std::future<TransferResult> read_on_stream(const File& file, void* buf, std::uint64_t size,
                                           std::uint64_t offset, StreamHandle stream,
                                           TransferOptions options) {
  return on_stream(stream, options, [&file, buf, size, offset, options] {
    return read(file, buf, size, offset, options);
  });
}

std::future<TransferResult> write_on_stream(const File& file, const void* buf, std::uint64_t size,
                                            std::uint64_t offset, StreamHandle stream,
                                            TransferOptions options) {
  return on_stream(stream, options, [&file, buf, size, offset, options] {
    return write(file, buf, size, offset, options);
  });
}

std::vector<std::future<TransferResult>> submit_batch(std::span<const BatchEntry> entries,
                                                      const TransferOptions& options) {
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].file == nullptr) {
      throw_usage_error({.op = "batch"}, fmt::format("entry {} has no file", i));
    }
  }
  std::vector<std::future<TransferResult>> out;
  out.reserve(entries.size());
  for (const BatchEntry& e : entries) {
    out.push_back(e.op == IoOp::read ? read_async(*e.file, e.buf, e.size, e.offset, options)
                                     : write_async(*e.file, e.buf, e.size, e.offset, options));
  }
  return out;
}

}  // namespace sluice
