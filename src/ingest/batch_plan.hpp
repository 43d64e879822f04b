// What one rank's batch of one step is, before a byte is read: the positions of the epoch's
// order it covers (EpochSpan), and the reads that bring its samples into staging and where each
// piece of them goes in the batch (BatchPlan).
//
// Reads cover the samples' extents with ranges aligned for O_DIRECT, one per run of extents that
// lie close together in one file (at most `max_read` bytes each, so every read is one request
// for the engine's async I/O thread); staging holds them back to back, each at a page-aligned
// spot. The pieces then say which staging bytes land where in the batch: the gather.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sluice/ingest.hpp"

namespace sluice::detail {

/// The arithmetic of one rank's share of one epoch begun (or resumed) at position `start`.
struct EpochSpan {
  std::uint64_t n = 0;       ///< samples in the epoch's order
  std::uint64_t batch = 1;   ///< B
  std::uint64_t world = 1;   ///< W
  std::uint64_t rank = 0;
  std::uint64_t start = 0;   ///< first position of the run in this epoch
  bool drop_last = true;

  [[nodiscard]] std::uint64_t global() const noexcept { return batch * world; }
  /// Global steps from `start` to the end of the epoch (the short last one included without
  /// drop_last).
  [[nodiscard]] std::uint64_t steps() const noexcept;
  /// This rank's batches among them (without drop_last a rank may have none in the last step).
  [[nodiscard]] std::uint64_t rank_steps() const noexcept;
  /// This rank's positions [first, second) at step s (counted from start).
  [[nodiscard]] std::pair<std::uint64_t, std::uint64_t> positions(std::uint64_t s) const noexcept;
  /// Samples drop_last leaves out of the epoch.
  [[nodiscard]] std::uint64_t dropped() const noexcept;
  /// Positions consumed by all ranks after `taken` global steps.
  [[nodiscard]] std::uint64_t consumed_after(std::uint64_t taken) const noexcept;
  /// The step number of step 0 in the epoch's numbering: ceil(start / (B * W)).
  [[nodiscard]] std::uint64_t first_step_number() const noexcept;
};

struct PlannedRead {
  std::uint32_t file = 0;
  std::uint64_t offset = 0;
  std::uint64_t size = 0;     ///< what is asked for (aligned; may run past the end of the file)
  std::uint64_t needed = 0;   ///< bytes from `offset` the pieces use: less is a failed read
  std::uint64_t staging = 0;  ///< where it lands, from the batch's staging base
  std::size_t first_piece = 0;  ///< its pieces: [first_piece, first_piece + pieces) of BatchPlan::pieces
  std::size_t pieces = 0;
};

/// `size` bytes at staging offset `staging` belong at `dest` of the batch.
struct Piece {
  std::uint64_t staging = 0;
  std::uint64_t size = 0;
  std::uint64_t dest = 0;
};

struct BatchPlan {
  std::uint64_t epoch = 0;
  std::uint64_t step = 0;  ///< in the epoch's numbering
  std::vector<std::uint64_t> samples;
  std::vector<PlannedRead> reads;
  std::vector<Piece> pieces;
  std::uint64_t staging_bytes = 0;  ///< of the reads, laid out back to back
  std::uint64_t bytes = 0;          ///< of the batch
  std::vector<BatchField> fields;
  /// WebDataset: each sample's (dest, size) pieces in tar order; empty for fixed shapes.
  std::vector<std::vector<std::pair<std::uint64_t, std::uint64_t>>> sample_pieces;
};

/// Plans batches of one dataset. Not thread-safe (it reuses its scratch vectors).
class BatchPlanner {
 public:
  /// `max_read`: largest read (a multiple of every file's alignment).
  BatchPlanner(const Dataset& dataset, std::uint64_t max_read);
  /// Plans the batch of these samples (dataset indices, batch order).
  void plan(std::span<const std::uint64_t> samples, BatchPlan& out);
  /// O_DIRECT alignment of file `f` (1 where the file has no O_DIRECT).
  [[nodiscard]] std::uint64_t alignment(std::size_t f) const { return align_[f]; }
  [[nodiscard]] std::uint64_t max_alignment() const noexcept { return max_align_; }
  [[nodiscard]] std::uint64_t max_read() const noexcept { return max_read_; }

 private:
  void cover(const SampleExtent& e, std::uint64_t dest, BatchPlan& out);
  void plan_fixed(std::span<const std::uint64_t> samples, BatchPlan& out);
  void plan_fields(std::span<const std::uint64_t> samples, BatchPlan& out);  // WebDataset

  const Dataset& ds_;
  std::uint64_t max_read_;
  std::vector<std::uint64_t> align_;
  std::uint64_t max_align_ = 1;
  std::vector<SampleExtent> extents_;
  std::vector<std::string> names_;
};

}  // namespace sluice::detail
