// A decorator that injects the failures real storage produces (EIO, short transfers, EINTR,
// EAGAIN, ENOSPC, delays) into another engine's completions, so that the retry and error paths
// above it run in tests. Faults are chosen by a counter (FaultPlan: every Nth request) or drawn
// at random per request from a seeded generator (RandomFaults: what SLUICE_FAULTS sets up for
// every engine of a process, for soak runs and for users checking their own error handling).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/export.hpp"
#include "sluice/io_engine.hpp"

namespace sluice {

struct FaultPlan {
  unsigned every = 0;              ///< inject on every Nth request (0 = never)
  int error = 0;                   ///< errno to report (EIO, EINTR, EAGAIN, ENOSPC), or 0
  bool short_transfer = false;     ///< transfer half the bytes (down to a multiple of 512, >= 512)
  std::chrono::microseconds delay{0};  ///< added latency per request
  std::optional<IoOp> only{};      ///< restrict faults to reads or writes
};

/// Probabilities per request (each in [0, 1], their sum at most 1). ENOSPC is injected into
/// writes only. Every injected fault is appended to `log` (when set) as one line:
/// "pid=P fault=eio op=read offset=N len=N".
struct RandomFaults {
  double eio = 0, enospc = 0, eagain = 0, eintr = 0, short_transfer = 0, delay = 0;
  std::chrono::microseconds delay_for{1000};
  std::uint64_t seed = 1;
  std::optional<IoOp> only{};
  std::string log;
};

/// Parses SLUICE_FAULTS: comma-separated `eio=P`, `enospc=P`, `eagain=P`, `eintr=P`, `short=P`,
/// `delay=P[:DURATION]` (DURATION as parse_duration reads it: 500us, 2ms, 1s; default 1ms), `seed=N`, `only=read|write`,
/// `log=FILE`. Throws a usage Error naming SLUICE_FAULTS and the item it cannot read.
[[nodiscard]] SLUICE_API RandomFaults parse_faults(std::string_view spec);

class SLUICE_API FaultyEngine final : public IoEngine {
 public:
  FaultyEngine(std::unique_ptr<IoEngine> inner, FaultPlan plan);
  FaultyEngine(std::unique_ptr<IoEngine> inner, RandomFaults faults);
  ~FaultyEngine() override;
  [[nodiscard]] EngineKind kind() const noexcept override { return inner_->kind(); }
  [[nodiscard]] std::string_view name() const noexcept override { return "faulty"; }
  [[nodiscard]] unsigned capacity() const noexcept override { return inner_->capacity(); }
  [[nodiscard]] unsigned in_flight() const noexcept override;
  void prepare(const IoRequest& req) override;
  std::size_t submit_and_wait(std::span<IoCompletion> out, std::size_t min_complete) override;
  bool register_buffers(std::span<const iovec> b) override { return inner_->register_buffers(b); }
  void unregister_buffers() override { inner_->unregister_buffers(); }
  int register_file(int fd) override { return inner_->register_file(fd); }
  void unregister_file(int slot) override { inner_->unregister_file(slot); }
  bool enable_wake() override { return inner_->enable_wake(); }
  void wake() noexcept override { inner_->wake(); }

  [[nodiscard]] std::uint64_t injected() const noexcept { return injected_; }

 private:
  std::unique_ptr<IoEngine> inner_;
  FaultPlan plan_;
  std::uint64_t seen_ = 0;
  std::uint64_t injected_ = 0;
  std::vector<IoCompletion> synthetic_;  // errors reported without reaching the inner engine
  std::optional<RandomFaults> random_;
  std::mt19937_64 rng_;
  int log_fd_ = -1;

  void prepare_random(const IoRequest& req);
  void inject(const IoRequest& req, std::string_view kind, int error);
};

}  // namespace sluice
