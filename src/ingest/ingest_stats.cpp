#include "ingest_stats.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "sluice/units.hpp"

namespace sluice::detail {
namespace {

// A wait shorter than this is the cost of a lock and a hand-over, not a stall.
constexpr std::uint64_t stall_ns = 100'000;
// Below this fraction of the wall time the stall is noise and no cause is named.
constexpr double cause_fraction = 0.01;
// Reads in flight from which more depth is not expected to help a drive (NVMe saturates at
// 32..128 small reads; the doctor's queue-depth sweep goes to 64).
constexpr double deep_queue = 64;

double gib_per_s(double bytes, double seconds) { return seconds > 0 ? bytes / static_cast<double>(GiB) / seconds : 0; }

}  // namespace

void IngestMeter::record_step(std::uint64_t enter_ns, std::uint64_t exit_ns,
                              const std::array<std::uint64_t, producer_states>& producer_ns,
                              std::uint64_t reads_in_flight, unsigned ahead, std::uint64_t samples,
                              std::uint64_t bytes, bool first_after_start) {
  const std::uint64_t wait = exit_ns - enter_ns;
  const std::lock_guard lock(mu_);
  if (first_enter_ns_ == 0) first_enter_ns_ = enter_ns;
  last_exit_ns_ = exit_ns;
  waits_.record(wait);
  wait_ns_ += wait;
  ++steps_;
  samples_ += samples;
  bytes_ += bytes;
  // The first batch of a run waits for the pipeline to fill, whatever its depth: it is in the
  // percentiles and the fraction, not in the evidence for a cause.
  if (first_after_start || wait < stall_ns) return;
  for (std::size_t i = 0; i < producer_states; ++i) wait_by_state_[i] += producer_ns[i];
  reads_at_wait_ += reads_in_flight;
  ahead_at_wait_ += ahead;
  ++counted_waits_;
  max_reads_in_flight_ = std::max(max_reads_in_flight_, reads_in_flight);
}

void IngestMeter::record_reads(std::span<const TransferResult> reads) {
  const std::lock_guard lock(mu_);
  for (const TransferResult& r : reads) {
    read_bytes_ += r.bytes;
    read_ios_ += r.ios;
    cached_bytes_ += std::min(r.cached_bytes, r.bytes);
    std::string& slot = r.cached_bytes >= r.bytes ? cached_reason_ : direct_reason_;
    if (slot.empty()) slot = r.reason;
  }
}

void IngestMeter::set_dropped(std::uint64_t n) noexcept {
  const std::lock_guard lock(mu_);
  dropped_ = n;
}

void IngestMeter::reset() {
  const std::lock_guard lock(mu_);
  waits_.reset();
  steps_ = samples_ = bytes_ = dropped_ = wait_ns_ = 0;
  first_enter_ns_ = last_exit_ns_ = 0;
  std::fill(std::begin(wait_by_state_), std::end(wait_by_state_), 0);
  max_reads_in_flight_ = reads_at_wait_ = ahead_at_wait_ = counted_waits_ = 0;
  read_bytes_ = read_ios_ = cached_bytes_ = 0;
  direct_reason_.clear();
  cached_reason_.clear();
}

// The likely cause of the waits, in the doctor's words, with the evidence (empty: no stall).
std::string IngestMeter::stall_cause(const IngestStats& s, const MemoryPlan& memory) const {
  std::uint64_t counted = 0;
  std::size_t top = 0;
  for (std::size_t i = 0; i < producer_states; ++i) {
    counted += wait_by_state_[i];
    if (wait_by_state_[i] > wait_by_state_[top]) top = i;
  }
  const double counted_s = static_cast<double>(counted) / 1e9;
  if (counted_waits_ == 0 || s.wall_seconds <= 0 || counted_s < cause_fraction * s.wall_seconds) return {};
  const double mean_reads = static_cast<double>(reads_at_wait_) / static_cast<double>(counted_waits_);
  const double mean_ahead = static_cast<double>(ahead_at_wait_) / static_cast<double>(counted_waits_);
  const double read_gib_s = gib_per_s(static_cast<double>(read_bytes_), s.wall_seconds);
  const std::string share = fmt::format("{:.0f}% of the waiting", 100.0 * static_cast<double>(wait_by_state_[top]) / static_cast<double>(counted));
  const std::string shrunk =
      memory.prefetch < memory.prefetch_asked
          ? fmt::format("; prefetch {} asked, {} fit the memory budget of {} (batch {})", memory.prefetch_asked,
                        memory.prefetch, format_size(memory.budget), format_size(memory.batch_bytes))
          : std::string();
  switch (static_cast<ProducerState>(top)) {
    case ProducerState::reads:
      if (memory.prefetch < memory.prefetch_asked) {
        return fmt::format("memory_budget: {} was for reads, {:.1f} batches ahead{}", share, mean_ahead, shrunk);
      }
      if (mean_reads < deep_queue) {
        return fmt::format(
            "queue_depth: {} was for reads with {:.0f} in flight on average ({:.1f} of {} batches ahead), storage "
            "delivering {:.2f} GiB/s: raise prefetch (or the batch size) for more reads in flight",
            share, mean_reads, mean_ahead, memory.prefetch, read_gib_s);
      }
      return fmt::format(
            "device_limit: {} was for reads with {:.0f} in flight on average ({:.1f} of {} batches ahead), storage "
            "delivering {:.2f} GiB/s: the queue is deep, the device gives no more (or a limit such as a cgroup's "
            "io.max: `sluice doctor` tells throttled apart)",
            share, mean_reads, mean_ahead, memory.prefetch, read_gib_s);
    case ProducerState::memory:
      return fmt::format(
          "memory_budget: {} was for a batch buffer: the batches the consumer holds fill the batch region ({}, "
          "budget {}){}",
          share, format_size(memory.buffer_bytes), format_size(memory.budget), shrunk);
    case ProducerState::busy:
    case ProducerState::idle:
      break;
  }
  return fmt::format(
          "cpu_bound: {} the loader's thread was busy planning, gathering and copying batches, not waiting for "
          "reads ({:.0f} reads in flight on average, {:.2f} GiB/s read)",
          "in " + share, mean_reads, read_gib_s);
}

IngestStats IngestMeter::stats(const MemoryPlan& memory, LoadTarget target) const {
  const std::lock_guard lock(mu_);
  IngestStats s;
  s.steps = steps_;
  s.samples = samples_;
  s.bytes = bytes_;
  s.dropped = dropped_;
  s.wall_seconds = static_cast<double>(last_exit_ns_ - first_enter_ns_) / 1e9;
  s.wait_seconds = static_cast<double>(wait_ns_) / 1e9;
  s.wait_p50_seconds = static_cast<double>(waits_.value_at_percentile(50)) / 1e9;
  s.wait_p99_seconds = static_cast<double>(waits_.value_at_percentile(99)) / 1e9;
  if (s.wall_seconds > 0) {
    s.stall_fraction = std::min(1.0, s.wait_seconds / s.wall_seconds);
    s.samples_per_second = static_cast<double>(samples_) / s.wall_seconds;
    s.bytes_per_second = static_cast<double>(bytes_) / s.wall_seconds;
  }

  // The path: reads into the Loader's staging, then one host-to-device copy per batch (the
  // bounce design, run by the Loader), or a gather into host memory.
  std::string reads;
  if (read_bytes_ == 0) {
    reads = "nothing read yet";
  } else if (cached_bytes_ == 0 || direct_reason_.empty()) {
    reads = direct_reason_.empty() ? cached_reason_ : direct_reason_;
  } else {
    reads = fmt::format("page cache held {}% of the bytes ({}), the rest {}",
                        cached_bytes_ * 100 / read_bytes_, cached_reason_, direct_reason_);
  }
  const std::string io = fmt::format("{} reads of {} ({})", read_ios_, format_size(read_bytes_), reads);
  if (target == LoadTarget::device) {
    s.path = Path::bounce;
    s.reason = fmt::format("{} into pinned staging, gathered, one host-to-device copy per batch", io);
  } else {
    s.path = Path::host;
    s.reason = fmt::format("{} into staging, gathered into {} batch memory", io, to_string(target));
  }

  s.stall_cause = stall_cause(s, memory);
  return s;
}

}  // namespace sluice::detail
