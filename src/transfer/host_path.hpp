#pragma once

#include <chrono>

#include "sluice/io_engine.hpp"
#include "sluice/transfer.hpp"

namespace sluice::detail {

/// Checks a request (open file of the right mode, no null buffer, no overflowing range) and
/// returns the bytes it covers: for reads, clamped to the file's current size.
std::uint64_t validate_request(IoOp op, const File& file, const void* buf, std::uint64_t size,
                               std::uint64_t offset);

/// The host path: file <-> host memory through the I/O engine, O_DIRECT where the file has it.
/// `started`: when the caller began timing the transfer. A small read times itself from there
/// and sets `*from_started` (when given) to that time in ns, so that the caller can record it
/// without reading the clock again; other reads leave it alone.
TransferResult host_read(const File& file, void* buf, std::uint64_t size, std::uint64_t offset,
                         const Config& cfg,
                         std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now(),
                         std::uint64_t* from_started = nullptr);
TransferResult host_write(const File& file, const void* buf, std::uint64_t size,
                          std::uint64_t offset, const Config& cfg);

}  // namespace sluice::detail
