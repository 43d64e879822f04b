// Internal helpers of the doctor's measuring half (src/doctor/facts.cpp, measure.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sluice/device.hpp"

namespace sluice::doctor::detail {

/// NUMA nodes sysfs shows (1 when it shows none).
[[nodiscard]] unsigned numa_nodes();
/// CPUs this process may run on.
[[nodiscard]] unsigned usable_cpus();
/// "major:minor" of the device holding `path` (the device itself for a block device).
[[nodiscard]] std::string devno_of_file(const std::string& path);
/// Whether `path` exists and has at least `end` bytes (block devices: always).
[[nodiscard]] bool file_covers(const std::string& path, std::uint64_t end);
/// Size of a regular file or block device in bytes; 0 when it cannot be told.
[[nodiscard]] std::uint64_t file_size(const std::string& path);
/// Busy and total jiffies of all CPUs so far (/proc/stat), to tell how busy the machine was.
struct CpuTimes {
  std::uint64_t busy = 0, total = 0;
};
[[nodiscard]] CpuTimes cpu_times();
/// Bytes read from the block device `devno` ("major:minor") so far: /proc/diskstats' sectors
/// read, counted as reads complete. nullopt where it is not listed (tmpfs, a network share).
[[nodiscard]] std::optional<std::uint64_t> device_read_bytes(const std::string& devno);
/// Bytes this process had read from storage so far (/proc/self/io read_bytes, counted as its
/// threads submit reads, O_DIRECT and readahead alike); nullopt without task I/O accounting.
[[nodiscard]] std::optional<std::uint64_t> own_read_bytes();
/// memcpy bandwidth of one thread in GiB/s: the best copy seen in about `seconds`.
[[nodiscard]] double memory_gib_s(double seconds);
/// Pinned host-to-device copy bandwidth in GiB/s on `device` ("sim", "cuda:0"), measured for about
/// `seconds`.
[[nodiscard]] double h2d_gib_s(const std::string& device, double seconds);

}  // namespace sluice::doctor::detail
