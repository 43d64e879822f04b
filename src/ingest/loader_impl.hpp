// The Loader's insides, shared by loader.cpp (the producer thread, next(), state and restore)
// and loader_reads.cpp (planning a batch, issuing its reads, completing it into a lease).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include "arena.hpp"
#include "batch_lease.hpp"
#include "batch_plan.hpp"
#include "ingest_stats.hpp"
#include "loader_memory.hpp"
#include "sluice/ingest.hpp"
#include "sluice/transfer.hpp"

namespace sluice {
namespace detail {

inline std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

}  // namespace detail

using detail::now_ns;
using detail::ProducerState;

struct Loader::Impl {
  struct Ready {
    std::optional<Batch> batch;
    std::exception_ptr error;
  };
  struct InFlight {
    detail::BatchPlan plan;
    std::uint64_t staging = 0;  // offset in the staging region
    std::uint64_t staging_len = 0;
    std::vector<TransferFuture> pending;  // per read; invalid for reads done at once
    std::vector<TransferResult> done;
    std::exception_ptr error;
    std::uint64_t async_reads = 0;
    std::vector<bool> landed;  // per piece: read straight to its place in the gathered batch
  };

  std::shared_ptr<const Dataset> ds;
  IngestOptions o;
  std::shared_ptr<const Config> cfg;
  std::optional<SampleShape> shape;
  detail::MemoryPlan mem;
  std::shared_ptr<detail::Arena> staging;
  std::shared_ptr<detail::Arena> buffers;
  std::shared_ptr<detail::ArenaUse> use = std::make_shared<detail::ArenaUse>();  // both arenas'
  std::unique_ptr<detail::BatchPlanner> planner;  // the producer's
  TransferOptions read_opts;   // reads on this thread's slow path (and their errors)
  TransferOptions async_opts;  // reads for the engine's async I/O thread
  Stream stream;
  std::vector<std::uint64_t> file_sizes;

  // The run: changed only while no producer runs.
  std::uint64_t seed = 0;
  bool shuffle = true;
  std::uint64_t epoch = 0;
  detail::EpochSpan span;

  mutable std::mutex mu;
  std::condition_variable ready_cv;
  std::condition_variable space_cv;
  std::deque<Ready> ready;
  // Bytes of batch buffer the producer is waiting for (0: it is not): set before it waits, so
  // next() can tell from the arena that only the consumer's dropping a batch would end the wait.
  std::uint64_t buffer_wait = 0;
  std::uint64_t handed = 0;
  bool epoch_over = false;
  bool first_after_start = true;
  std::exception_ptr failure;
  std::thread producer;
  bool running = false;
  std::atomic<bool> stop{false};
  std::atomic<ProducerState> pstate{ProducerState::idle};
  // Nanoseconds the producer spent in each state, and when it entered the current one: the
  // consumer's wait is attributed by the difference of two snapshots.
  std::array<std::atomic<std::uint64_t>, detail::producer_states> state_ns{};
  std::atomic<std::uint64_t> state_since{now_ns()};
  std::atomic<std::uint64_t> reads_in_flight{0};
  std::atomic<unsigned> window_batches{0};
  detail::IngestMeter meter;

  Impl(std::shared_ptr<const Dataset> dataset, IngestOptions options);
  void produce();
  void issue(std::uint64_t step, std::deque<InFlight>& window, bool* stop_issuing);
  Ready complete(InFlight& f);
  std::optional<std::uint64_t> alloc_buffer(std::uint64_t bytes);
  bool read_now(const File& file, std::size_t index, const detail::PlannedRead& r) const;
  void read_cached(InFlight& f, std::byte* base, const std::vector<std::size_t>& which);
  void set_state(ProducerState s);
  [[nodiscard]] std::array<std::uint64_t, detail::producer_states> state_snapshot() const;
  void start_run();
  void stop_producer();
  [[nodiscard]] LoaderState state_locked() const;
};

}  // namespace sluice
