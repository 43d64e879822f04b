// Training ingestion: datasets of samples (Megatron/NeMo indexed datasets, WebDataset tar
// shards, .npy shards), the order an epoch visits them in, and a Loader that streams shuffled,
// sharded, resumable batches into device (or host) memory and measures how long the consumer
// waited for each. docs/ingest.md has the formats, the order and resume rules and the pipeline.
//
// The order of an epoch depends only on (seed, epoch, dataset size): not on world size,
// threads, prefetch depth or timing. Global step s of an epoch covers positions
// [start + s*B*W, start + (s+1)*B*W) of that order (B batch size, W world size, start the
// position the run began or resumed at); rank r takes the r-th B of them. A LoaderState counts
// the positions consumed by all ranks together, so a run resumed with another world size
// continues the same global order: no sample of the epoch twice, none skipped.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/config.hpp"
#include "sluice/device.hpp"
#include "sluice/dtype.hpp"
#include "sluice/export.hpp"
#include "sluice/file.hpp"
#include "sluice/load.hpp"
#include "sluice/path.hpp"
#include "sluice/units.hpp"

namespace sluice {

/// The formats a Dataset opens (docs/ingest.md, "Formats").
enum class DatasetFormat : std::uint8_t {
  megatron,    ///< Megatron/NeMo indexed datasets: PREFIX.bin + PREFIX.idx
  webdataset,  ///< WebDataset .tar shards
  npy,         ///< .npy shards of one dtype and row shape
};

/// "megatron", "wds", "npy".
[[nodiscard]] SLUICE_API std::string_view to_string(DatasetFormat f) noexcept;
/// "megatron", "wds" or "webdataset", "npy"; nullopt for anything else.
[[nodiscard]] SLUICE_API std::optional<DatasetFormat> parse_dataset_format(
    std::string_view name) noexcept;

struct DatasetOptions {
  /// Unset: told by the paths (".tar" WebDataset, ".npy" npy, anything else a Megatron prefix).
  std::optional<DatasetFormat> format{};
  /// Megatron: sample k is tokens [k*L, k*L + L] of the concatenated token stream (L + 1
  /// tokens). Required (> 0) for Megatron, refused for the other formats.
  std::uint64_t seq_len = 0;
};

/// One piece of a sample: `size` bytes at `offset` of the dataset's file `file`.
struct SampleExtent {
  std::uint32_t file = 0;  ///< index for Dataset::file()
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
};

/// The element type and shape every sample of a dataset shares (Megatron: [L + 1] tokens of the
/// index's dtype; npy: the row shape of the shards).
struct SampleShape {
  DType dtype = DType::u8;
  std::vector<std::uint64_t> shape;
};

/// Samples in files, every header and index checked when opened: a bad file fails at open, with
/// an Error naming the file and the field, before anything is read for a batch. Immutable once
/// open; safe to use from many threads.
class SLUICE_API Dataset {
 public:
  /// Opens the paths as one dataset, in the order given: Megatron prefixes (PREFIX, PREFIX.bin
  /// or PREFIX.idx), WebDataset .tar shards, or .npy shards of one dtype and row shape. Throws
  /// an Error (domain data) naming the file and the field for a file that breaks its format, and
  /// a usage Error for bad paths or options (none, two formats, seq_len missing or misplaced).
  [[nodiscard]] static std::shared_ptr<const Dataset> open(std::span<const std::string> paths,
                                                           const DatasetOptions& options = {});

