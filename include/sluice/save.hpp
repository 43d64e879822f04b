// Saving tensors as safetensors files, and sharded checkpoints in the Hugging Face layout, from
// device, pinned or host memory.
//
// plan_safetensors() lays a file out exactly as the safetensors reference writer does: tensors
// sorted by descending dtype (the specification's order of dtypes, which is by alignment) and
// then by name, back to back after a compact JSON header that is padded with spaces to a
// multiple of 8 bytes. save_safetensors() writes that file through an AtomicFile (a temporary
// beside the final name, fdatasync, rename, fsync of the folder), the body through
// sluice::write_async, so each tensor's bytes take the path a transfer of that memory takes (the
// bounce pipeline or cuFile for device memory, O_DIRECT for host memory) and the result names the
// path and why. docs/save.md has the details.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sluice/config.hpp"
#include "sluice/device.hpp"
#include "sluice/dtype.hpp"
#include "sluice/export.hpp"
#include "sluice/path.hpp"
#include "sluice/transfer.hpp"
#include "sluice/units.hpp"

namespace sluice {

/// One tensor to save: what the header says of it and where its bytes are (C order, little
/// endian, as safetensors stores them).
struct SaveTensor {
  std::string name;
  DType dtype = DType::u8;              ///< any type with a safetensors name (not c128 or raw)
  std::vector<std::uint64_t> shape;     ///< empty for a 0-d scalar
  const void* data = nullptr;           ///< device memory of SaveOptions::device, pinned or host
  std::uint64_t bytes = 0;              ///< must be elements x bits / 8 (checked)
};

/// The `__metadata__` of a file: string to string. Written in key order (keys must be unique).
using SaveMetadata = std::vector<std::pair<std::string, std::string>>;

struct SaveOptions {
  /// The header's `__metadata__`; nullopt: none (an empty map is written as `{}`, as
  /// safetensors writes metadata={}).
  std::optional<SaveMetadata> metadata{};
  /// The GPU tensors may live on; null: every tensor is host memory. With a device, each
  /// tensor's memory kind decides its path, as for sluice::write.
  std::shared_ptr<Device> device{};
  std::optional<Path> path{};               ///< as TransferOptions::path (unset: configuration)
  std::shared_ptr<const Config> config{};   ///< null: the process-wide configuration
  std::uint64_t max_write = 64 * MiB;       ///< largest single write; larger tensors are cut
  /// Bytes of writes outstanding at once (always at least one write).
  std::uint64_t inflight_bytes = 256 * MiB;
  /// fdatasync before the rename and fsync of the folder after it. False: the rename stays
  /// atomic for readers, but the file may not survive a power cut.
  bool durable = true;
};

/// Where plan_safetensors() puts everything.
struct SafetensorsLayout {
  std::vector<std::byte> prefix;          ///< the first 8 + N bytes: length field and header
  std::vector<std::size_t> order;         ///< indexes into the tensors, in file order
  std::vector<std::uint64_t> offsets;     ///< absolute file offset of tensors[order[k]]
  std::uint64_t file_bytes = 0;
};

/// The layout of a safetensors file of `tensors` with `metadata`, byte for byte the reference
/// writer's. Throws a usage Error naming the tensor for a duplicate or empty name, the name
/// "__metadata__", a type safetensors has no name for, or a size that does not match the shape.
[[nodiscard]] SLUICE_API SafetensorsLayout plan_safetensors(
    std::span<const SaveTensor> tensors, const std::optional<SaveMetadata>& metadata = std::nullopt);

/// What a save did.
struct SaveResult {
  std::string path;                 ///< the final name
  std::uint64_t file_bytes = 0;
  std::uint64_t header_bytes = 0;   ///< N: the header's length after the 8-byte length field
  /// The body's writes: bytes, the path they took and why (the bytes per path when they took
  /// several), I/Os; seconds is the whole save's wall time, syncs and rename included.
  TransferResult transfer;
  double sync_seconds = 0;          ///< of which fdatasync, rename and folder fsync
};

/// Saves `tensors` as the safetensors file `path`, atomically and (with options.durable)
/// durably: the file under `path` is the previous one until the new one is complete and on
/// stable storage. On any error the temporary is removed and the previous file is untouched;
/// the Error names the file and, for a failed write, the range. Buffers must stay valid and
/// unchanged until it returns.
SLUICE_API SaveResult save_safetensors(const std::string& path, std::span<const SaveTensor> tensors,
                                       const SaveOptions& options = {});

// --- Sharded checkpoints: model-0000K-of-0000N.safetensors + model.safetensors.index.json ---

/// A tensor as the shard planner sees it: its name, its bytes, and the rank that holds it.
struct ShardEntry {
  std::string name;
  std::uint64_t bytes = 0;
  unsigned rank = 0;
};

struct ShardPlan {
  struct Shard {
    std::string file;                  ///< "model-00001-of-00003.safetensors", relative
    unsigned rank = 0;                 ///< the rank that writes it
    std::vector<std::string> tensors;  ///< in the order given
    std::uint64_t bytes = 0;
  };
  std::vector<Shard> shards;
  std::uint64_t total_bytes = 0;
  std::string prefix = "model";        ///< of every file name
  std::string index_file;              ///< "model.safetensors.index.json"; empty for one shard
};

/// Cuts the tensors into shards of at most `max_shard_bytes` as Hugging Face's
/// split_torch_state_dict_into_shards does: in the order given (rank by rank: a shard never
/// mixes ranks), a tensor joins the current shard unless that would take it past the limit; a
/// tensor larger than the limit gets a shard of its own. One shard in all is named
/// "<prefix>.safetensors" and needs no index. Every rank computes the same plan from the same
/// entries. Throws a usage Error for a duplicate name or max_shard_bytes 0.
[[nodiscard]] SLUICE_API ShardPlan plan_shards(std::span<const ShardEntry> tensors,
                                               std::uint64_t max_shard_bytes,
                                               std::string_view prefix = "model");

/// Removes the index of a checkpoint in `directory` (`plan.index_file`, or
/// "<prefix>.safetensors.index.json"), durably: the first step of a save into a folder that may
/// hold an older checkpoint, so that a save that dies halfway leaves a folder without an index
/// (recognisably incomplete) rather than an old index over a mix of old and new shards. Also
/// removes "<prefix>.safetensors" when the plan has an index. Returns whether anything was removed.
SLUICE_API bool begin_checkpoint(const std::string& directory, const ShardPlan& plan);

/// Saves the shards of `plan` that `rank` writes, each with save_safetensors (so each is durable
/// before this returns). `tensors` must hold at least every tensor of those shards (others are
/// ignored). Returns one SaveResult per shard written.
SLUICE_API std::vector<SaveResult> save_shards(const std::string& directory, const ShardPlan& plan,
                                               unsigned rank, std::span<const SaveTensor> tensors,
                                               const SaveOptions& options = {});

/// Writes the index of `plan` atomically and durably (indented JSON, keys sorted, as
/// huggingface_hub writes it: {"metadata": {"total_size": N}, "weight_map": {...}}), then removes
/// "<prefix>.safetensors" (a sharded plan) or the old index (a one-file plan), then shard files of
/// an older save with the same prefix that the plan does not name, generation-tagged ones
/// ("<prefix>-00001-of-00004-<8 hex>.safetensors") included. Call it once
/// every shard is durable (under MPI: on rank 0, after a barrier). Nothing to do for a plan of one
/// shard, but the removal.
SLUICE_API void finish_checkpoint(const std::string& directory, const ShardPlan& plan);

/// The whole sequence in one process: plan_shards (every tensor rank 0), begin_checkpoint,
/// save_shards, finish_checkpoint. Creates `directory` when missing.
SLUICE_API std::vector<SaveResult> save_checkpoint(const std::string& directory,
                                                   std::span<const SaveTensor> tensors,
                                                   std::uint64_t max_shard_bytes,
                                                   const SaveOptions& options = {});

}  // namespace sluice
