#include "sluice/faulty_engine.hpp"

#include <algorithm>
#include <thread>

namespace sluice {

FaultyEngine::FaultyEngine(std::unique_ptr<IoEngine> inner, FaultPlan plan)
    : inner_(std::move(inner)), plan_(plan) {}

unsigned FaultyEngine::in_flight() const noexcept {
  return inner_->in_flight() + static_cast<unsigned>(synthetic_.size());
}

void FaultyEngine::prepare(const IoRequest& req) {
  ++seen_;
  if (plan_.delay.count() > 0) std::this_thread::sleep_for(plan_.delay);
  const bool eligible = !plan_.only || *plan_.only == req.op;
  if (eligible && plan_.every != 0 && seen_ % plan_.every == 0) {
    ++injected_;
    if (plan_.error != 0) {
      synthetic_.push_back({req.tag, -static_cast<std::int64_t>(plan_.error)});
      return;
    }
    if (plan_.short_transfer && req.len > 512) {
      // Half, rounded down to 512, but never 0: a zero-byte result is not a short transfer but
      // end of file (reads) or no space (writes), which the caller rightly treats as errors.
      IoRequest shorter = req;
      shorter.len = std::max<std::uint32_t>(512, (req.len / 2) / 512 * 512);
      inner_->prepare(shorter);
      return;
    }
  }
  inner_->prepare(req);
}

std::size_t FaultyEngine::submit_and_wait(std::span<IoCompletion> out, std::size_t min_complete) {
  std::size_t count = 0;
  while (!synthetic_.empty() && count < out.size()) {
    out[count++] = synthetic_.back();
    synthetic_.pop_back();
  }
  if (inner_->in_flight() == 0 || count == out.size()) return count;
  const std::size_t need = min_complete > count ? min_complete - count : 0;
  return count + inner_->submit_and_wait(out.subspan(count), need);
}

}  // namespace sluice
