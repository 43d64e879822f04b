#pragma once

#include <deque>
#include <vector>

#include "sluice/io_engine.hpp"

namespace sluice {

namespace detail {
/// One request as one preadv2/pwritev2 on the calling thread (RWF_NOWAIT where cached_only),
/// resumed after EINTR: bytes, or -errno. What both kernel engines' transfer_now() do.
std::int64_t transfer_on_this_thread(const IoRequest& r) noexcept;
}  // namespace detail

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
  std::int64_t transfer_now(const IoRequest& req) override { return detail::transfer_on_this_thread(req); }

 private:
  unsigned depth_;
  std::deque<IoRequest> queued_;
  std::deque<IoCompletion> done_;
};

}  // namespace sluice
