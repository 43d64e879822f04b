// Transfers on a CU_FILE_HANDLE_TYPE_USERSPACE_FS handle: the caller's file system moves the
// bytes through its CUfileFSOps_t read/write operations, as NVIDIA's library has it do. Those
// operations are handed host memory: the caller's buffer where it is host memory, else a pinned
// staging buffer of the driver's device that is copied to or from device memory chunk by chunk
// (Sluice has no RDMA to give a file system device memory it could write to itself; the RDMA
// info passed is empty, version 0 and no descriptor). An operation returns bytes moved, 0 at the
// end of the file, or -1 with errno (or -errno); it is called again for the rest of a short
// transfer, as pread would be.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

#include "io.hpp"
#include "log.hpp"
#include "sluice/device.hpp"
#include "state.hpp"

namespace sluice::capi {
namespace {

constexpr std::size_t kStagingBytes = 4 << 20;

struct Moved {
  std::uint64_t bytes = 0;
  int err_no = 0;  // set when the operation failed
};

// Calls the operation until `size` bytes have moved, it reports the end of the file, or it fails.
Moved call(const Handle& h, bool write, char* p, std::size_t size, std::uint64_t offset) {
  const cufileRDMAInfo_t no_rdma{0, 0, ""};
  Moved m;
  while (m.bytes < size) {
    const auto at = static_cast<sluice_cufile_loff_t>(offset + m.bytes);
    const std::size_t want = size - m.bytes;
    errno = 0;
    const ssize_t n = write ? h.fs_ops->write(h.user_handle, p + m.bytes, want, at, &no_rdma)
                            : h.fs_ops->read(h.user_handle, p + m.bytes, want, at, &no_rdma);
    if (n < 0) {
      m.err_no = n == -1 ? (errno != 0 ? errno : EIO) : static_cast<int>(-n);
      return m;
    }
    if (n == 0 || static_cast<std::size_t>(n) > want) break;  // the end (or a confused callee)
    m.bytes += static_cast<std::uint64_t>(n);
  }
  return m;
}

// Device memory through a pinned staging buffer, one chunk at a time.
Moved staged(const Handle& h, const IoRequest& r, std::byte* buf, Device& dev) {
  const std::size_t chunk = std::min(r.size, kStagingBytes);
  const std::unique_ptr<void, std::function<void(void*)>> staging(
      dev.alloc_pinned(chunk), [&dev](void* p) { dev.free_pinned(p); });
  auto* host = static_cast<char*>(staging.get());
  Moved total;
  for (std::uint64_t pos = 0; pos < r.size;) {
    const std::size_t n = std::min<std::uint64_t>(chunk, r.size - pos);
    const auto offset = static_cast<std::uint64_t>(r.file_offset) + pos;
    if (r.write) {
      dev.copy_to_host_async(host, buf + pos, n, nullptr);
      dev.synchronize(nullptr);
    }
    const Moved m = call(h, r.write, host, n, offset);
    if (!r.write && m.bytes > 0) {
      dev.copy_to_device_async(buf + pos, host, m.bytes, nullptr);
      dev.synchronize(nullptr);
    }
    total.bytes += m.bytes;
    if (m.err_no != 0) return {total.bytes, m.err_no};
    if (m.bytes < n) break;
    pos += n;
  }
  return total;
}

}  // namespace

IoOutcome run_user_fs(const Handle& h, const IoRequest& r, std::byte* buf, MemoryKind kind,
                      Device& dev, std::string_view api) {
  if (r.write ? h.fs_ops->write == nullptr : h.fs_ops->read == nullptr) {
    log(LogLevel::info, "{}: {} has no {} operation", api, h.name, r.write ? "write" : "read");
    return {-static_cast<ssize_t>(CU_FILE_IO_NOT_SUPPORTED), 0};
  }
  const auto t0 = std::chrono::steady_clock::now();
  const Moved m = kind == MemoryKind::device
                      ? staged(h, r, buf, dev)
                      : call(h, r.write, reinterpret_cast<char*>(buf), r.size,
                             static_cast<std::uint64_t>(r.file_offset));
  const auto us = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0)
          .count());
  if (m.err_no != 0) {
    log(LogLevel::info, "{}(handle {}, {}, {} bytes at {}) failed: errno {} after {} bytes", api,
        h.id, h.name, r.size, r.file_offset, m.err_no, m.bytes);
    return {-1, m.err_no};
  }
  if (r.counted) count_transfer(r.write, true, m.bytes, us, Path::posix, false);
  log(LogLevel::info,
      "{}(handle {}, {}, {} bytes at {}, {} memory) = {} via the file system's {}{} in {} us", api,
      h.id, h.name, r.size, r.file_offset, to_string(kind), m.bytes, r.write ? "write" : "read",
      kind == MemoryKind::device ? " through pinned staging" : "", us);
  return {static_cast<ssize_t>(m.bytes), 0};
}

}  // namespace sluice::capi
