#include "sluice/transfer.hpp"

#include <unistd.h>

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

}  // namespace

TransferResult read(const File& file, void* buf, std::uint64_t size, std::uint64_t offset,
                    const TransferOptions& options) {
  return detail::host_read(file, buf, size, offset, *effective(options));
}

TransferResult write(const File& file, const void* buf, std::uint64_t size, std::uint64_t offset,
                     const TransferOptions& options) {
  TransferResult r = detail::host_write(file, buf, size, offset, *effective(options));
  sync_file(file, options.sync, offset, size);
  return r;
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

}  // namespace sluice
