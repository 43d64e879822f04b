// Reading each byte once across many ranks: the fan-out planner.
//
// When N ranks each need the same checkpoint (replicas) or overlapping parts of it (tensor
// parallelism), reading it N times multiplies the load on shared storage by N. plan_fanout
// decides, without any I/O, which single rank reads each needed byte range (once per node, or
// once per job) and which moves then bring the bytes to every other rank that needs them. Every
// rank computes the same plan from the same inputs, so no rank has to send the plan to another.
// Executing the plan (reads, torch.distributed or MPI collectives) is not part of this header;
// docs/scale.md says what exists and what does not yet.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/export.hpp"
#include "sluice/formats.hpp"
#include "sluice/units.hpp"

namespace sluice {

class Checkpoint;

/// Where "once" holds.
enum class FanoutScope : std::uint8_t {
  node,  ///< each node reads every byte its ranks need once and fans it out inside the node
  job,   ///< the job reads every needed byte once and fans it out across nodes
};

[[nodiscard]] SLUICE_API std::string_view to_string(FanoutScope s) noexcept;
/// "node" or "job"; anything else is a usage Error.
[[nodiscard]] SLUICE_API FanoutScope parse_fanout_scope(std::string_view text);

/// A byte range: `size` bytes from `offset` (relative to what it belongs to).
struct ByteRange {
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  friend bool operator==(const ByteRange&, const ByteRange&) = default;
};

/// One tensor that ranks may need: its bytes are `bytes` bytes at `offset` of file `file_index`.
struct FanoutItem {
  std::string name;
  std::size_t file_index = 0;
  std::uint64_t offset = 0;  ///< absolute offset of its first byte in the file
  std::uint64_t bytes = 0;
};

/// The checkpoint's tensors as fan-out items, in Checkpoint::tensors() order.
[[nodiscard]] SLUICE_API std::vector<FanoutItem> fanout_items(const Checkpoint& checkpoint);

/// Part of one item a rank needs: byte ranges relative to the item's first byte.
struct FanoutNeed {
  std::size_t item = 0;  ///< index into FanoutInput::items
  std::vector<ByteRange> ranges;
};

/// One rank: its id, its node, and what it needs.
struct FanoutRank {
  unsigned rank = 0;       ///< 0 .. ranks.size()-1, each id once
  unsigned node = 0;       ///< 0 .. FanoutInput::nodes-1
  bool everything = true;  ///< needs every item whole (a replica); `needs` must then be empty
  std::vector<FanoutNeed> needs;  ///< with everything = false: the parts it needs (may overlap)
};

struct FanoutInput {
  std::vector<FanoutItem> items;
  std::vector<FanoutRank> ranks;  ///< in any order: the plan does not depend on it
  unsigned nodes = 1;
  FanoutScope scope = FanoutScope::node;
  /// Largest read and move: larger ranges are cut into chunks of at most this many bytes, so
  /// that reading chunk k+1 can overlap moving chunk k, and staging stays bounded.
  std::uint64_t exchange_budget = 64 * MiB;
  /// With scope node: plan only this node's reads and moves (the same as those of the whole
  /// plan), at the cost of the node's ranks rather than the job's. A rank needs only its own
  /// node's part, and planning all 1,250 nodes of a 10,000-rank job takes seconds (docs/scale.md).
  /// unique_bytes and read_bytes then count this node only; other ranks' bytes are 0.
  /// A usage Error with scope job or a node not below `nodes`.
  std::optional<unsigned> only_node{};
};

/// One read from storage: `size` bytes at `offset` of item `item` (file offset
/// `file_offset` of file `file_index`), by rank `reader`, for scope group `group` (the node id
/// with scope node, 0 with scope job).
struct FanoutRead {
  std::size_t item = 0;
  std::size_t file_index = 0;
  std::uint64_t offset = 0;
  std::uint64_t file_offset = 0;
  std::uint64_t size = 0;
  unsigned reader = 0;
  unsigned group = 0;
};

enum class FanoutMoveKind : std::uint8_t {
  send,       ///< point-to-point: one receiver
  broadcast,  ///< from the reader to the group {source} + receivers
};

[[nodiscard]] SLUICE_API std::string_view to_string(FanoutMoveKind k) noexcept;

/// Brings the bytes of read `read` from its reader to every other rank of its group needing them.
struct FanoutMove {
  std::size_t read = 0;  ///< index into FanoutPlan::reads
  FanoutMoveKind kind = FanoutMoveKind::send;
  unsigned source = 0;              ///< the reader
  std::vector<unsigned> receivers;  ///< ascending rank ids, never the source
};

/// Per rank, by rank id.
struct FanoutRankBytes {
  std::uint64_t read = 0;      ///< bytes it reads from storage
  std::uint64_t sent = 0;      ///< bytes it is the source of, counted once per receiver
  std::uint64_t received = 0;  ///< bytes moved to it
};

struct FanoutPlan {
  /// Ordered by item, offset within the item, then group: file order, for the readers.
  std::vector<FanoutRead> reads;
  std::vector<FanoutMove> moves;       ///< at most one per read, in read order
  std::vector<FanoutRankBytes> ranks;  ///< indexed by rank id
  std::uint64_t unique_bytes = 0;      ///< bytes needed by at least one rank, each counted once
  std::uint64_t read_bytes = 0;        ///< bytes read from storage, summed over ranks
  /// read_bytes / unique_bytes (1.0 when nothing is needed): 1.0 with scope job, the number of
  /// nodes whose ranks need the bytes with scope node.
  [[nodiscard]] double amplification() const noexcept {
    return unique_bytes == 0 ? 1.0
                             : static_cast<double>(read_bytes) / static_cast<double>(unique_bytes);
  }
};

/// Decides the readers and moves. Every needed byte range is read by exactly one rank per scope
/// group: the ranges (cut into chunks of at most exchange_budget) are taken largest first (ties:
/// item, then offset) and each goes to the least-loaded rank of the group by bytes read (ties:
/// lowest rank id), except that the least-loaded rank that itself needs the range reads it when
/// its bytes read then stay within the group's ideal share plus its largest chunk, so the most
/// any rank reads is at most the ideal share plus one chunk. Throws a usage Error for a rank id
/// out of range or given twice, an unknown node, an unknown item, a range past an item's end, a
/// rank with `everything` and needs, or an exchange_budget of 0.
[[nodiscard]] SLUICE_API FanoutPlan plan_fanout(const FanoutInput& input);

/// Tensor-parallel slices of a row-major [rows, cols] tensor of `element_bytes`-byte elements,
/// split into `world` parts as evenly as possible (part p: [p*n/world, (p+1)*n/world) of n rows
/// or columns). A row slice is one range; a column slice one range per row. Empty parts give no
/// ranges. Throws a usage Error when world is 0 or part >= world.
[[nodiscard]] SLUICE_API std::vector<ByteRange> row_slice_ranges(std::uint64_t rows,
                                                                 std::uint64_t cols,
                                                                 std::uint64_t element_bytes,
                                                                 unsigned part, unsigned world);
[[nodiscard]] SLUICE_API std::vector<ByteRange> column_slice_ranges(std::uint64_t rows,
                                                                    std::uint64_t cols,
                                                                    std::uint64_t element_bytes,
                                                                    unsigned part, unsigned world);
/// The same for a checkpoint tensor: it must be 2-d, C-ordered, with whole-byte elements;
/// otherwise a usage Error naming it.
[[nodiscard]] SLUICE_API std::vector<ByteRange> row_slice_ranges(const TensorInfo& tensor,
                                                                 unsigned part, unsigned world);
[[nodiscard]] SLUICE_API std::vector<ByteRange> column_slice_ranges(const TensorInfo& tensor,
                                                                    unsigned part, unsigned world);

}  // namespace sluice
