#pragma once

#include "sluice/transfer.hpp"

namespace sluice::detail {

/// The host path: file <-> host memory through the I/O engine, O_DIRECT where the file has it.
TransferResult host_read(const File& file, void* buf, std::uint64_t size, std::uint64_t offset,
                         const Config& cfg);
TransferResult host_write(const File& file, const void* buf, std::uint64_t size,
                          std::uint64_t offset, const Config& cfg);

}  // namespace sluice::detail
