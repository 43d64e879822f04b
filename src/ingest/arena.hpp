// The Loader's memory: two regions allocated once (pinned or host staging for reads, and the
// batch buffers in the target's memory), each handed out in pieces by a first-fit arena so that
// batches of different sizes (WebDataset) share one bounded region. A batch buffer goes back to
// its arena when the consumer's last Batch copy goes, which may be after the Loader is gone: the
// arena is shared with every lease.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <variant>

#include "sluice/device.hpp"
#include "sluice/host_memory.hpp"
#include "sluice/load.hpp"

namespace sluice::detail {

/// Granularity of every piece: a page, which O_DIRECT buffers and device copies both like.
inline constexpr std::uint64_t arena_granule = 4096;

/// Bytes handed out now by the arenas that share it, and the most ever at once: the Loader's
/// staging and batch-buffer arenas share one, so memory_in_use() is their sum at one moment.
struct ArenaUse {
  std::atomic<std::uint64_t> now{0};
  std::atomic<std::uint64_t> high{0};

  void add(std::uint64_t bytes) noexcept {
    const std::uint64_t v = now.fetch_add(bytes) + bytes;
    std::uint64_t h = high.load();
    while (v > h && !high.compare_exchange_weak(h, v)) {
    }
  }
  void sub(std::uint64_t bytes) noexcept { now.fetch_sub(bytes); }
};

class Arena {
 public:
  /// Allocates `bytes` (rounded up to the granule) of `kind` memory; `device` is required for
  /// device and pinned memory. An empty arena (0 bytes) allocates nothing. `use`, when given,
  /// counts the bytes handed out (with those of the other arenas sharing it).
  Arena(LoadTarget kind, const std::shared_ptr<Device>& device, std::uint64_t bytes,
        std::shared_ptr<ArenaUse> use = nullptr);
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  [[nodiscard]] std::uint64_t capacity() const noexcept { return capacity_; }
  [[nodiscard]] std::byte* base() const noexcept { return base_; }
  /// Offset of a free piece of `bytes`, or nullopt when none is free now.
  [[nodiscard]] std::optional<std::uint64_t> try_alloc(std::uint64_t bytes);
  /// Waits until a piece is free or `stop()` says to give up (then nullopt). `stop` is checked
  /// under the arena's lock whenever wake() or a release notifies. `on_wait`, when given, is
  /// called once, without the arena's lock, when no piece is free and alloc() is about to wait
  /// (the Loader tells its consumer so); a piece freed meanwhile is still found.
  [[nodiscard]] std::optional<std::uint64_t> alloc(std::uint64_t bytes, const std::function<bool()>& stop,
                                                   const std::function<void()>& on_wait = {});
  /// Whether a piece of `bytes` is free now.
  [[nodiscard]] bool fits(std::uint64_t bytes) const;
  void release(std::uint64_t offset, std::uint64_t bytes) noexcept;
  /// Wakes every alloc() waiting, to check its stop().
  void wake() noexcept;
  /// Bytes handed out now, and in how many pieces.
  [[nodiscard]] std::uint64_t used() const noexcept;
  [[nodiscard]] std::size_t pieces() const noexcept;

 private:
  std::optional<std::uint64_t> take(std::uint64_t bytes);  // with mu_ held

  using Memory = std::variant<std::monostate, DeviceBuffer, PinnedBuffer, HostMapping>;
  Memory memory_;
  std::byte* base_ = nullptr;
  std::uint64_t capacity_ = 0;
  mutable std::mutex mu_;
  std::condition_variable freed_;
  std::map<std::uint64_t, std::uint64_t> free_;  // offset -> bytes, coalesced
  std::uint64_t used_ = 0;
  std::size_t pieces_ = 0;
  std::shared_ptr<ArenaUse> use_;
};

[[nodiscard]] constexpr std::uint64_t round_up(std::uint64_t v, std::uint64_t a) noexcept {
  return (v + a - 1) / a * a;
}

}  // namespace sluice::detail
