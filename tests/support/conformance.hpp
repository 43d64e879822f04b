// The host-path conformance checks: every engine, filesystem and configuration shape must give
// the bytes plain pread/pwrite give. Each check creates its files in `dir`, reports through
// gtest assertions, and stops at the first failing case so one bug does not flood the log.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "sluice/config.hpp"

namespace sluice::test::conformance {

using ConfigPtr = std::shared_ptr<const Config>;

/// Reads at a grid of offsets, sizes (0 .. several MiB) and buffer alignments.
void reads_match_pread(const std::string& dir, const ConfigPtr& cfg, std::uint64_t seed);
/// Reads at random offsets, sizes and alignments, some past the end of the file.
void random_reads(const std::string& dir, const ConfigPtr& cfg, std::uint64_t seed, int rounds);
/// Writes at a grid of offsets, sizes and alignments over an existing file; each write is
/// checked with pread and read back through the library.
void writes_then_reads(const std::string& dir, const ConfigPtr& cfg, std::uint64_t seed);
/// Reads that reach or start past the end of the file return the bytes there were, or 0.
void read_past_eof(const std::string& dir, const ConfigPtr& cfg, std::uint64_t seed);
/// Writes past the end extend the file (with zeros in any gap).
void write_extends_file(const std::string& dir, const ConfigPtr& cfg, std::uint64_t seed);
/// read_async / write_async: several in flight at once on one file, errors through the future.
void async_round_trip(const std::string& dir, const ConfigPtr& cfg, std::uint64_t seed);
/// Writes with SyncMode::data and SyncMode::full return only when synced, with the same bytes.
void synced_writes(const std::string& dir, const ConfigPtr& cfg, std::uint64_t seed);
/// Every result names the host path and a reason that matches what the file allows.
void path_and_reason(const std::string& dir, const ConfigPtr& cfg, std::uint64_t seed);

}  // namespace sluice::test::conformance
