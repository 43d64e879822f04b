// XXH3-64 (seed 0) of bytes as they are in memory, for the checksums of loaded tensors
// (LoadedTensors::xxh3) and of ingested samples (Batch::xxh3): device memory is copied back to
// the host in pieces of at most 64 MiB to be hashed, host memory is hashed in place.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "sluice/device.hpp"

namespace sluice::detail {

class MemoryHash {
 public:
  /// `device`: the device whose memory the bytes are in; null for host memory.
  explicit MemoryHash(Device* device);
  ~MemoryHash();
  MemoryHash(const MemoryHash&) = delete;
  MemoryHash& operator=(const MemoryHash&) = delete;
  /// Adds `size` bytes at `p` to the hash.
  void update(const void* p, std::uint64_t size);
  [[nodiscard]] std::uint64_t digest() const;

 private:
  struct State;  // xxhash's, inlined in memory_hash.cpp only
  Device* device_;
  std::unique_ptr<State> state_;
  std::vector<std::byte> host_;
};

}  // namespace sluice::detail
