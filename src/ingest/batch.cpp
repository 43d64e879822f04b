// Batch: the consumer's view of a lease, and the XXH3-64 of a sample as it landed in memory
// (what `sluice ingest --emit` writes and the tests compare with an independent reading).
#include <cstring>

#include <fmt/format.h>

#include "batch_lease.hpp"
#include "load/memory_hash.hpp"
#include "sluice/error.hpp"

namespace sluice {

std::uint64_t Batch::epoch() const noexcept { return lease_->epoch; }
std::uint64_t Batch::step() const noexcept { return lease_->step; }
unsigned Batch::rank() const noexcept { return lease_->rank; }
std::span<const std::uint64_t> Batch::samples() const noexcept { return lease_->samples; }
void* Batch::data() const noexcept { return lease_->data; }
std::uint64_t Batch::bytes() const noexcept { return lease_->bytes; }
std::span<const BatchField> Batch::fields() const noexcept { return lease_->fields; }

std::optional<SampleShape> Batch::shape() const {
  if (!lease_->sample_shape) return std::nullopt;
  SampleShape s = *lease_->sample_shape;
  s.shape.insert(s.shape.begin(), lease_->samples.size());
  return s;
}

std::uint64_t Batch::xxh3(std::size_t i) const {
  const detail::BatchLease& l = *lease_;
  if (i >= l.samples.size()) {
    throw_usage_error({.op = "batch xxh3"}, fmt::format("sample {} of a batch of {}", i, l.samples.size()));
  }
  std::vector<std::pair<std::uint64_t, std::uint64_t>> whole;
  const auto* pieces = &whole;
  if (l.sample_shape) {
    const std::uint64_t each = l.bytes / l.samples.size();
    whole.emplace_back(i * each, each);
  } else {
    pieces = &l.sample_pieces[i];
  }
  detail::MemoryHash hash(l.target == LoadTarget::device ? l.device.get() : nullptr);
  for (const auto& [offset, size] : *pieces) hash.update(l.data + offset, size);
  return hash.digest();
}

}  // namespace sluice
