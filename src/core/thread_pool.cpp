#include "sluice/thread_pool.hpp"

#include <algorithm>

#include "core/per_process.hpp"
#include "sluice/config.hpp"

namespace sluice {

ThreadPool::ThreadPool(unsigned threads) { ensure_threads(std::max(1U, threads)); }

ThreadPool::~ThreadPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadPool::post(std::function<void()> fn) {
  {
    std::lock_guard lock(mutex_);
    queue_.push(std::move(fn));
  }
  cv_.notify_one();
}

void ThreadPool::ensure_threads(unsigned n) {
  std::lock_guard lock(mutex_);
  while (threads_.size() < n) threads_.emplace_back([this] { run(); });
}

unsigned ThreadPool::size() const {
  std::lock_guard lock(mutex_);
  return static_cast<unsigned>(threads_.size());
}

void ThreadPool::run() {
  for (;;) {
    std::function<void()> fn;
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      fn = std::move(queue_.front());
      queue_.pop();
    }
    fn();
  }
}

ThreadPool& default_pool() {
  // Leaked on purpose: workers may still hold thread-local engines when static destructors run,
  // and a joined pool at exit would block on work queued by other static destructors. One per
  // process: a forked child's parent's workers do not exist in it (per_process.hpp).
  return detail::PerProcess<ThreadPool>::get([] {
    return new ThreadPool(std::max(config()->effective_threads(), std::thread::hardware_concurrency()));
  });
}

}  // namespace sluice
