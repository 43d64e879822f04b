// Loading tensor files (safetensors, .npy, sharded checkpoints) into device or host memory.
//
// Checkpoint::open parses and checks every header first (formats.hpp), so a bad file fails
// before any memory is allocated. plan_load then decides, without touching a byte of data,
// which tensors this rank loads, where each one goes (an `alignment`-aligned offset in one
// allocation) and which reads bring them in: runs of tensors that lie back to back in a file
// and keep their alignment are read together, in reads of at most `max_read` bytes. load()
// issues those reads through sluice::read_async, so path choice, the workers that split large
// reads, and the path report are those of every other transfer; at most `inflight_bytes` of
// reads are outstanding at once. docs/load.md has the details.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "sluice/config.hpp"
#include "sluice/device.hpp"
#include "sluice/export.hpp"
#include "sluice/file.hpp"
#include "sluice/file_mapping.hpp"
#include "sluice/formats.hpp"
#include "sluice/host_memory.hpp"
#include "sluice/path.hpp"
#include "sluice/transfer.hpp"
#include "sluice/units.hpp"

namespace sluice {
namespace detail {
struct HostLoadChoice;
}  // namespace detail

class RemoteReader;

/// The tensor files of one model or data set, opened and with every header checked.
class SLUICE_API Checkpoint {
 public:
  /// Opens each path: a .safetensors or .npy file (told apart by their first bytes), a
  /// `*.index.json` of a sharded safetensors checkpoint (which opens the shards its weight_map
  /// names, relative to the index's folder), or a folder (its model.safetensors.index.json when
  /// there is one, else every .safetensors and .npy file in it, by name). Tensor names must be
  /// unique across all files. Throws an Error naming the file and field on any bad input.
  /// A path may be a URL (http://, https://, s3://; docs/remote.md) of a .safetensors or .npy
  /// object or of a `*.index.json` (its shards relative to the index's URL): its header comes by
  /// one ranged read of the first MiB (a second only for a larger header), and load() reads its
  /// tensors with a RemoteReader.
  [[nodiscard]] static Checkpoint open(std::span<const std::string> paths);

  Checkpoint() = default;
  Checkpoint(Checkpoint&&) noexcept = default;
  Checkpoint& operator=(Checkpoint&&) noexcept = default;

  [[nodiscard]] const std::vector<TensorFileLayout>& layouts() const noexcept { return layouts_; }
  /// Every tensor, file by file and by offset within a file; TensorInfo::file_index says which.
  [[nodiscard]] const std::vector<TensorInfo>& tensors() const noexcept { return tensors_; }
  [[nodiscard]] const TensorInfo* find(std::string_view name) const;
  /// find(), or a usage Error naming the tensor when there is none.
  [[nodiscard]] const TensorInfo& at(std::string_view name) const;
  /// The open file `index`; a usage Error for a remote one (see remote()).
  [[nodiscard]] const File& file(std::size_t index) const;
  /// The reader of file `index` when it is a URL, else null. Not thread-safe (one read at a time).
  [[nodiscard]] RemoteReader* remote(std::size_t index) const;
  [[nodiscard]] std::uint64_t total_bytes() const noexcept;

  /// A checkpoint of part of one tensor: elements [first, first + count) of tensor `name`, in
  /// the order they are stored, as a 1-d tensor of the same name and type in the same file.
  /// Loading it reads only those bytes: a shard of a tensor for tensor parallelism, or the
  /// smallest range that holds a slice (safe_open's get_slice in the Python package). Throws a
  /// usage Error for an unknown name, a range past the tensor's last element, or one that does
  /// not start and end on a byte (types of fewer than 8 bits per element: F4, F6_*).
  [[nodiscard]] Checkpoint part(std::string_view name, std::uint64_t first,
                                std::uint64_t count) const;

 private:
  void add(TensorFileLayout layout, std::unique_ptr<File> file,
           std::shared_ptr<RemoteReader> remote = nullptr);
  void index_tensors();

