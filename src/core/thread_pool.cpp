#include "sluice/thread_pool.hpp"

#include <pthread.h>

#include <algorithm>
#include <atomic>

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

namespace {

// The default pool, made on first use. A forked child gets a pool of its own: its parent's
// workers do not exist in it, so work posted to theirs would never run. Creation is locked across
// fork() (pthread_atfork), so the child never inherits the lock held.
std::atomic<ThreadPool*> g_pool{nullptr};
std::mutex g_pool_creation;
void lock_pool_creation() {
  g_pool_creation.lock();
}
void unlock_pool_creation() {
  g_pool_creation.unlock();
}
void forget_pool_in_child() {
  g_pool.store(nullptr);  // the parent's stays allocated: its workers' state is not ours to free
  g_pool_creation.unlock();
}

}  // namespace

ThreadPool& default_pool() {
  // Leaked on purpose: workers may still hold thread-local engines when static destructors run,
  // and a joined pool at exit would block on work queued by other static destructors.
  static const bool fork_aware =
      ::pthread_atfork(&lock_pool_creation, &unlock_pool_creation, &forget_pool_in_child) == 0;
  (void)fork_aware;
  if (ThreadPool* p = g_pool.load(std::memory_order_acquire)) return *p;
  const std::lock_guard lock(g_pool_creation);
  if (ThreadPool* p = g_pool.load(std::memory_order_relaxed)) return *p;
  auto* pool =
      new ThreadPool(std::max(config()->effective_threads(), std::thread::hardware_concurrency()));
  g_pool.store(pool, std::memory_order_release);
  return *pool;
}

}  // namespace sluice
