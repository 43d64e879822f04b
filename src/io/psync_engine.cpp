#include "psync_engine.hpp"

#include <unistd.h>

#include <cerrno>

namespace sluice {

void PsyncEngine::prepare(const IoRequest& req) { queued_.push_back(req); }

std::size_t PsyncEngine::submit_and_wait(std::span<IoCompletion> out, std::size_t min_complete) {
  (void)min_complete;  // every queued request completes here, so any minimum is met
  while (!queued_.empty()) {
    const IoRequest r = queued_.front();
    queued_.pop_front();
    done_.push_back({r.tag, detail::transfer_on_this_thread(r)});
  }
  std::size_t count = 0;
  while (count < out.size() && !done_.empty()) {
    out[count++] = done_.front();
    done_.pop_front();
  }
  return count;
}

}  // namespace sluice
