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
    ssize_t n = 0;
    do {
      n = r.op == IoOp::read ? ::pread(r.fd, r.buf, r.len, static_cast<off_t>(r.offset))
                             : ::pwrite(r.fd, r.buf, r.len, static_cast<off_t>(r.offset));
    } while (n < 0 && errno == EINTR);
    done_.push_back({r.tag, n < 0 ? -static_cast<std::int64_t>(errno) : n});
  }
  std::size_t count = 0;
  while (count < out.size() && !done_.empty()) {
    out[count++] = done_.front();
    done_.pop_front();
  }
  return count;
}

}  // namespace sluice
