// A small fixed pool of worker threads with a FIFO queue. Large transfers enlist helpers from
// it; a transfer never waits for a helper that has not started, so nesting cannot deadlock.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <future>
#include <mutex>
#include <queue>
#include <thread>
#include <type_traits>
#include <vector>

#include "sluice/export.hpp"

namespace sluice {

class SLUICE_API ThreadPool {
 public:
  explicit ThreadPool(unsigned threads);
  ~ThreadPool();  // runs what is queued, then joins
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  /// Queues fn; the returned future carries its result or exception.
  template <typename Fn>
  auto submit(Fn fn) -> std::future<std::invoke_result_t<Fn>> {
    using R = std::invoke_result_t<Fn>;
    auto task = std::make_shared<std::packaged_task<R()>>(std::move(fn));
    auto fut = task->get_future();
    post([task] { (*task)(); });
    return fut;
  }

  /// Queues fn with no result; fn must not throw.
  void post(std::function<void()> fn);

  /// Grows the pool to at least n threads (never shrinks).
  void ensure_threads(unsigned n);
  [[nodiscard]] unsigned size() const;

 private:
  void run();

  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::queue<std::function<void()>> queue_;
  std::vector<std::thread> threads_;
  bool stopping_ = false;
};

/// The process-wide pool used by transfers; sized from the configuration on first use.
SLUICE_API ThreadPool& default_pool();

}  // namespace sluice
