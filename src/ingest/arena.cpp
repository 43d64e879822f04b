#include "arena.hpp"

#include <algorithm>

namespace sluice::detail {

Arena::Arena(LoadTarget kind, const std::shared_ptr<Device>& device, std::uint64_t bytes,
             std::shared_ptr<ArenaUse> use)
    : capacity_(round_up(bytes, arena_granule)), use_(std::move(use)) {
  if (capacity_ == 0) return;
  const auto n = static_cast<std::size_t>(capacity_);
  switch (kind) {
    case LoadTarget::device: base_ = static_cast<std::byte*>(memory_.emplace<DeviceBuffer>(device, n).data()); break;
    case LoadTarget::pinned_host: base_ = static_cast<std::byte*>(memory_.emplace<PinnedBuffer>(device, n).data()); break;
    case LoadTarget::pageable_host: base_ = memory_.emplace<HostMapping>(n).get(); break;
  }
  free_.emplace(0, capacity_);
}

std::optional<std::uint64_t> Arena::take(std::uint64_t bytes) {
  bytes = round_up(std::max<std::uint64_t>(bytes, 1), arena_granule);
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < bytes) continue;
    const std::uint64_t off = it->first;
    const std::uint64_t rest = it->second - bytes;
    free_.erase(it);
    if (rest > 0) free_.emplace(off + bytes, rest);
    used_ += bytes;
    ++pieces_;
    if (use_) use_->add(bytes);
    return off;
  }
  return std::nullopt;
}

std::optional<std::uint64_t> Arena::try_alloc(std::uint64_t bytes) {
  const std::lock_guard lock(mu_);
  return take(bytes);
}

std::optional<std::uint64_t> Arena::alloc(std::uint64_t bytes, const std::function<bool()>& stop,
                                          const std::function<void()>& on_wait) {
  std::unique_lock lock(mu_);
  bool told = !on_wait;
  for (;;) {
    if (auto off = take(bytes)) return off;
    if (stop()) return std::nullopt;
    if (!told) {  // without the lock: on_wait takes the Loader's, which is taken before ours
      told = true;
      lock.unlock();
      on_wait();
      lock.lock();
      continue;
    }
    freed_.wait(lock);
  }
}

bool Arena::fits(std::uint64_t bytes) const {
  bytes = round_up(std::max<std::uint64_t>(bytes, 1), arena_granule);
  const std::lock_guard lock(mu_);
  return std::any_of(free_.begin(), free_.end(), [&](const auto& piece) { return piece.second >= bytes; });
}

void Arena::release(std::uint64_t offset, std::uint64_t bytes) noexcept {
  bytes = round_up(std::max<std::uint64_t>(bytes, 1), arena_granule);
  {
    const std::lock_guard lock(mu_);
    used_ -= bytes;
    --pieces_;
    if (use_) use_->sub(bytes);
    auto [it, inserted] = free_.emplace(offset, bytes);
    (void)inserted;
    if (auto next = std::next(it); next != free_.end() && it->first + it->second == next->first) {
      it->second += next->second;
      free_.erase(next);
    }
    if (it != free_.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == it->first) {
        prev->second += it->second;
        free_.erase(it);
      }
    }
  }
  freed_.notify_all();
}

void Arena::wake() noexcept {
  { const std::lock_guard lock(mu_); }
  freed_.notify_all();
}

std::uint64_t Arena::used() const noexcept {
  const std::lock_guard lock(mu_);
  return used_;
}

std::size_t Arena::pieces() const noexcept {
  const std::lock_guard lock(mu_);
  return pieces_;
}

}  // namespace sluice::detail
