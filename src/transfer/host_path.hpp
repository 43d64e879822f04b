#pragma once

#include "sluice/io_engine.hpp"
#include "sluice/transfer.hpp"

namespace sluice::detail {

/// Checks a request (open file of the right mode, no null buffer, no overflowing range) and
/// returns the bytes it covers: for reads, clamped to the file's current size.
std::uint64_t validate_request(IoOp op, const File& file, const void* buf, std::uint64_t size,
                               std::uint64_t offset);

/// The host path: file <-> host memory through the I/O engine, O_DIRECT where the file has it.
TransferResult host_read(const File& file, void* buf, std::uint64_t size, std::uint64_t offset,
                         const Config& cfg);
TransferResult host_write(const File& file, const void* buf, std::uint64_t size,
                          std::uint64_t offset, const Config& cfg);

}  // namespace sluice::detail
