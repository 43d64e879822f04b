// The Loader's memory: two regions allocated once (pinned or host staging for reads, and the
// batch buffers in the target's memory), each handed out in pieces by a first-fit arena so that
// batches of different sizes (WebDataset) share one bounded region. A batch buffer goes back to
// its arena when the consumer's last Batch copy goes, which may be after the Loader is gone: the
// arena is shared with every lease.
#pragma once

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

class Arena {
 public:
  /// Allocates `bytes` (rounded up to the granule) of `kind` memory; `device` is required for
  /// device and pinned memory. An empty arena (0 bytes) allocates nothing.
  Arena(LoadTarget kind, const std::shared_ptr<Device>& device, std::uint64_t bytes);
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  [[nodiscard]] std::uint64_t capacity() const noexcept { return capacity_; }
  [[nodiscard]] std::byte* base() const noexcept { return base_; }
  /// Offset of a free piece of `bytes`, or nullopt when none is free now.
  [[nodiscard]] std::optional<std::uint64_t> try_alloc(std::uint64_t bytes);
  /// Waits until a piece is free or `stop()` says to give up (then nullopt). `stop` is checked
  /// under the arena's lock whenever wake() or a release notifies.
  [[nodiscard]] std::optional<std::uint64_t> alloc(std::uint64_t bytes, const std::function<bool()>& stop);
  void release(std::uint64_t offset, std::uint64_t bytes) noexcept;
  /// Wakes every alloc() waiting, to check its stop().
  void wake() noexcept;
  /// Bytes handed out now.
  [[nodiscard]] std::uint64_t used() const noexcept;

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
};

[[nodiscard]] constexpr std::uint64_t round_up(std::uint64_t v, std::uint64_t a) noexcept {
  return (v + a - 1) / a * a;
}

}  // namespace sluice::detail
