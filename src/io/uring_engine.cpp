#include "uring_engine.hpp"

#include <cerrno>
#include <cstring>

#include "sluice/error.hpp"

#if defined(__SANITIZE_THREAD__)
#define SLUICE_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SLUICE_TSAN 1
#endif
#endif
#ifdef SLUICE_TSAN
#include <sanitizer/tsan_interface.h>
#endif

namespace sluice {
namespace {

// liburing maps and unmaps a ring's memory with raw system calls, which ThreadSanitizer does not
// see: when a thread's ring is torn down and another thread's new ring is mapped at the same
// address, it takes the old thread's accesses and the new thread's for a race. The kernel orders
// them (the unmap returns before the map that reuses the address); this tells ThreadSanitizer so.
// A ring shared between threads without a lock is still reported.
[[maybe_unused]] char ring_lifetimes;
void ring_created() noexcept {
#ifdef SLUICE_TSAN
  __tsan_acquire(&ring_lifetimes);
#endif
}
void ring_destroyed() noexcept {
#ifdef SLUICE_TSAN
  __tsan_release(&ring_lifetimes);
#endif
}

}  // namespace

UringEngine::UringEngine(unsigned depth) : depth_(depth) {
  io_uring_params params{};
  // Completions are reaped by the submitting thread, so cooperative task running is safe and
  // saves an IPI per completion; SUBMIT_ALL keeps going past a bad SQE. Older kernels refuse
  // these flags with EINVAL, so retry without them.
  params.flags = IORING_SETUP_COOP_TASKRUN | IORING_SETUP_SUBMIT_ALL;
  int rc = io_uring_queue_init_params(depth, &ring_, &params);
  if (rc == -EINVAL) {
    params = {};
    rc = io_uring_queue_init_params(depth, &ring_, &params);
  }
  if (rc < 0) throw_os_error(-rc, {.op = "io_uring_setup"}, "cannot create an io_uring");
  ring_created();
}

UringEngine::~UringEngine() {
  // Drain what is still in flight: the kernel may be writing into buffers that are about to be
  // freed by our caller.
  IoCompletion sink[32];
  while (in_flight_ > 0) {
    try {
      submit_and_wait(sink, 1);
    } catch (...) {
      break;
    }
  }
  ring_destroyed();
  io_uring_queue_exit(&ring_);
}

void UringEngine::prepare(const IoRequest& r) {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  if (sqe == nullptr) {
    io_uring_submit(&ring_);
    sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr) throw_os_error(EBUSY, {.op = "io_uring_get_sqe"}, "submission queue full");
  }
  if (r.op == IoOp::read) {
    if (r.buf_index >= 0) {
      io_uring_prep_read_fixed(sqe, r.fd, r.buf, r.len, r.offset, r.buf_index);
    } else {
      io_uring_prep_read(sqe, r.fd, r.buf, r.len, r.offset);
    }
  } else {
    if (r.buf_index >= 0) {
      io_uring_prep_write_fixed(sqe, r.fd, r.buf, r.len, r.offset, r.buf_index);
    } else {
      io_uring_prep_write(sqe, r.fd, r.buf, r.len, r.offset);
    }
  }
  if (r.fixed_file) sqe->flags |= IOSQE_FIXED_FILE;
  io_uring_sqe_set_data64(sqe, r.tag);
  ++in_flight_;
}

std::size_t UringEngine::reap(std::span<IoCompletion> out) {
  io_uring_cqe* cqes[64];
  std::size_t count = 0;
  while (count < out.size()) {
    const unsigned want = static_cast<unsigned>(std::min<std::size_t>(64, out.size() - count));
    const unsigned got = io_uring_peek_batch_cqe(&ring_, cqes, want);
    if (got == 0) break;
    for (unsigned i = 0; i < got; ++i) {
      out[count++] = {io_uring_cqe_get_data64(cqes[i]), cqes[i]->res};
    }
    io_uring_cq_advance(&ring_, got);
    in_flight_ -= got;
  }
  return count;
}

std::size_t UringEngine::submit_and_wait(std::span<IoCompletion> out, std::size_t min_complete) {
  const auto want = static_cast<unsigned>(std::min<std::size_t>(min_complete, in_flight_));
  std::size_t count = 0;
  for (int attempt = 0;; ++attempt) {
    const unsigned need = want > count ? static_cast<unsigned>(want - count) : 0;
    const int rc = io_uring_submit_and_wait(&ring_, need);
    if (rc >= 0 || rc == -EINTR || rc == -ETIME) {
      count += reap(out.subspan(count));
      if (count >= want || count == out.size()) return count;
      continue;
    }
    if ((rc == -EAGAIN || rc == -EBUSY) && attempt < 1000) {
      // The kernel is short of resources or the CQ is full: make room by reaping, then retry.
      count += reap(out.subspan(count));
      if (count >= want && count > 0) return count;
      continue;
    }
    throw_os_error(-rc, {.op = "io_uring_enter"}, "submission failed");
  }
}

bool UringEngine::register_buffers(std::span<const iovec> buffers) {
  if (buffers_registered_) unregister_buffers();
  const int rc =
      io_uring_register_buffers(&ring_, buffers.data(), static_cast<unsigned>(buffers.size()));
  buffers_registered_ = rc == 0;
  return buffers_registered_;
}

void UringEngine::unregister_buffers() {
  if (buffers_registered_) io_uring_unregister_buffers(&ring_);
  buffers_registered_ = false;
}

int UringEngine::register_file(int fd) {
  if (files_failed_) return -1;
  if (!files_ready_) {
    if (io_uring_register_files_sparse(&ring_, file_slots) != 0) {
      files_failed_ = true;
      return -1;
    }
    files_ready_ = true;
    for (int s = static_cast<int>(file_slots) - 1; s >= 0; --s) free_slots_.push_back(s);
  }
  if (free_slots_.empty()) return -1;
  const int slot = free_slots_.back();
  if (io_uring_register_files_update(&ring_, static_cast<unsigned>(slot), &fd, 1) != 1) return -1;
  free_slots_.pop_back();
  return slot;
}

void UringEngine::unregister_file(int slot) {
  if (slot < 0 || !files_ready_) return;
  int none = -1;
  io_uring_register_files_update(&ring_, static_cast<unsigned>(slot), &none, 1);
  free_slots_.push_back(slot);
}

}  // namespace sluice
