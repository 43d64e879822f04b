// Whether a load into pageable host memory views a private mapping of its files or reads into
// fresh memory (HostLoad, docs/paths.md "Loads into host memory"), and the mappings themselves.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sluice/file_mapping.hpp"
#include "sluice/load.hpp"

namespace sluice::detail {

/// The decision for a load: map, and why (or why not).
struct HostLoadChoice {
  bool mapped = false;
  std::string reason;
  bool all_cached = false;  ///< the probe found every page cached: no readahead to ask for
};

/// Decides for `plan` under `o` (any target: only pageable host targets without caller buffers
/// can map). Probes the page cache once per file of the plan under HostLoad::automatic. Throws a
/// usage Error when HostLoad::mapped is asked for and a file or tensor cannot be mapped.
[[nodiscard]] HostLoadChoice choose_host_load(const Checkpoint& cp, const LoadPlan& plan,
                                              const LoadOptions& o);

/// The plan's files mapped (one mapping per file, over the span of the plan's tensors in it,
/// populated where the cache holds it), indexed like the checkpoint's files (unmapped where the
/// plan has no tensor), and each tensor's address in them; tensors misaligned for their type are
/// copied into `copies`.
struct MappedFiles {
  std::vector<FileMapping> maps;
  std::optional<HostMapping> copies;
  std::vector<void*> data;  ///< per plan tensor
  std::uint64_t mapped_bytes = 0;
};
[[nodiscard]] MappedFiles map_plan(const Checkpoint& cp, const LoadPlan& plan, bool all_cached);

}  // namespace sluice::detail
