// What a Batch holds: its description and a lease on the piece of the Loader's batch arena its
// bytes live in, handed back when the last Batch copy goes (after the Loader, possibly).
#pragma once

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "arena.hpp"
#include "sluice/ingest.hpp"

namespace sluice::detail {

struct BatchLease {
  std::uint64_t epoch = 0;
  std::uint64_t step = 0;
  unsigned rank = 0;
  std::vector<std::uint64_t> samples;
  std::byte* data = nullptr;
  std::uint64_t bytes = 0;
  std::optional<SampleShape> sample_shape;  ///< of one sample; nullopt for WebDataset
  std::vector<BatchField> fields;
  std::vector<std::vector<std::pair<std::uint64_t, std::uint64_t>>> sample_pieces;  ///< WebDataset
  LoadTarget target = LoadTarget::pageable_host;
  std::shared_ptr<Device> device;
  std::shared_ptr<Arena> arena;
  std::uint64_t arena_offset = 0;
  std::uint64_t arena_bytes = 0;

  BatchLease() = default;
  BatchLease(const BatchLease&) = delete;
  BatchLease& operator=(const BatchLease&) = delete;
  ~BatchLease() {
    if (arena) arena->release(arena_offset, arena_bytes);
  }
};

}  // namespace sluice::detail
