// Moving bytes between a file and memory. Every call returns how many bytes moved, which path
// they took and why. Any offset, size and buffer alignment is accepted; reading past the end
// of the file is not an error (the result says how many bytes there were).
#pragma once

#include <cstdint>
#include <future>
#include <memory>
#include <string>

#include "sluice/config.hpp"
#include "sluice/file.hpp"
#include "sluice/path.hpp"

namespace sluice {

struct TransferResult {
  std::uint64_t bytes = 0;   ///< bytes moved (a read stops at the end of the file)
  Path path = Path::host;    ///< the path the bytes took
  std::string reason;        ///< why that path, and how ("O_DIRECT", "buffered: filesystem ...")
  double seconds = 0;        ///< wall time of the call
  std::uint64_t ios = 0;     ///< I/O requests issued
};

enum class SyncMode : std::uint8_t {
  none,  ///< return when the kernel has the data
  data,  ///< fdatasync before returning
  full,  ///< fsync before returning
};

struct TransferOptions {
  SyncMode sync = SyncMode::none;          ///< writes only
  std::shared_ptr<const Config> config{};  ///< null: the process-wide configuration
};

/// Reads up to `size` bytes at `offset` into `buf`. Returns fewer bytes only at the end of the
/// file. Throws an Error naming the file and range on failure, including a file truncated
/// while being read; on error the contents of `buf` are unspecified.
TransferResult read(const File& file, void* buf, std::uint64_t size, std::uint64_t offset,
                    const TransferOptions& options = {});

/// Writes `size` bytes from `buf` at `offset`, extending the file as needed.
TransferResult write(const File& file, const void* buf, std::uint64_t size,
                     std::uint64_t offset, const TransferOptions& options = {});

/// Asynchronous forms: run on the process thread pool. `file` and the buffer must stay valid
/// until the future is ready. Errors arrive through the future.
std::future<TransferResult> read_async(const File& file, void* buf, std::uint64_t size,
                                       std::uint64_t offset, TransferOptions options = {});
std::future<TransferResult> write_async(const File& file, const void* buf, std::uint64_t size,
                                        std::uint64_t offset, TransferOptions options = {});

}  // namespace sluice
