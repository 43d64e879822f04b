#pragma once

#include "sluice/device.hpp"
#include "sluice/staging_pool.hpp"
#include "sluice/transfer.hpp"

namespace sluice::detail {

/// The bounce path: O_DIRECT reads into the device's pinned staging pool, each filled buffer
/// copied to the device asynchronously while the next reads are in flight; the reverse for writes.
TransferResult bounce_transfer(IoOp op, const File& file, std::byte* dev, std::uint64_t size,
                               std::uint64_t offset, Device& device, const Config& cfg);

/// The posix path: pread into pageable memory, then a synchronous copy, one piece at a time.
/// The naive baseline, kept to measure what the pipeline buys.
TransferResult posix_transfer(IoOp op, const File& file, std::byte* dev, std::uint64_t size,
                              std::uint64_t offset, Device& device, const Config& cfg);

/// The direct path: cuFileRead/cuFileWrite. When cuFile refuses at run time with a capability
/// error (not an I/O error), returns nullopt and sets `refusal` and `refusal_code` (the
/// CUfileOpError), so auto can fall back and strict direct can fail with cuFile's own code.
std::optional<TransferResult> direct_transfer(IoOp op, const File& file, std::byte* dev,
                                              std::uint64_t size, std::uint64_t offset,
                                              const Config& cfg, std::string* refusal,
                                              int* refusal_code);

/// The pinned staging pool of `device` (bounce_buffers x bounce_buffer_size from the
/// configuration at first use), allocated once and kept for the life of the process.
StagingPool& pinned_pool(Device& device);

}  // namespace sluice::detail
