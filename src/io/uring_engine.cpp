// Ring set-up. The ring is created single-issuer with deferred task running
// (IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN, Linux 6.1+), as fio 3.33's io_uring
// engine sets its rings up: a completion then costs whoever completes it (an interrupt, a loop
// device's worker) one lock-free list insertion instead of queueing task work on our thread, and
// the completions run in a batch when the owner next waits. 4 KiB random reads at depth 32 on a
// loop device over tmpfs, the bench loop's default shape, slices alternated within one process
// over three 30 s runs: 0.99-1.21x the IOPS of cooperative task running at 0.88-1.0x its CPU per
// I/O (docs/tuning.md, "Small random reads"). The price is that only the creating thread may
// submit and reap, which is how engines are used (one per thread). TASKRUN_FLAG makes liburing
// enter the kernel to run pending completions when a caller only polls (min_complete 0).
// Kernels before 6.1 refuse the flags with EINVAL: the ring is then set up with cooperative task
// running, and before 5.19 with no flags.
#include "uring_engine.hpp"

#include "psync_engine.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

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

constexpr std::uint64_t wake_tag = UINT64_MAX;  // the wake-up read's completion, never handed out

constexpr unsigned setup_ladder[] = {
    IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_COOP_TASKRUN |
        IORING_SETUP_TASKRUN_FLAG | IORING_SETUP_SUBMIT_ALL,
    IORING_SETUP_COOP_TASKRUN | IORING_SETUP_SUBMIT_ALL,
    0,
};

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
  int rc = -EINVAL;
  for (const unsigned flags : setup_ladder) {
    io_uring_params params{};
    params.flags = flags;
    rc = io_uring_queue_init_params(depth, &ring_, &params);
    setup_flags_ = flags;
    if (rc != -EINVAL) break;
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
  io_uring_queue_exit(&ring_);  // cancels the armed wake-up read
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

io_uring_sqe* UringEngine::next_sqe() {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  if (sqe == nullptr) {
    io_uring_submit(&ring_);
    sqe = io_uring_get_sqe(&ring_);
    if (sqe == nullptr) throw_os_error(EBUSY, {.op = "io_uring_get_sqe"}, "submission queue full");
  }
  return sqe;
}

void UringEngine::prepare(const IoRequest& r) {
  io_uring_sqe* sqe = next_sqe();
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
  if (r.op == IoOp::read && r.cached_only) sqe->rw_flags = RWF_NOWAIT;
  io_uring_sqe_set_data64(sqe, r.tag);
  ++in_flight_;
}

std::int64_t UringEngine::transfer_now(const IoRequest& r) {
  if (r.fixed_file) return IoEngine::transfer_now(r);
  return detail::transfer_on_this_thread(r);
}

std::size_t UringEngine::reap(std::span<IoCompletion> out, bool* woken) {
  io_uring_cqe* cqes[64];
  std::size_t count = 0;
  while (count < out.size()) {
    const unsigned want = static_cast<unsigned>(std::min<std::size_t>(64, out.size() - count));
    const unsigned got = io_uring_peek_batch_cqe(&ring_, cqes, want);
    if (got == 0) break;
    for (unsigned i = 0; i < got; ++i) {
      const std::uint64_t tag = io_uring_cqe_get_data64(cqes[i]);
      if (tag == wake_tag) {  // another thread asked this wait to end (or the read failed)
        wake_armed_ = false;
        *woken = true;
        continue;
      }
      out[count++] = {tag, cqes[i]->res};
      --in_flight_;
    }
    io_uring_cq_advance(&ring_, got);
  }
  return count;
}

std::size_t UringEngine::submit_and_wait(std::span<IoCompletion> out, std::size_t min_complete) {
  const auto want = static_cast<unsigned>(std::min<std::size_t>(min_complete, in_flight_));
  std::size_t count = 0;
  bool woken = false;
  for (int attempt = 0;; ++attempt) {
    const unsigned need = want > count ? static_cast<unsigned>(want - count) : 0;
    if (need > 0 && wake_fd_ >= 0 && !wake_armed_) arm_wake();
    const int rc = io_uring_submit_and_wait(&ring_, need);
    if (rc >= 0 || rc == -EINTR || rc == -ETIME) {
      count += reap(out.subspan(count), &woken);
      if (count >= want || count == out.size() || woken) return count;
      continue;
    }
    if ((rc == -EAGAIN || rc == -EBUSY) && attempt < 1000) {
      // The kernel is short of resources or the CQ is full: make room by reaping, then retry.
      count += reap(out.subspan(count), &woken);
      if ((count >= want && count > 0) || woken) return count;
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

// An eventfd read in the ring: a write to the eventfd from any thread completes it, which ends
// the owner's wait. The descriptor stays blocking so that io_uring arms a poll for the read
// instead of failing it with EAGAIN.
bool UringEngine::enable_wake() {
  if (wake_fd_ < 0) wake_fd_ = ::eventfd(0, EFD_CLOEXEC);
  return wake_fd_ >= 0;
}

void UringEngine::arm_wake() {
  io_uring_sqe* sqe = next_sqe();
  io_uring_prep_read(sqe, wake_fd_, &wake_count_, sizeof wake_count_, 0);
  io_uring_sqe_set_data64(sqe, wake_tag);
  wake_armed_ = true;
}

void UringEngine::wake() noexcept {
  if (wake_fd_ >= 0) (void)!::eventfd_write(wake_fd_, 1);
}

}  // namespace sluice