  std::vector<TensorFileLayout> layouts_;
  std::vector<std::unique_ptr<File>> files_;    ///< null for a remote file
  std::vector<std::shared_ptr<RemoteReader>> remotes_;  ///< null for a local file
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, std::size_t> by_name_;
};

/// Where loaded tensors live.
enum class LoadTarget : std::uint8_t {
  device,         ///< device memory of LoadOptions::device
  pinned_host,    ///< page-locked host memory of LoadOptions::device
  pageable_host,  ///< ordinary host memory (no device needed)
};

[[nodiscard]] SLUICE_API std::string_view to_string(LoadTarget t) noexcept;

/// How tensors reach pageable host memory (LoadTarget::pageable_host, no caller buffers).
enum class HostLoad : std::uint8_t {
  /// mapped where the page cache holds every byte of the tensors (a probe per file), the files
  /// are local, the configuration's cache_policy is not bypass, and LoadOptions::destination is
  /// unset; else read. docs/paths.md, "Loads into host
  /// memory".
  automatic,
  read,    ///< read into fresh memory (a copy the caller owns)
  /// tensors view a private, copy-on-write mapping of the file (what safetensors does): no
  /// copy, writes stay in this process. A tensor whose file offset is misaligned for its type
  /// is copied into fresh memory instead. A file with no descriptor (remote) is a usage Error.
  mapped,
};

[[nodiscard]] SLUICE_API std::string_view to_string(HostLoad h) noexcept;
[[nodiscard]] SLUICE_API std::optional<HostLoad> parse_host_load(std::string_view s) noexcept;

/// One tensor in memory.
struct LoadedTensor {
  /// Its description, owned by the LoadedTensors that holds this tensor (a copy of the
  /// Checkpoint's): valid while that LoadedTensors lives, after the Checkpoint is gone too.
  const TensorInfo* info = nullptr;
  void* data = nullptr;              ///< its first byte; info->bytes bytes
};

struct LoadOptions {
  LoadTarget target = LoadTarget::device;
  std::shared_ptr<Device> device{};         ///< required for the device and pinned_host targets
  std::optional<Path> path{};               ///< as TransferOptions::path (unset: configuration)
  /// Pageable host targets only: a private mapping of the file or a read into fresh memory.
  /// Mapped tensors are aligned for their type as in the file, not to `alignment`.
  HostLoad host_load = HostLoad::automatic;
  std::shared_ptr<const Config> config{};   ///< null: the process-wide configuration
  /// Names of the tensors to load; empty: all. An unknown name is a usage Error.
  std::vector<std::string> tensors{};
  /// This process's share: the selected tensors, in checkpoint order, are cut into `world`
  /// contiguous runs of about equal bytes, and run `rank` is loaded.
  unsigned rank = 0;
  unsigned world = 1;
  std::uint64_t alignment = 256;            ///< address alignment of every tensor (power of two)
  std::uint64_t max_read = 64 * MiB;        ///< largest single read; larger ranges are cut
  /// Staging budget: bytes of reads outstanding at once (always at least one read). Paths that
  /// stage per request (posix) hold at most this much; the bounce path's pinned staging is the
  /// device's fixed pool (Config::bounce_buffers x bounce_buffer_size).
  std::uint64_t inflight_bytes = 256 * MiB;
  /// Caller buffers: when set, tensor t goes to destination(t) (t.bytes bytes of the target's
  /// kind of memory, valid until load returns and beyond) and nothing is allocated; each tensor
  /// is then read on its own. Returning null is a usage Error.
  std::function<void*(const TensorInfo&)> destination{};
  /// Called on the thread that runs load() as each tensor's bytes are in memory, in the order
  /// the reads complete. An exception thrown here stops the load and is rethrown by load().
  std::function<void(const LoadedTensor&)> on_tensor{};
};

/// One read of a plan: `size` bytes at `offset` of file `file_index`, to `dest_offset` of the
/// allocation (with caller buffers: of the buffer of plan tensor `group`).
struct LoadRead {
  std::size_t file_index = 0;
  std::size_t group = 0;               ///< plan index of the first tensor of the read's group
  std::uint64_t offset = 0;
  std::uint64_t size = 0;
  std::uint64_t dest_offset = 0;
  std::vector<std::size_t> completes;  ///< plan tensors whose last byte this read brings in
};

struct LoadPlan {
  std::vector<const TensorInfo*> tensors;  ///< this rank's tensors, in load order
  std::vector<std::uint64_t> placement;    ///< offset of each tensor in the allocation
  std::vector<LoadRead> reads;             ///< in issue order
  std::uint64_t allocation_bytes = 0;      ///< 0 with caller buffers
  std::uint64_t bytes = 0;                 ///< sum of the tensors' sizes
};

/// What load() would do, without reading or allocating. Throws a usage Error on bad options.
[[nodiscard]] SLUICE_API LoadPlan plan_load(const Checkpoint& checkpoint,
                                            const LoadOptions& options);

/// Tensors in memory, owning the allocation they live in (unless they are in caller buffers) and
/// their descriptions: the Checkpoint may be dropped once load() has returned.
class SLUICE_API LoadedTensors {
 public:
  LoadedTensors() = default;
  LoadedTensors(LoadedTensors&& o) noexcept = default;
  LoadedTensors& operator=(LoadedTensors&& o) noexcept = default;
  LoadedTensors(const LoadedTensors&) = delete;
  LoadedTensors& operator=(const LoadedTensors&) = delete;
  ~LoadedTensors() = default;

