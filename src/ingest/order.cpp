// The order of an epoch: a keyed bijection of [0, n), so any position maps to its sample in O(1)
// time and memory and a resumed run neither replays nor stores the order.
//
// A balanced Feistel network permutes [0, 2^b) (b even, 2^b >= n, b >= 2); positions that land
// at n or beyond are walked on through the network until they fall inside [0, n) ("cycle
// walking", Black and Rogaway 2002), which restricts a permutation of the larger domain to one of
// [0, n). Since 2^b < 4n, a walk takes fewer than four steps on average. The round function is
// the murmur3 64-bit finaliser of the half and a round key; the round keys come from one key
// mixed from (seed, epoch), so the order depends on (n, seed, epoch) and nothing else.
#include <bit>

#include <fmt/format.h>

#include "sluice/error.hpp"
#include "sluice/ingest.hpp"

namespace sluice {
namespace {

constexpr unsigned rounds = 6;

constexpr std::uint64_t fmix64(std::uint64_t x) noexcept {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

// Bits of each Feistel half: the smallest even width whose domain holds n, at least 2 in all.
unsigned half_bits(std::uint64_t n) noexcept {
  const unsigned bits = n <= 4 ? 2 : static_cast<unsigned>(std::bit_width(n - 1));
  return (bits + 1) / 2;
}

std::uint64_t feistel(std::uint64_t x, unsigned h, std::uint64_t key) noexcept {
  const std::uint64_t mask = (std::uint64_t{1} << h) - 1;
  std::uint64_t left = x >> h;
  std::uint64_t right = x & mask;
  for (unsigned i = 0; i < rounds; ++i) {
    const std::uint64_t round_key = fmix64(key + 0x9e3779b97f4a7c15ULL * (i + 1));
    const std::uint64_t next = left ^ (fmix64(right ^ round_key) & mask);
    left = right;
    right = next;
  }
  return (left << h) | right;
}

}  // namespace

SampleOrder::SampleOrder(std::uint64_t n, std::uint64_t seed, std::uint64_t epoch, bool shuffle)
    : n_(n), key_(fmix64(fmix64(seed ^ 0x5a17ce0fd3b1a2c7ULL) + epoch)), shuffle_(shuffle) {}

std::uint64_t SampleOrder::operator[](std::uint64_t position) const {
  if (position >= n_) {
    throw_usage_error({.op = "sample order"},
                      fmt::format("position {} is past the end of an order of {} samples", position, n_));
  }
  if (!shuffle_) return position;
  const unsigned h = half_bits(n_);
  std::uint64_t x = position;
  do {
    x = feistel(x, h, key_);
  } while (x >= n_);
  return x;
}

}  // namespace sluice
