// The host path: file <-> host memory. O_DIRECT straight into the caller's buffer where its
// address allows, through the host staging pool where not, buffered where the filesystem has no
// direct I/O. Reads follow cache_policy: auto reads what the page cache holds through it, chunk by
// chunk (pipeline.hpp); use reads everything buffered; bypass never asks. The work itself is the
// shared pipeline.
#include "host_path.hpp"

#include <cerrno>
#include <chrono>
#include <optional>

#include <fmt/format.h>

#include "chunk_layout.hpp"
#include "pipeline.hpp"
#include "sluice/error.hpp"
#include "sluice/io_engine.hpp"
#include "sluice/residency.hpp"
#include "sluice/staging_pool.hpp"
#include "sluice/stats.hpp"
#include "sluice/units.hpp"

namespace sluice::detail {
namespace {

// Reads of at most this many bytes that the page cache holds whole (or of a file read buffered
// anyway) are one request on the calling thread's engine: the pipeline's layout, workers and
// hand-offs cost more than such a copy (4 KiB warm from Python: 7-10 us a call, against preadv's
// 1.7 us).
constexpr std::uint64_t small_read_bytes = 128 * KiB;

// `layout` only where use_direct.
std::string host_reason(IoOp op, const File& file, const Config& cfg, bool use_direct,
                        const ChunkLayout* layout) {
  if (!use_direct) {
    if (!cfg.direct_io) return "buffered: direct I/O disabled by configuration";
    if (!file.has_direct()) return "buffered: " + file.direct_reason();
    if (op == IoOp::read && cfg.cache_policy == CachePolicy::use) return "buffered: cache_policy use";
    return "buffered: O_DIRECT alignment larger than the I/O size";
  }
  if (layout->staged_count() == 0) return "O_DIRECT";
  if (!layout->middle_aligned()) {
    return fmt::format("O_DIRECT through staging buffers: buffer address not aligned like the file "
                       "offset (mod {})", file.mem_align());
  }
  return "O_DIRECT; unaligned head/tail through staging";
}

// A small read without the pipeline (small_read_bytes), or nullopt when the pipeline must do it:
// not wholly cached, or a request that came back short or with EINTR/EAGAIN, which the pipeline
// then continues or retries. Any other error fails the read here, as the pipeline fails a chunk
// (it must not be retried into a success: an EIO is reported, never masked).
std::optional<TransferResult> small_read(const File& file, std::byte* user, std::uint64_t size,
                                         std::uint64_t offset, const Config& cfg, bool use_direct) {
  if (size > small_read_bytes || size > cfg.io_size) return std::nullopt;
  ResidencyTally tally;
  int fd = file.fd();
  if (use_direct) {
    if (cfg.cache_policy != CachePolicy::automatic) return std::nullopt;
    const Residency r = page_cache_residency(file.fd(), offset, size);
    if (r.pages == 0 || r.cached < r.pages) return std::nullopt;
    tally = {1, r.pages, r.cached, size, 0};
    fd = file.cache_fd();  // readahead off, as the pipeline reads cached chunks
  }
  const auto t0 = std::chrono::steady_clock::now();
  IoEngine& engine = thread_engine(resolve_engine(cfg.engine), cfg.queue_depth);
  if (engine.in_flight() > 0) return std::nullopt;  // not ours to reap
  engine.prepare({IoOp::read, fd, user, static_cast<std::uint32_t>(size), offset, 0, -1, false});
  IoCompletion done;
  if (engine.submit_and_wait({&done, 1}, 1) != 1) return std::nullopt;
  const auto ns = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0)
          .count());
  if (const int err = done.result < 0 ? static_cast<int>(-done.result) : 0;
      err != 0 && err != EINTR && err != EAGAIN) {
    stats().record(Path::host, Direction::read, 0, 0, ns, true);
    throw Error(
        ErrorDomain::os, err,
        {.op = "read", .path = file.path(), .offset = offset, .size = size, .has_range = true},
        "read failed");
  }
  if (done.result != static_cast<std::int64_t>(size)) return std::nullopt;
  stats().record(Path::host, Direction::read, size, 1, ns, false);
  return TransferResult{size,
                        Path::host,
                        // probed: "page cache held 100% ...: buffered"; else why it is buffered
                        use_direct ? residency_reason(tally, {})
                                   : host_reason(IoOp::read, file, cfg, false, nullptr),
                        static_cast<double>(ns) / 1e9,
                        1,
                        tally.buffered_bytes};
}