  /// In plan order.
  [[nodiscard]] const std::vector<LoadedTensor>& tensors() const noexcept { return tensors_; }
  [[nodiscard]] const LoadedTensor* find(std::string_view name) const;
  /// Bytes loaded, wall time of the reads (allocation excluded), I/Os, and the path the bytes
  /// took with its reason; when reads took different paths the reason lists the bytes per path.
  /// A mapped load: path mapped, seconds those of mapping (and populating the page table), 0 I/Os.
  [[nodiscard]] const TransferResult& result() const noexcept { return result_; }
  /// The path's name for reports: "remote" when the bytes came from URLs (result().path is then
  /// host, or bounce into device memory), else to_string(result().path).
  [[nodiscard]] std::string_view path_name() const noexcept;
  [[nodiscard]] LoadTarget target() const noexcept { return target_; }
  [[nodiscard]] const std::shared_ptr<Device>& device() const noexcept { return device_; }
  /// XXH3-64 (seed 0) of a tensor's bytes as they are in memory; device memory is copied back
  /// to host memory in pieces of at most 64 MiB to be hashed.
  [[nodiscard]] std::uint64_t xxh3(const LoadedTensor& t) const;

 private:
  friend SLUICE_API LoadedTensors load(const Checkpoint&, const LoadOptions&);
  /// The one allocation the tensors live in (none with caller buffers), by target; for a mapped
  /// load, one private mapping per file.
  struct Mapped {
    std::vector<FileMapping> files;
    std::optional<HostMapping> copies;  ///< tensors misaligned for their type
  };
  using Memory = std::variant<std::monostate, DeviceBuffer, PinnedBuffer, HostMapping, Mapped>;
  [[nodiscard]] void* base() const noexcept;
  /// A mapped load's tensors (docs/paths.md); internal, not exported.
  SLUICE_LOCAL TransferResult map(const Checkpoint& cp, const LoadPlan& plan, const LoadOptions& o,
                                  const detail::HostLoadChoice& choice);

  std::shared_ptr<Device> device_;
  LoadTarget target_ = LoadTarget::pageable_host;
  /// Counts memory_'s bytes in loaded_bytes_in_use() while this object (or the one it moved
  /// to) lives: its deleter subtracts them. Declared before memory_, so it goes after it.
  std::shared_ptr<const std::uint64_t> counted_;
  Memory memory_;
  std::vector<TensorInfo> infos_;  ///< what tensors_[i].info points to
  std::vector<LoadedTensor> tensors_;
  std::unordered_map<std::string_view, std::size_t> by_name_;
  TransferResult result_;
  bool remote_ = false;  ///< most bytes came from URLs
};

/// Bytes of memory that live LoadedTensors of this process hold (the allocations load() made,
/// whatever the target; caller buffers are not counted): rises when load() allocates, falls when
/// the last owner of a LoadedTensors is destroyed. For tests and bindings that must see memory
/// come back (the Python package's sluice.loaded_bytes_in_use()).
[[nodiscard]] SLUICE_API std::uint64_t loaded_bytes_in_use() noexcept;

/// Plans and runs a load. Throws an Error naming the file and range on a failed read (or a file
/// that shrank since its header was read), after every outstanding read has finished.
[[nodiscard]] SLUICE_API LoadedTensors load(const Checkpoint& checkpoint,
                                            const LoadOptions& options);

}  // namespace sluice
