// The host path: file <-> host memory. O_DIRECT straight into the caller's buffer where its
// address allows, through the host staging pool where not, buffered where the filesystem has no
// direct I/O. Reads follow cache_policy: auto reads what the page cache holds through it, chunk by
// chunk (pipeline.hpp); use reads everything buffered; bypass never asks. The work itself is the
// shared pipeline.
#include "host_path.hpp"

#include <unistd.h>

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

// Pages of the page cache [offset, offset + size) spans (size > 0).
std::uint64_t pages_spanned(std::uint64_t offset, std::uint64_t size) {
  static const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  return (offset + size - 1) / page - offset / page + 1;
}

// Whether a read that failed with `err` may go on another way: EAGAIN (from a cached_only read:
// a page not in the cache; or a full device queue), EINTR, EOPNOTSUPP (a filesystem that cannot
// read cached pages only). Any other error fails the read, as the pipeline fails a chunk (it
// must not be retried into a success: an EIO is reported, never masked).
bool may_go_on(std::int64_t result) {
  return result >= 0 || result == -EAGAIN || result == -EINTR || result == -EOPNOTSUPP;
}

[[noreturn]] void small_read_failed(const File& file, std::uint64_t size, std::uint64_t offset,
                                    std::int64_t result, std::uint64_t ns) {
  stats().record(Path::host, Direction::read, 0, 0, ns, true);
  throw Error(ErrorDomain::os, static_cast<int>(-result),
              {.op = "read", .path = file.path(), .offset = offset, .size = size, .has_range = true},
              "read failed");
}

// A small read without the pipeline (small_read_bytes): one request on the calling thread's
// engine, done at once (IoEngine::transfer_now: one preadv2 for the kernel engines, queued
// through a decorator such as FaultyEngine). Under cache_policy auto, where the file's last small
// read found its range cached (File::last_small_read_cached), the first try takes the bytes only
// if the page cache holds all of them (cached_only: RWF_NOWAIT), so a cached range is read and
// known to be cached in one syscall. Elsewhere, or where that try comes back short, residency is
// probed first: RWF_NOWAIT on a page that is not cached starts reading it into the cache (Linux
// 6.x), and a cold range must go O_DIRECT and leave the cache alone. nullopt when the pipeline
// must do it: not wholly cached, or a request that came back short (the file may have shrunk:
// the caller asks its size) or with EINTR/EAGAIN, which the pipeline then continues or retries.
// `issued` counts the requests made for the transfer (this call adds its own): the result's ios,
// or the pipeline's ios_before.
std::optional<TransferResult> small_read(const File& file, std::byte* user, std::uint64_t size,
                                         std::uint64_t offset, const Config& cfg, bool use_direct,
                                         std::chrono::steady_clock::time_point t0,
                                         std::uint64_t& issued, std::uint64_t* from_t0 = nullptr) {
  if (size > small_read_bytes || size > cfg.io_size) return std::nullopt;
  if (use_direct && cfg.cache_policy != CachePolicy::automatic) return std::nullopt;
  IoEngine& engine = thread_engine(resolve_engine(cfg.engine), cfg.queue_depth);
  if (engine.in_flight() > 0) return std::nullopt;  // not ours to reap
  const auto elapsed = [&t0] {
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                          std::chrono::steady_clock::now() - t0)
                                          .count());
  };
  // Cached pages are read through the readahead-off descriptor, as the pipeline reads them.
  IoRequest req{IoOp::read, use_direct ? file.cache_fd() : file.fd(), user,
                static_cast<std::uint32_t>(size), offset, 0, -1, false, false};
  const auto attempt = [&](bool cached_only) {
    req.cached_only = cached_only;
    const std::int64_t got = engine.transfer_now(req);
    ++issued;
    if (!may_go_on(got)) small_read_failed(file, size, offset, got, elapsed());
    return got;
  };
  std::int64_t got = 0;
  ResidencyTally tally;
  if (use_direct) {
    if (file.last_small_read_cached()) got = attempt(true);
    if (got != static_cast<std::int64_t>(size)) {
      const Residency r = page_cache_residency(file.fd(), offset, size);
      const bool cached = r.pages > 0 && r.cached == r.pages;
      file.note_small_read_cached(cached);
      if (!cached) return std::nullopt;
      got = attempt(false);
    }
    const std::uint64_t pages = pages_spanned(offset, size);
    tally = {1, pages, pages, size, 0};  // as residency_reason reads it: all_cached below
  } else {
    got = attempt(false);
  }
  if (got != static_cast<std::int64_t>(size)) return std::nullopt;
  const std::uint64_t ns = elapsed();
  stats().record(Path::host, Direction::read, size, issued, ns, false);
  if (from_t0 != nullptr) *from_t0 = ns;
  // Probed or read cached_only: what residency_reason says of it, without formatting it per
  // call; else why it is buffered.
  static const std::string all_cached = residency_reason({1, 1, 1, 1, 0}, {});
  return TransferResult{size,
                        Path::host,
                        use_direct ? all_cached : host_reason(IoOp::read, file, cfg, false, nullptr),
                        static_cast<double>(ns) / 1e9,
                        issued,
                        tally.buffered_bytes};
}

