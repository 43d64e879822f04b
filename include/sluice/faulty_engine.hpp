// A decorator that injects the failures real storage produces (EIO, short transfers, EINTR,
// EAGAIN, ENOSPC, delays) into another engine's completions, so that the retry and error paths
// above it run in tests. Faults are chosen by a seeded counter: deterministic per engine.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "sluice/io_engine.hpp"

namespace sluice {

struct FaultPlan {
  unsigned every = 0;              ///< inject on every Nth request (0 = never)
  int error = 0;                   ///< errno to report (EIO, EINTR, EAGAIN, ENOSPC), or 0
  bool short_transfer = false;     ///< transfer half the bytes (down to a multiple of 512, >= 512)
  std::chrono::microseconds delay{0};  ///< added latency per request
  std::optional<IoOp> only{};      ///< restrict faults to reads or writes
};

class FaultyEngine final : public IoEngine {
 public:
  FaultyEngine(std::unique_ptr<IoEngine> inner, FaultPlan plan);
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

  [[nodiscard]] std::uint64_t injected() const noexcept { return injected_; }

 private:
  std::unique_ptr<IoEngine> inner_;
  FaultPlan plan_;
  std::uint64_t seen_ = 0;
  std::uint64_t injected_ = 0;
  std::vector<IoCompletion> synthetic_;  // errors reported without reaching the inner engine
};

}  // namespace sluice
