// The executor shared by the host and bounce paths. A request becomes a ChunkLayout; the calling
// thread and up to `helpers` pool threads pull chunk indices from a shared counter, each keeping
// up to `depth` I/Os in flight on its thread's engine. Staged chunks borrow a buffer from a fixed
// StagingPool and move bytes between it and the caller's memory with a Mover: memcpy for host
// memory, asynchronous device copies (overlapping the next reads) for GPU memory.
//
// Reads with a residency probe ask, just before each O_DIRECT chunk is issued, how much of it the
// page cache holds (ResidencyProbe::probe_edges: its first and last 64 KiB, the whole chunk only
// when they disagree); a chunk held at least half is read through the buffered descriptor instead
// (into the caller's host memory, or the staging buffer for device memory), so one request mixes
// buffered and O_DIRECT chunks. The tally says what was done, for the reason.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "chunk_layout.hpp"
#include "sluice/config.hpp"
#include "sluice/file.hpp"
#include "sluice/path.hpp"
#include "sluice/io_engine.hpp"
#include "sluice/residency.hpp"
#include "sluice/staging_pool.hpp"

namespace sluice::detail {

/// Moves bytes between a staging buffer and the caller's memory. One per worker, used by one
/// thread. A ticket is an opaque small integer; synchronous movers return no ticket.
class Mover {
 public:
  virtual ~Mover() = default;
  /// Starts copying n bytes; returns a ticket to poll, or -1 when the copy is already done.
  virtual int start(void* dst, const void* src, std::size_t n, bool to_user) = 0;
  [[nodiscard]] virtual bool done(int ticket) = 0;
  virtual void wait(int ticket) = 0;
  virtual void release(int ticket) = 0;
};

/// memcpy, done at once.
class HostMover final : public Mover {
 public:
  int start(void* dst, const void* src, std::size_t n, bool to_user) override;
  bool done(int) override { return true; }
  void wait(int) override {}
  void release(int) override {}
};

struct PipelineSpec {
  IoOp op = IoOp::read;
  const File* file = nullptr;
  std::byte* user = nullptr;   ///< caller's memory (host or device)
  std::uint64_t start = 0;     ///< file offset of user[0]
  std::uint64_t size = 0;
  const ChunkLayout* layout = nullptr;
  EngineKind engine = EngineKind::psync;
  unsigned depth = 1;
  unsigned workers = 1;        ///< threads sharing the request, the caller included
  StagingPool* pool = nullptr; ///< required when the layout has staged chunks
  /// Reads: probe each O_DIRECT chunk and read it buffered when the page cache holds at least
  /// half of it. Null: no probing (every chunk as the layout says).
  const ResidencyProbe* residency = nullptr;
  std::function<std::unique_ptr<Mover>()> make_mover;  ///< per worker; default HostMover
  /// Requests already issued for this transfer outside the pipeline (a small read's tries that
  /// came back short or not cached), counted in its ios with the pipeline's own.
  std::uint64_t ios_before = 0;
};

/// What the residency probes found and what was done about it (all zero without a probe).
struct ResidencyTally {
  std::uint64_t probes = 0;
  std::uint64_t pages = 0;           ///< pages probed
  std::uint64_t cached_pages = 0;    ///< of them, in the page cache
  std::uint64_t buffered_bytes = 0;  ///< caller's bytes read buffered because they were cached
  std::uint64_t direct_bytes = 0;    ///< caller's bytes read with O_DIRECT after a probe
};

struct PipelineResult {
  std::uint64_t ios = 0;
  std::uint64_t nanoseconds = 0;  ///< wall time, set by run_and_record
  ResidencyTally residency{};
};

/// The reason of a read that probed residency: "page cache held 100% of the range: buffered",
/// "page cache held 62% of the range: mixed: 640 MiB buffered, 384 MiB <direct_how>", or
/// "page cache held 0% of the range: <direct_how>". Without probes: `direct_how` as it is.
[[nodiscard]] std::string residency_reason(const ResidencyTally& t, const std::string& direct_how);

/// The fields every path fills the same way: the request, its layout and the configuration's
/// engine, queue depth and worker count. The caller adds the pool and mover it needs.
[[nodiscard]] PipelineSpec make_spec(IoOp op, const File& file, std::byte* user, std::uint64_t offset,
                                     std::uint64_t size, const ChunkLayout& layout, const Config& cfg);

/// Runs the request; throws the first Error any worker met (after every worker has stopped and
/// every buffer is back in the pool).
PipelineResult run_pipeline(const PipelineSpec& spec);

/// run_pipeline, timed, with the outcome recorded in the stats under `path`.
PipelineResult run_and_record(Path path, const PipelineSpec& spec);

}  // namespace sluice::detail