TransferResult execute(IoOp op, const File& file, std::byte* user, std::uint64_t size,
                       std::uint64_t offset, const Config& cfg) {
  const bool direct = cfg.direct_io && file.has_direct() && !(op == IoOp::read && cfg.cache_policy == CachePolicy::use);
  // The pool is made on first need only: mapping and faulting in its 64 MiB cost a warm 1 GiB
  // `sluice read` (which stages nothing) ~0.1 s, most of its gap to dd.
  const std::uint64_t io_size =
      direct ? std::min<std::uint64_t>(cfg.io_size, host_staging_buffer_size()) : cfg.io_size;
  const bool use_direct = direct && std::max<std::uint64_t>(file.offset_align(), 4096) <= io_size;
  if (op == IoOp::read) {
    if (auto r = small_read(file, user, size, offset, cfg, use_direct)) return std::move(*r);
  }
  const ChunkLayout layout(op, offset, size, reinterpret_cast<std::uintptr_t>(user), use_direct,
                           file.offset_align(), file.mem_align(), io_size);
  PipelineSpec spec = make_spec(op, file, user, offset, size, layout, cfg);
  std::optional<ResidencyProbe> probe;
  if (op == IoOp::read && use_direct && cfg.cache_policy == CachePolicy::automatic) {
    spec.residency = &probe.emplace(file.fd(), offset, size);
  }
  // Only a layout with staged chunks needs the pool; handing it over anyway makes each thread's
  // ring register (fault in and pin) the whole pool on first use, for nothing.
  spec.pool = use_direct && layout.staged_count() > 0 ? &host_staging_pool() : nullptr;
  const PipelineResult pr = run_and_record(Path::host, spec);
  return {size,
          Path::host,
          residency_reason(pr.residency, host_reason(op, file, cfg, use_direct, &layout)),
          static_cast<double>(pr.nanoseconds) / 1e9,
          pr.ios,
          pr.residency.buffered_bytes};
}

}  // namespace

std::uint64_t validate_request(IoOp op, const File& file, const void* buf, std::uint64_t size,
                               std::uint64_t offset) {
  const std::string_view name = op == IoOp::read ? "read" : "write";
  if (!file.is_open()) throw_os_error(EBADF, {.op = name, .path = file.path()}, "file is not open");
  const ErrorContext ctx{.op = name, .path = file.path(), .offset = offset, .size = size,
                         .has_range = true};
  if (buf == nullptr && size > 0) throw_usage_error(ctx, "null buffer");
  constexpr auto max_off = static_cast<std::uint64_t>(INT64_MAX);
  if (offset > max_off || size > max_off - offset) throw_usage_error(ctx, "range overflows");
  if (op == IoOp::read) {
    if (!file.readable()) throw_usage_error(ctx, "file was opened for writing only");
    const std::uint64_t file_size = file.size();
    return offset >= file_size ? 0 : std::min(size, file_size - offset);
  }
  if (!file.writable()) throw_usage_error(ctx, "file was opened read-only");
  return size;
}

TransferResult host_read(const File& file, void* buf, std::uint64_t size, std::uint64_t offset,
                         const Config& cfg) {
  const std::uint64_t n = validate_request(IoOp::read, file, buf, size, offset);
  if (n == 0) return {0, Path::host, "end of file", 0, 0};
  return execute(IoOp::read, file, static_cast<std::byte*>(buf), n, offset, cfg);
}

TransferResult host_write(const File& file, const void* buf, std::uint64_t size,
                          std::uint64_t offset, const Config& cfg) {
  if (validate_request(IoOp::write, file, buf, size, offset) == 0) {
    return {0, Path::host, "nothing to write", 0, 0};
  }
  // The executor never writes through the pointer for writes; the cast only shares one job type.
  return execute(IoOp::write, file, static_cast<std::byte*>(const_cast<void*>(buf)), size, offset,
                 cfg);
}

}  // namespace sluice::detail
