// Page-aligned host memory for staging and simulated device memory: 2 MiB aligned, backed by
// transparent huge pages where the kernel allows (madvise), and populated up front. Fewer,
// larger physical segments per I/O matter: a 1 MiB O_DIRECT read into 4 KiB pages carries 256
// scatter-gather entries, more than many devices take in one request (virtio-blk: 254), and
// was measured at half the throughput of the same read into huge pages (bench/host-vs-fio.sh).
#pragma once

#include <cstddef>

namespace sluice {

/// Maps `bytes` (rounded up to 4 KiB) of zeroed, populated memory. Throws an Error on failure.
[[nodiscard]] void* map_host_memory(std::size_t bytes);
/// Unmaps memory from map_host_memory; `bytes` as given there.
void unmap_host_memory(void* p, std::size_t bytes) noexcept;

}  // namespace sluice
