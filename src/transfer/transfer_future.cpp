// TransferFuture and TransferPromise: a one-shot result shared by one producer and one consumer.
// The state word says pending, pending with a thread asleep on it, or ready. The producer stores
// the result, then swaps in ready and makes the futex wake call only if the word said a thread
// sleeps; a waiter marks the word before sleeping on it, so a wake-up cannot be lost between its
// look and its sleep (the futex compares the word in the kernel). Two references (promise and
// future) free the state when both are gone, in either order, on either thread.
#include "sluice/transfer_future.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <future>
#include <utility>

#include "io/futex.hpp"
#include "sluice/transfer.hpp"
#include "transfer/transfer_promise.hpp"

namespace sluice::detail {

class TransferState {
 public:
  static constexpr std::uint32_t pending = 0;
  static constexpr std::uint32_t sleeping = 1;  // pending, and a thread waits in the kernel
  static constexpr std::uint32_t done = 2;

  static TransferFuture future_of(TransferState* s) noexcept { return TransferFuture(s); }

  void release() noexcept {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  [[nodiscard]] bool is_done() const noexcept {
    return word_.load(std::memory_order_acquire) == done;
  }

  // After the result or the error is stored: the future may take it.
  void mark_done() noexcept {
    if (word_.exchange(done, std::memory_order_acq_rel) == sleeping) futex_wake_all(word_);
  }

  bool wait(std::int64_t ns) const noexcept {
    using Clock = std::chrono::steady_clock;
    const bool forever = ns == INT64_MAX;
    const Clock::time_point deadline =
        forever ? Clock::time_point::max() : Clock::now() + std::chrono::nanoseconds(ns);
    std::uint32_t w = word_.load(std::memory_order_acquire);
    while (w != done) {
      if (ns == 0) return false;
      std::int64_t left = INT64_MAX;
      if (!forever) {
        left =
            std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - Clock::now()).count();
        if (left <= 0) return false;
      }
      if (w == pending && !word_.compare_exchange_weak(w, sleeping, std::memory_order_acquire)) {
        continue;  // w now holds the word as it is
      }
      futex_wait(word_, sleeping, left);
      w = word_.load(std::memory_order_acquire);
    }
    return true;
  }

  TransferResult take() {
    if (error_) std::rethrow_exception(error_);
    return std::move(result_);
  }

  TransferResult result_;
  std::exception_ptr error_;

 private:
  mutable std::atomic<std::uint32_t> word_{pending};
  std::atomic<std::uint32_t> refs_{2};  // the promise's and the future's
};

[[noreturn]] void no_state() {
  throw std::future_error(std::future_errc::no_state);
}

}  // namespace sluice::detail

namespace sluice {

using detail::no_state;
using detail::TransferState;

TransferFuture& TransferFuture::operator=(TransferFuture&& other) noexcept {
  if (this != &other) {
    if (state_ != nullptr) state_->release();
    state_ = std::exchange(other.state_, nullptr);
  }
  return *this;
}

TransferFuture::~TransferFuture() {
  if (state_ != nullptr) state_->release();
}

bool TransferFuture::ready() const {
  if (state_ == nullptr) no_state();
  return state_->is_done();
}

void TransferFuture::wait() const {
  (void)wait_ns(INT64_MAX);
}

std::future_status TransferFuture::wait_ns(std::int64_t ns) const {
  if (state_ == nullptr) no_state();
  return state_->wait(ns) ? std::future_status::ready : std::future_status::timeout;
}

TransferResult TransferFuture::get() {
  if (state_ == nullptr) no_state();
  state_->wait(INT64_MAX);
  TransferState* s = std::exchange(state_, nullptr);
  struct Release {
    TransferState* s;
    ~Release() { s->release(); }
  } release{s};
  return s->take();
}

}  // namespace sluice

namespace sluice::detail {

TransferPromise::TransferPromise() : state_(new TransferState) {}

TransferPromise::TransferPromise(TransferPromise&& other) noexcept
    : state_(std::exchange(other.state_, nullptr)),
      future_taken_(other.future_taken_),
      given_(other.given_) {}

TransferPromise::~TransferPromise() {
  if (state_ == nullptr) return;
  if (!given_) {
    state_->error_ = std::make_exception_ptr(std::future_error(std::future_errc::broken_promise));
    state_->mark_done();
  }
  // A future never taken holds no reference of its own: drop it here.
  if (!future_taken_) state_->release();
  state_->release();
}

TransferFuture TransferPromise::get_future() {
  if (state_ == nullptr) no_state();
  if (future_taken_) throw std::future_error(std::future_errc::future_already_retrieved);
  future_taken_ = true;
  return TransferState::future_of(state_);
}

void TransferPromise::set_value(TransferResult result) {
  give();
  state_->result_ = std::move(result);
  state_->mark_done();
}

void TransferPromise::set_exception(std::exception_ptr error) {
  give();
  state_->error_ = std::move(error);
  state_->mark_done();
}

void TransferPromise::give() {
  if (state_ == nullptr) no_state();
  if (given_) throw std::future_error(std::future_errc::promise_already_satisfied);
  given_ = true;
}

TransferFuture ready_future(TransferResult result) {
  TransferPromise p;
  TransferFuture f = p.get_future();
  p.set_value(std::move(result));
  return f;
}

}  // namespace sluice::detail
