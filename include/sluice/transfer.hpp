// Moving bytes between a file and memory. Every call returns how many bytes moved, which path
// they took and why. Any offset, size and buffer alignment is accepted; reading past the end
// of the file is not an error (the result says how many bytes there were).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sluice/config.hpp"
#include "sluice/device.hpp"
#include "sluice/export.hpp"
#include "sluice/file.hpp"
#include "sluice/io_engine.hpp"
#include "sluice/path.hpp"
#include "sluice/transfer_future.hpp"
#include "sluice/transfer_result.hpp"

namespace sluice {

enum class SyncMode : std::uint8_t {
  none,  ///< return when the kernel has the data
  data,  ///< fdatasync before returning
  full,  ///< fsync before returning
};

struct TransferOptions {
  SyncMode sync = SyncMode::none;          ///< writes only
  std::shared_ptr<const Config> config{};  ///< null: the process-wide configuration
  /// The GPU the buffer may live on. Null: the buffer is host memory (host path). With a device,
  /// the buffer's kind decides: device memory takes a GPU path, host memory the host path.
  std::shared_ptr<Device> device{};
  /// The path to take for device memory; unset: the configuration's `path` (default auto).
  /// A path other than auto is strict: if it cannot be honoured the call fails with the reason.
  std::optional<Path> path{};
};

/// Reads up to `size` bytes at `offset` into `buf`. Returns fewer bytes only at the end of the
/// file. Throws an Error naming the file and range on failure, including a file truncated
/// while being read; on error the contents of `buf` are unspecified.
SLUICE_API TransferResult read(const File& file, void* buf, std::uint64_t size,
                               std::uint64_t offset, const TransferOptions& options = {});

/// Writes `size` bytes from `buf` at `offset`, extending the file as needed.
SLUICE_API TransferResult write(const File& file, const void* buf, std::uint64_t size,
                                std::uint64_t offset, const TransferOptions& options = {});

/// Asynchronous forms. A transfer of host memory that is one O_DIRECT request (aligned as the
/// file needs, at most `io_size`, io_uring, no sync) goes to the async I/O thread, which keeps
/// every such request of the process in one ring; any other runs on the process thread pool.
/// The transfer holds its own handle on `file` until the future is ready, so the caller may drop
/// or close its File at once; the buffer (and options.device) must stay valid until then.
/// Errors arrive through the future.
SLUICE_API TransferFuture read_async(const File& file, void* buf, std::uint64_t size,
                                     std::uint64_t offset, TransferOptions options = {});
SLUICE_API TransferFuture write_async(const File& file, const void* buf, std::uint64_t size,
                                      std::uint64_t offset, TransferOptions options = {});

/// Stream-ordered forms: the transfer starts when the work already on `stream` (of
/// options.device, required) has finished, and later work on `stream` waits for it, as with
/// cuFileReadAsync. The future is ready when the transfer is done. The file is held as by
/// read_async; the buffer and the stream must stay valid until the future is ready.
SLUICE_API TransferFuture read_on_stream(const File& file, void* buf, std::uint64_t size,
                                         std::uint64_t offset, StreamHandle stream,
                                         TransferOptions options);
SLUICE_API TransferFuture write_on_stream(const File& file, const void* buf, std::uint64_t size,
                                          std::uint64_t offset, StreamHandle stream,
                                          TransferOptions options);

/// The same on a Stream, which names its device: options.device may stay null (a different
/// device is a usage error). The Stream must outlive the future, as the stream does above.
SLUICE_API TransferFuture read_on_stream(const File& file, void* buf, std::uint64_t size,
                                         std::uint64_t offset, const Stream& stream,
                                         TransferOptions options = {});
SLUICE_API TransferFuture write_on_stream(const File& file, const void* buf, std::uint64_t size,
                                          std::uint64_t offset, const Stream& stream,
                                          TransferOptions options = {});

/// The building block of the stream-ordered forms, for callers whose arguments are only known
/// when the stream reaches the call (cuFileReadAsync reads its size and offsets then): `work`
/// starts on the thread pool once the work already on `stream` has finished, and later work on
/// `stream` waits until it has returned or thrown. `work` may use the device; the stream waits
/// without holding a CUDA host-function thread. The future carries its result or exception.
/// `work` owns what it captures until it has run: capture a File by value, not by reference.
SLUICE_API TransferFuture run_on_stream(const std::shared_ptr<Device>& device, StreamHandle stream,
                                        std::function<TransferResult()> work);

/// One entry of a batch: many (file, offset, size, buffer) transfers submitted at once.
struct BatchEntry {
  IoOp op = IoOp::read;
  /// Only read during submit_batch, which takes a handle of its own for each entry: the File may
  /// go once submit_batch has returned. The buffer must stay valid until its future is ready.
  const File* file = nullptr;
  void* buf = nullptr;
  std::uint64_t size = 0;
  std::uint64_t offset = 0;
};

/// Submits every entry at once; each completes on its own (one future per entry, in order).
/// Entries run concurrently, each through its own path choice, as read_async/write_async run
/// them; those for the async I/O thread are handed over together.
SLUICE_API std::vector<TransferFuture> submit_batch(std::span<const BatchEntry> entries,
                                                    const TransferOptions& options = {});

/// Which path a transfer with these arguments would take, and why, without moving a byte.
/// Throws the Error a strict request that cannot be honoured would throw.
struct PathChoice {
  Path path = Path::host;
  std::string reason;
};
SLUICE_API PathChoice choose_path(const File& file, const void* buf, std::uint64_t size,
                                  std::uint64_t offset, const TransferOptions& options = {});

}  // namespace sluice