  virtual ~Dataset() = default;
  [[nodiscard]] virtual DatasetFormat format() const noexcept = 0;
  /// Number of samples.
  [[nodiscard]] virtual std::uint64_t size() const noexcept = 0;
  /// Bytes of sample k (the sum of its extents' sizes).
  [[nodiscard]] virtual std::uint64_t sample_bytes(std::uint64_t k) const = 0;
  /// Appends sample k's extents to `out`, in the order its bytes are concatenated (Megatron: the
  /// pieces of the sequences it spans, merged where they lie back to back in the .bin;
  /// WebDataset: its members in tar order, empty ones included; npy: one row). k < size(), else
  /// a usage Error (as for sample_bytes and sample_id).
  virtual void extents(std::uint64_t k, std::vector<SampleExtent>& out) const = 0;
  /// WebDataset: appends the field of each of sample k's members ("jpg", "cls", "seg.png": the
  /// name after the key's dot), one per extent, in tar order. Other formats append nothing.
  virtual void fields(std::uint64_t k, std::vector<std::string>& out) const;
  /// The sample's id in --emit files: "SHARD/KEY" for WebDataset, the decimal index otherwise.
  [[nodiscard]] virtual std::string sample_id(std::uint64_t k) const = 0;
  /// The shape every sample has; nullopt for WebDataset, whose samples vary.
  [[nodiscard]] virtual std::optional<SampleShape> sample_shape() const = 0;
  /// Files the extents number: Megatron prefix i's .bin, or shard i.
  [[nodiscard]] virtual std::size_t file_count() const noexcept = 0;
  /// File `index` (< file_count(), else a usage Error), open for reading.
  [[nodiscard]] virtual const File& file(std::size_t index) const = 0;
  /// A hash of everything that decides the samples (format, seq_len, each file's base name and
  /// size, the index contents: Megatron .idx bytes, the tar member table, the npy headers): a
  /// LoaderState saved for other data is refused by it. Moving the files keeps it.
  [[nodiscard]] virtual std::uint64_t fingerprint() const noexcept = 0;
  /// One line for people: "megatron: 2 prefixes, 81,920 sequences, 1.0 GiB of u16 tokens,
  /// 245,759 samples of 2049 tokens".
  [[nodiscard]] virtual std::string describe() const = 0;
};

/// The order of one epoch: a permutation of [0, n) that depends only on (n, seed, epoch), or the
/// identity with shuffle off. Any position is computed on its own in O(1) time and memory (a
/// keyed bijection), so a resumed run neither replays nor stores the order.
class SLUICE_API SampleOrder {
 public:
  SampleOrder(std::uint64_t n, std::uint64_t seed, std::uint64_t epoch, bool shuffle);
  /// The sample at `position` (< size()).
  [[nodiscard]] std::uint64_t operator[](std::uint64_t position) const;
  [[nodiscard]] std::uint64_t size() const noexcept { return n_; }

 private:
  std::uint64_t n_ = 0;
  std::uint64_t key_ = 0;
  bool shuffle_ = true;
};

/// Where a run stands: enough to continue it exactly. The same on every rank.
struct LoaderState {
  std::uint64_t seed = 0;
  bool shuffle = true;
  std::uint64_t epoch = 0;
  /// Positions of the epoch's order consumed by all ranks together (global steps x B x W).
  std::uint64_t consumed = 0;
  std::uint64_t fingerprint = 0;  ///< Dataset::fingerprint() of the data it was saved for

  /// {"format": "sluice-loader-state", "version": 1, "seed": ..., ...}
  [[nodiscard]] SLUICE_API std::string to_json() const;
  /// Throws a usage Error naming the field on a malformed or foreign state.
  [[nodiscard]] SLUICE_API static LoaderState from_json(std::string_view json);
};

struct IngestOptions {
  std::uint64_t batch_size = 0;  ///< B, samples per rank per step (required)
  std::uint64_t seed = 0;
  bool shuffle = true;
  /// Drop the tail of an epoch that does not fill a global batch (stats().dropped says how many
  /// samples). Without it the last global batch is short: rank r takes its r-th B of what is
  /// left, so some ranks may get a short batch or none.
  bool drop_last = true;
  unsigned rank = 0;
  unsigned world = 1;
  std::uint64_t epoch = 0;  ///< the first epoch
  LoadTarget target = LoadTarget::device;
  std::shared_ptr<Device> device{};          ///< required for the device and pinned targets
  std::optional<Path> path{};                ///< as TransferOptions::path (unset: configuration)
  std::shared_ptr<const Config> config{};    ///< null: the process-wide configuration
  /// Batches whose reads may be in flight ahead of the consumer.
  unsigned prefetch = 4;
  /// Every byte the Loader holds at once: batch buffers (those the consumer holds included)
  /// and staging. A batch that cannot fit alone is an Error naming its size; otherwise
  /// prefetch shrinks to what fits, and next() waits while the consumer's batches fill it.
  std::uint64_t memory_budget = 1 * GiB;
};

/// One field of a batch: for a fixed-shape dataset the only one ("tokens" for Megatron, "data"
/// for npy); for WebDataset one per member field, each sample's member packed back to back.
struct BatchField {
  std::string name;
  std::uint64_t offset = 0;  ///< of the field's bytes in Batch::data()
  /// batch size + 1 entries: sample i's bytes are [offsets[i], offsets[i+1]) from `offset`
  /// (a sample without the field has an empty range).
  std::vector<std::uint64_t> offsets;
};

namespace detail {
struct BatchLease;
}

/// One rank's batch of one step: a lease on memory of the Loader's, handed back when the last
/// copy of this Batch is gone (it may outlive the Loader).
class SLUICE_API Batch {
 public:
  [[nodiscard]] std::uint64_t epoch() const noexcept;
  [[nodiscard]] std::uint64_t step() const noexcept;
  [[nodiscard]] unsigned rank() const noexcept;
  /// Dataset indices of its samples, in batch order (fewer than B only in a short last batch).
  [[nodiscard]] std::span<const std::uint64_t> samples() const noexcept;
  /// Its bytes in the target's memory (device memory for LoadTarget::device).
  [[nodiscard]] void* data() const noexcept;
  [[nodiscard]] std::uint64_t bytes() const noexcept;
  /// [samples, *sample shape] for fixed-shape datasets; nullopt for WebDataset.
  [[nodiscard]] std::optional<SampleShape> shape() const;
  [[nodiscard]] std::span<const BatchField> fields() const noexcept;
  /// XXH3-64 (seed 0) of sample i's bytes as they are in memory: its fields' pieces in the
  /// sample's tar order for WebDataset (device memory is copied back to be hashed).
  [[nodiscard]] std::uint64_t xxh3(std::size_t i) const;

