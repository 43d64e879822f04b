// The Loader's figures: how long the consumer waited in next() for each batch, what the
// producer was doing when it did (the evidence for the stall's cause), and the paths the reads
// took. Thread-safe: the consumer records waits, the producer records reads.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>

#include "sluice/histogram.hpp"
#include "sluice/ingest.hpp"
#include "sluice/transfer.hpp"

namespace sluice::detail {

/// What the producer thread is doing, for the stall's cause.
enum class ProducerState : std::uint8_t {
  idle,     ///< the prefetch window is full (or nothing is left)
  busy,     ///< planning, issuing, gathering, copying: CPU work
  reads,    ///< waiting for reads to complete
  memory,   ///< waiting for the memory budget (a batch buffer the consumer holds)
};
inline constexpr std::size_t producer_states = 4;

/// The memory plan the Loader chose, for the evidence.
struct MemoryPlan {
  unsigned prefetch_asked = 0;
  unsigned prefetch = 0;           ///< batches ahead that fit the budget
  std::uint64_t budget = 0;
  std::uint64_t staging_bytes = 0;  ///< the staging region
  std::uint64_t buffer_bytes = 0;   ///< the batch-buffer region
  std::uint64_t batch_bytes = 0;    ///< bytes of one batch (the largest, for WebDataset)
};

class IngestMeter {
 public:
  /// One step handed out: the consumer waited from `enter_ns` to `exit_ns`, during which the
  /// producer spent `producer_ns[state]` in each state, with `reads_in_flight` reads and `ahead`
  /// batches in flight when the wait began.
  /// next() was entered at `enter_ns` and returned at `exit_ns` (steady clock).
  void record_step(std::uint64_t enter_ns, std::uint64_t exit_ns,
                   const std::array<std::uint64_t, producer_states>& producer_ns,
                   std::uint64_t reads_in_flight, unsigned ahead, std::uint64_t samples,
                   std::uint64_t bytes, bool first_after_start);
  /// The completed reads of one batch.
  void record_reads(std::span<const TransferResult> reads);
  void set_dropped(std::uint64_t n) noexcept;
  /// Forgets everything (restore()).
  void reset();

  [[nodiscard]] IngestStats stats(const MemoryPlan& memory, LoadTarget target) const;

 private:
  [[nodiscard]] std::string stall_cause(const IngestStats& s, const MemoryPlan& memory) const;  // mu_ held

  mutable std::mutex mu_;
  LatencyHistogram waits_;
  std::uint64_t steps_ = 0;
  std::uint64_t samples_ = 0;
  std::uint64_t bytes_ = 0;
  std::uint64_t dropped_ = 0;
  std::uint64_t first_enter_ns_ = 0;
  std::uint64_t last_exit_ns_ = 0;
  std::uint64_t wait_ns_ = 0;
  // Waits of steps after the first of a run, by what the producer was doing.
  std::uint64_t wait_by_state_[producer_states] = {};
  std::uint64_t max_reads_in_flight_ = 0;
  std::uint64_t reads_at_wait_ = 0;  // sum over counted waits, for a mean
  std::uint64_t ahead_at_wait_ = 0;
  std::uint64_t counted_waits_ = 0;
  // Reads: bytes O_DIRECT and buffered (from the page cache), with a reason of each.
  std::uint64_t read_bytes_ = 0;
  std::uint64_t read_ios_ = 0;
  std::uint64_t cached_bytes_ = 0;
  std::string direct_reason_;
  std::string cached_reason_;
};

}  // namespace sluice::detail
