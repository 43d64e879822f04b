// The producing side of a TransferFuture, for the library's own asynchronous work (the async I/O
// thread, the pool, the stream-ordered calls). Transfer_future.cpp has the shared state.
#pragma once

#include <exception>

#include "sluice/transfer.hpp"
#include "sluice/transfer_future.hpp"

namespace sluice::detail {

/// One result, given once: set_value or set_exception. A promise destroyed without either gives
/// its future std::future_error (broken_promise), as std::promise does. Giving it wakes a thread
/// only if one waits on the future.
class TransferPromise {
 public:
  TransferPromise();
  TransferPromise(TransferPromise&& other) noexcept;
  TransferPromise& operator=(TransferPromise&&) = delete;
  TransferPromise(const TransferPromise&) = delete;
  TransferPromise& operator=(const TransferPromise&) = delete;
  ~TransferPromise();

  /// The future; at most once (std::future_error future_already_retrieved after).
  [[nodiscard]] TransferFuture get_future();
  /// std::future_error (promise_already_satisfied) when given before.
  void set_value(TransferResult result);
  void set_exception(std::exception_ptr error);

 private:
  void give();  // checks that the result may be given, once

  TransferState* state_;
  bool future_taken_ = false;
  bool given_ = false;
};

/// A future whose result is already there.
TransferFuture ready_future(TransferResult result);

}  // namespace sluice::detail
