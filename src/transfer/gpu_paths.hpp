#pragma once

#include "sluice/device.hpp"
#include "sluice/staging_pool.hpp"
#include "sluice/stats.hpp"
#include "sluice/transfer.hpp"

namespace sluice::detail {

/// The bounce path: O_DIRECT reads into the device's pinned staging pool, each filled buffer
/// copied to the device asynchronously while the next reads are in flight; the reverse for writes.
TransferResult bounce_transfer(IoOp op, const File& file, std::byte* dev, std::uint64_t size,
                               std::uint64_t offset, const std::shared_ptr<Device>& device,
                               const Config& cfg);

/// The posix path: pread into pageable memory, then a synchronous copy, one piece at a time.
/// The naive baseline, kept to measure what the pipeline buys.
TransferResult posix_transfer(IoOp op, const File& file, std::byte* dev, std::uint64_t size,
                              std::uint64_t offset, const std::shared_ptr<Device>& device,
                              const Config& cfg);

/// Why cuFile refused a request before moving a byte.
struct DirectRefusal {
  std::string why;
  int code = 0;             ///< the CUfileOpError
  Fallback kind = Fallback::handle_refused;  ///< handle_refused or io_refused
};

/// The direct path: cuFileRead/cuFileWrite. When cuFile refuses at run time with a capability
/// error (not an I/O error), returns nullopt and fills `refusal`, so auto can fall back and
/// strict direct can fail with cuFile's own code.
std::optional<TransferResult> direct_transfer(IoOp op, const File& file, std::byte* dev,
                                              std::uint64_t size, std::uint64_t offset,
                                              const Config& cfg, DirectRefusal* refusal);

/// The pinned staging pool of `device` (bounce_buffers x bounce_buffer_size from the
/// configuration at first use), allocated once and kept for the life of the process.
StagingPool& pinned_pool(Device& device);

}  // namespace sluice::detail
