// The async I/O thread: read_async, write_async and submit_batch hand small O_DIRECT transfers
// into host memory, and small O_DIRECT reads into device memory on the bounce path, to one thread
// that owns an io_uring, instead of running each on a pool thread with a ring round-trip of its
// own. See async_io.cpp for the design and its measurements.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "sluice/config.hpp"
#include "sluice/device.hpp"
#include "sluice/file.hpp"
#include "sluice/io_engine.hpp"
#include "sluice/transfer.hpp"

namespace sluice::detail {

/// Reads into device memory of at most this many bytes may go through the async I/O thread, which
/// stages each in a pinned slot of this size (async_io.cpp, "Device reads").
inline constexpr std::uint64_t device_slot_size = 64 << 10;

/// One transfer the path choice sent to the host path, or a read it sent to the bounce path.
struct AsyncTransfer {
  IoOp op = IoOp::read;
  File file;  ///< a handle of its own: the file stays open until the transfer completes
  std::byte* buf = nullptr;  ///< host memory, or with `device` device memory
  std::uint64_t size = 0;
  std::uint64_t offset = 0;
  /// A bounce read: `buf` is this device's memory, filled from a pinned slot. Null: host memory.
  std::shared_ptr<Device> device = nullptr;
  std::string reason = {};  ///< a bounce read's path choice ("auto: direct unavailable: ...")
};

/// Whether `t` can go through the async I/O thread: one O_DIRECT request (the file's alignment,
/// at most cfg.io_size; a device read at most device_slot_size), io_uring, no sync after a
/// write. Anything else takes the pool.
[[nodiscard]] bool async_eligible(const AsyncTransfer& t, const Config& cfg, SyncMode sync);

/// Queues eligible transfers on the async I/O thread with one lock and at most one wake-up for
/// all of them, and appends one future per transfer to `out`, in order. A transfer that comes
/// back short or failed is finished (or its error reported) by the synchronous path on the
/// pool, with `options`.
void submit_async(std::span<const AsyncTransfer> transfers, const TransferOptions& options,
                  std::vector<TransferFuture>& out);

}  // namespace sluice::detail