// How a transfer of this file goes: the I/O size, and whether O_DIRECT is used where it can be.
struct HostMode {
  std::uint64_t io_size;
  bool use_direct;
};
HostMode host_mode(IoOp op, const File& file, const Config& cfg) {
  const bool direct = cfg.direct_io && file.has_direct() && !(op == IoOp::read && cfg.cache_policy == CachePolicy::use);
  // The pool is made on first need only: mapping and faulting in its 64 MiB cost a warm 1 GiB
  // `sluice read` (which stages nothing) ~0.1 s, most of its gap to dd.
  const std::uint64_t io_size =
      direct ? std::min<std::uint64_t>(cfg.io_size, host_staging_buffer_size()) : cfg.io_size;
  return {io_size, direct && std::max<std::uint64_t>(file.offset_align(), 4096) <= io_size};
}

// `try_small`: false where small_read already tried this very request; `issued`: requests it
// made for this transfer so far.
TransferResult execute(IoOp op, const File& file, std::byte* user, std::uint64_t size,
                       std::uint64_t offset, const Config& cfg, bool try_small,
                       std::uint64_t issued = 0) {
  const auto [io_size, use_direct] = host_mode(op, file, cfg);
  if (op == IoOp::read && try_small) {
    const auto t0 = std::chrono::steady_clock::now();
    if (auto r = small_read(file, user, size, offset, cfg, use_direct, t0, issued)) return std::move(*r);
  }
  const ChunkLayout layout(op, offset, size, reinterpret_cast<std::uintptr_t>(user), use_direct,
                           file.offset_align(), file.mem_align(), io_size);
  PipelineSpec spec = make_spec(op, file, user, offset, size, layout, cfg);
  spec.ios_before = issued;
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

namespace {

// validate_request's checks, without the file's size.
void check_request(IoOp op, const File& file, const void* buf, std::uint64_t size,
                   std::uint64_t offset) {
  const std::string_view name = op == IoOp::read ? "read" : "write";
  if (!file.is_open()) throw_os_error(EBADF, {.op = name, .path = file.path()}, "file is not open");
  // Made only for an error: its path is a string, which every call would otherwise copy.
  const auto ctx = [&] {
    return ErrorContext{.op = name, .path = file.path(), .offset = offset, .size = size, .has_range = true};
  };
  if (buf == nullptr && size > 0) throw_usage_error(ctx(), "null buffer");
  constexpr auto max_off = static_cast<std::uint64_t>(INT64_MAX);
  if (offset > max_off || size > max_off - offset) throw_usage_error(ctx(), "range overflows");
  if (op == IoOp::read && !file.readable()) throw_usage_error(ctx(), "file was opened for writing only");
  if (op == IoOp::write && !file.writable()) throw_usage_error(ctx(), "file was opened read-only");
}

}  // namespace

std::uint64_t validate_request(IoOp op, const File& file, const void* buf, std::uint64_t size,
                               std::uint64_t offset) {
  check_request(op, file, buf, size, offset);
  if (op == IoOp::write) return size;
  const std::uint64_t file_size = file.size();
  return offset >= file_size ? 0 : std::min(size, file_size - offset);
}

TransferResult host_read(const File& file, void* buf, std::uint64_t size, std::uint64_t offset,
                         const Config& cfg, std::chrono::steady_clock::time_point started,
                         std::uint64_t* from_started) {
  // A small read that ends within the size last seen asks the kernel no size (no fstat). One
  // that reaches past it (the file may have grown) or comes back short (it may have shrunk) asks
  // below, so a file that grows is still read to its new end, and one that shrank to its end.
  const std::uint64_t seen = file.size_seen();
  const bool within_seen = size > 0 && size <= small_read_bytes && size <= seen && offset <= seen - size;
  std::uint64_t issued = 0;
  if (within_seen) {
    check_request(IoOp::read, file, buf, size, offset);
    const HostMode mode = host_mode(IoOp::read, file, cfg);
    if (auto r = small_read(file, static_cast<std::byte*>(buf), size, offset, cfg, mode.use_direct,
                            started, issued, from_started)) {
      return std::move(*r);
    }
  }
  const std::uint64_t n = validate_request(IoOp::read, file, buf, size, offset);
  if (n == 0) return {0, Path::host, "end of file", 0, issued};
  return execute(IoOp::read, file, static_cast<std::byte*>(buf), n, offset, cfg,
                 !(within_seen && n == size), issued);
}

TransferResult host_write(const File& file, const void* buf, std::uint64_t size,
                          std::uint64_t offset, const Config& cfg) {
  if (validate_request(IoOp::write, file, buf, size, offset) == 0) {
    return {0, Path::host, "nothing to write", 0, 0};
  }
  // The executor never writes through the pointer for writes; the cast only shares one job type.
  return execute(IoOp::write, file, static_cast<std::byte*>(const_cast<void*>(buf)), size, offset,
                 cfg, false);
}

}  // namespace sluice::detail
