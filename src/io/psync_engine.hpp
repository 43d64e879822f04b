#pragma once

#include <deque>
#include <vector>

#include "sluice/io_engine.hpp"

namespace sluice {

/// pread/pwrite, one request at a time, executed inside submit_and_wait(). For kernels and
/// sandboxes without io_uring, and as the reference the uring engine is tested against.
class PsyncEngine final : public IoEngine {
 public:
  explicit PsyncEngine(unsigned depth) : depth_(depth) {}
  [[nodiscard]] EngineKind kind() const noexcept override { return EngineKind::psync; }
  [[nodiscard]] std::string_view name() const noexcept override { return "psync"; }
  [[nodiscard]] unsigned capacity() const noexcept override { return depth_; }
  [[nodiscard]] unsigned in_flight() const noexcept override {
    return static_cast<unsigned>(queued_.size() + done_.size());
  }
  void prepare(const IoRequest& req) override;
  std::size_t submit_and_wait(std::span<IoCompletion> out, std::size_t min_complete) override;

 private:
  unsigned depth_;
  std::deque<IoRequest> queued_;
  std::deque<IoCompletion> done_;
};

}  // namespace sluice
