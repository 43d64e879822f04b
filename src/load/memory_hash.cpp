#include "memory_hash.hpp"

#include <algorithm>
#include <cerrno>

// Inlined (header-only): libsluice needs no libxxhash at run time, so portable builds stay
// glibc-only.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "sluice/error.hpp"
#include "sluice/units.hpp"

namespace sluice::detail {

struct MemoryHash::State {
  XXH3_state_t xxh{};
};

MemoryHash::MemoryHash(Device* device) : device_(device), state_(std::make_unique<State>()) {
  if (XXH3_64bits_reset(&state_->xxh) != XXH_OK) {
    throw_os_error(EINVAL, {.op = "xxh3"}, "cannot reset a hash state");
  }
}

MemoryHash::~MemoryHash() = default;

void MemoryHash::update(const void* p, std::uint64_t size) {
  const auto* src = static_cast<const std::byte*>(p);
  if (device_ == nullptr) {
    (void)XXH3_64bits_update(&state_->xxh, src, static_cast<std::size_t>(size));
    return;
  }
  const std::uint64_t piece = std::min<std::uint64_t>(size, 64 * MiB);
  if (host_.size() < piece) host_.resize(static_cast<std::size_t>(piece));
  for (std::uint64_t pos = 0; pos < size; pos += piece) {
    const auto len = static_cast<std::size_t>(std::min(piece, size - pos));
    device_->copy_to_host(host_.data(), src + pos, len);
    (void)XXH3_64bits_update(&state_->xxh, host_.data(), len);
  }
}

std::uint64_t MemoryHash::digest() const { return XXH3_64bits_digest(&state_->xxh); }

}  // namespace sluice::detail