 private:
  friend class Loader;
  std::shared_ptr<const detail::BatchLease> lease_;
};

/// Figures of the steps consumed so far (since the Loader was made or restored).
struct IngestStats {
  std::uint64_t steps = 0;
  std::uint64_t samples = 0;
  std::uint64_t bytes = 0;
  std::uint64_t dropped = 0;      ///< samples drop_last left out of the last epoch that ended
  double wall_seconds = 0;        ///< from the first next() to the last batch handed out
  double wait_seconds = 0;        ///< time the consumer spent inside next()
  double wait_p50_seconds = 0;
  double wait_p99_seconds = 0;
  double stall_fraction = 0;      ///< wait_seconds / wall_seconds
  double samples_per_second = 0;
  double bytes_per_second = 0;
  Path path = Path::host;         ///< the path the batches' reads took
  std::string reason;             ///< and why (bytes per path when they differ)
  /// When the consumer waited: the likely cause in the doctor's words ("queue_depth",
  /// "device_limit", "cpu_bound", "memory_budget", "throttled") with its evidence; empty if not.
  std::string stall_cause;
};

/// Streams one rank's batches of a Dataset, epoch after epoch, reading ahead.
class SLUICE_API Loader {
 public:
  /// Throws a usage Error on bad options (batch_size 0, rank >= world, a target without its
  /// device, a fixed-shape batch larger than the budget).
  Loader(std::shared_ptr<const Dataset> dataset, IngestOptions options);
  /// Waits for the reads in flight; batches the consumer still holds stay valid.
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  /// This rank's next batch, or nullopt once the epoch is over (then set_epoch() starts
  /// another). Throws the Error of a failed read, naming file and range.
  [[nodiscard]] std::optional<Batch> next();
  /// Where the run stands after the batches next() has handed out.
  [[nodiscard]] LoaderState state() const;
  /// Continues from `state`: the next batch is the one an uninterrupted run would have handed
  /// out next, for this Loader's world size. Refuses (usage Error) a state of other data
  /// (fingerprint) and one past the end of its epoch.
  void restore(const LoaderState& state);
  /// Starts epoch `epoch` from its first position (discarding reads ahead).
  void set_epoch(std::uint64_t epoch);
  [[nodiscard]] std::uint64_t epoch() const noexcept;
  /// Steps this rank takes in an epoch started at position 0 with these options.
  [[nodiscard]] std::uint64_t steps_per_epoch() const noexcept;
  [[nodiscard]] IngestStats stats() const;
  /// Bytes of the budget in use now: batch buffers handed out (to the consumer, or queued for
  /// it) plus staging of the batches in flight. 0 once every batch is dropped and nothing is
  /// read ahead.
  [[nodiscard]] std::uint64_t memory_in_use() const noexcept;
  /// The most memory_in_use() has been at once.
  [[nodiscard]] std::uint64_t memory_high_water() const noexcept;
  /// The regions allocated once when the Loader was made (staging and batch buffers), which
  /// memory_in_use() is handed out from: at most memory_budget.
  [[nodiscard]] std::uint64_t memory_reserved() const noexcept;
  [[nodiscard]] const Dataset& dataset() const noexcept;

 private:
  struct SLUICE_LOCAL Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sluice
